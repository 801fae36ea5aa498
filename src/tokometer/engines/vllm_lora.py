"""A LoRA adapter for the bundled model, made here with PEFT, for vLLM to serve (``--enable-lora
--lora-modules NAME=DIR``): what the tests of a tenant mix (``bench --mix``) run against a real engine.

vLLM's venv (`tokometer.engines.vllm_env`) has torch, transformers and every package PEFT needs, but not PEFT:
adding it to the venv's recipe would make a new venv (its key hashes the packages). So PEFT, pinned
(`PEFT_VERSION`), is installed on its own, without its dependencies, into ``<cache>/vllm/peft-<version>/``
(``pip install --no-deps --target``), and put on the path of the script that writes the adapter
(``vllm_lora_make.py``, run by the venv's interpreter, as ``vllm_convert.py`` is).

The adapter is cached by content like the converted model (`tokometer.engines.vllm_model`): its directory,
``<cache>/vllm/loras/<checkpoint>-lora-r<rank>-s<seed>-peft<version>-r<recipe>/``, names the checkpoint (which
names the GGUF's hash and the conversion's recipe), the rank, the seed, PEFT's version and this recipe; it is
written into a temporary directory and renamed into place under a lock. ``python -m tokometer.engines.vllm_lora``
makes it and prints its path.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Final

from tokometer.engines.vllm_env import prepare_vllm_env
from tokometer.engines.vllm_model import bundled_checkpoint
from tokometer.util.cachedir import cache_root, file_lock
from tokometer.util.errors import EngineError

__all__ = ["LORA_RANK", "PEFT_VERSION", "bundled_lora", "find_bundled_lora"]

PEFT_VERSION: Final = "0.21.2"
LORA_RANK: Final = 8
LORA_SEED: Final = 0
RECIPE: Final = 1  # bump when vllm_lora_make.py changes what it writes
MAKER = Path(__file__).with_name("vllm_lora_make.py")
_TIMEOUT_S: Final = 900

Say = Callable[[str], None]


def _peft_dir() -> Path:
    return cache_root() / "vllm" / f"peft-{PEFT_VERSION}"


def _target(checkpoint: Path) -> Path:
    return (cache_root() / "vllm" / "loras"
            / f"{checkpoint.name}-lora-r{LORA_RANK}-s{LORA_SEED}-peft{PEFT_VERSION}-r{RECIPE}")


def find_bundled_lora(checkpoint: Path) -> Path | None:
    """The adapter for ``checkpoint``, if it has been made here; else None."""
    target = _target(checkpoint)
    return target if (target / "adapter_config.json").is_file() else None


def _run(argv: list[str], what: str, env: dict[str, str] | None = None) -> None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EngineError(f"{what} failed: {exc}") from exc
    if done.returncode != 0:
        tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
        raise EngineError(f"{what} failed (status {done.returncode}): {tail}")


def prepare_peft(python: Path, say: Say) -> Path:
    """PEFT ``PEFT_VERSION`` in a folder of its own (installed once, without its dependencies, which vLLM's venv
    has); EngineError when pip cannot install it."""
    final = _peft_dir()
    if (final / "peft").is_dir():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(final.parent / ".peft.lock"):
        if (final / "peft").is_dir():
            return final
        work = Path(tempfile.mkdtemp(prefix=".peft-", dir=final.parent))
        try:
            say(f"installing PEFT {PEFT_VERSION} (once) for vLLM's venv")
            _run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps",
                  "--target", str(work), f"peft=={PEFT_VERSION}"], f"installing PEFT {PEFT_VERSION}")
            os.replace(work, final)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return final


def bundled_lora(say: Say | None = None) -> Path:
    """The bundled model's LoRA adapter directory, made first if needed (seconds, once; PEFT installed once)."""
    say = say or (lambda message: None)
    checkpoint = bundled_checkpoint(say)
    found = find_bundled_lora(checkpoint)
    if found is not None:
        return found
    python = prepare_vllm_env(say) / "bin" / "python"
    peft = prepare_peft(python, say)
    target = _target(checkpoint)
    target.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(target.parent / ".lock"):
        if find_bundled_lora(checkpoint) is not None:
            return target
        work = Path(tempfile.mkdtemp(prefix=".lora-", dir=target.parent))
        try:
            out = work / "adapter"
            say(f"writing a rank-{LORA_RANK} LoRA for {checkpoint.name} with PEFT {PEFT_VERSION}")
            env = {**os.environ, "PYTHONPATH": str(peft), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
            _run([str(python), str(MAKER), str(checkpoint), str(out), str(LORA_RANK), str(LORA_SEED)],
                 f"writing a LoRA for {checkpoint.name}", env=env)
            os.replace(out, target)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    say(f"LoRA ready: {target}")
    return target


if __name__ == "__main__":
    print(bundled_lora(lambda message: print(message, file=sys.stderr)))
