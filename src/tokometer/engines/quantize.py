"""``llama-quantize``: find it, build it into a cached build that lacks it, and requantise a GGUF with it.

The llama.cpp build (`tokometer.engines.build`) compiles ``llama-quantize`` together with
``llama-server`` (one ``cmake --build``, both into ``<cache>/llama.cpp/b11434/bin/``). A build cached
before that has only the server: `build_llama_quantize` then builds the one missing target from the
kept source (``<cache>/llama.cpp/sources/*.tar.gz``, downloaded once if it is not there) with the
cmake flags BUILD-INFO.json records, and leaves the server alone. It still compiles ggml and
libllama (the build tree is not kept), about two thirds of a full build.

`requantized` derives a coarser quantisation of a model (``--allow-requantize``: e.g. the bundled
Q4_K_M into Q2_K) into ``<cache>/quantized/``, keyed by the source file's size, mtime and the type,
so tests and ``tokometer quality engine:bundled:Q2_K`` pay for it once.

Lookup order of `find_llama_quantize` (first hit wins): an explicit path, ``$TOKOMETER_LLAMA_QUANTIZE``,
``llama-quantize`` on PATH, the cached build (built on demand with ``build=True``).
``python -m tokometer.engines.quantize`` builds it if needed and prints its path (exit 2 and one line
on stderr on failure).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, TextIO

from tokometer.engines._fs import LLAMA_CPP_BUILD, LLAMA_QUANTIZE_EXE, build_dir, built_quantize_path
from tokometer.engines.build import (
    BASE_CMAKE_FLAGS,
    BuildSteps,
    CMakeSteps,
    build_info_path,
    build_llama_server,
    cmake_configure_and_build,
    flag_sets,
    read_build_info,
    run_build_command,
)
from tokometer.engines.buildprogress import BuildProgress, duration, progress_for_stderr
from tokometer.engines.signals import exit_reason
from tokometer.util.atomicfile import write_atomic
from tokometer.util.cachedir import cache_root, file_lock
from tokometer.util.errors import EngineError

__all__ = ["ENV_VAR", "QUANT_TYPE", "CMakeQuantizeSteps", "QuantizeSteps", "build_llama_quantize",
           "find_llama_quantize", "quantize_gguf", "requantized"]

ENV_VAR = "TOKOMETER_LLAMA_QUANTIZE"
QUANT_TYPE = re.compile(r"^(?:I?Q[1-8](?:_[A-Z0-9]+)*|TQ[12]_0|F16|BF16|F32|COPY)$", re.IGNORECASE)
"""The shape of a llama-quantize type name (Q2_K, Q4_K_M, IQ3_XS, Q8_0, F16 ...); llama-quantize itself judges it."""


class QuantizeSteps(BuildSteps, Protocol):
    """The build's steps plus building the one ``llama-quantize`` target; `CMakeQuantizeSteps` for real."""

    def compile_quantize(self, source: Path, build: Path, cmake_flags: Sequence[str], jobs: int, log: TextIO,
                         progress: BuildProgress) -> Path:
        """Configure with ``cmake_flags`` and build only ``llama-quantize`` in ``build``; return its path."""


class CMakeQuantizeSteps(CMakeSteps):
    """`CMakeSteps`, and ``cmake --build --target llama-quantize`` alone."""

    def compile_quantize(self, source: Path, build: Path, cmake_flags: Sequence[str], jobs: int, log: TextIO,
                         progress: BuildProgress) -> Path:
        progress.phase("configure", "cmake with the flags the cached llama-server was built with")
        return cmake_configure_and_build(source, build, cmake_flags, ("llama-quantize",), jobs, log, progress,
                                         "llama-quantize")[0]


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def find_llama_quantize(explicit: str | None = None, *, build: bool = False,
                        progress: BuildProgress | None = None) -> str:
    """The ``llama-quantize`` to run; with ``build`` a missing one is built into the cache (minutes)."""
    for origin, given in (("the explicit path", explicit), (f"${ENV_VAR}", os.environ.get(ENV_VAR))):
        if given:
            found = shutil.which(given) if os.sep not in given else None
            path = Path(found or given).expanduser()
            if not _executable(path):
                raise EngineError(f"llama-quantize from {origin} ({given}) is not an executable file")
            return str(path.resolve())
    on_path = shutil.which("llama-quantize")
    if on_path:
        return on_path
    if _executable(built_quantize_path()):
        return str(built_quantize_path())
    if not build:
        raise EngineError("llama-quantize not found: run `tokometer serve --prepare` (builds it beside "
                          "tokometer's llama-server) or put llama-quantize on PATH")
    return str(build_llama_quantize(progress=progress))


def build_llama_quantize(jobs: int | None = None, progress: BuildProgress | None = None,
                         steps: QuantizeSteps | None = None) -> Path:
    """Return the cached ``llama-quantize``, building it first if the cached build lacks it.

    With no build cached, this is the full build (`build_llama_server`, which makes both). With a
    server cached but no ``llama-quantize``, only that target is built, with the flags the server
    was built with; BUILD-INFO.json's ``tools`` then lists it.
    """
    progress = progress or BuildProgress()
    steps = steps or CMakeQuantizeSteps()
    target = built_quantize_path()
    if _executable(target):
        return target
    build_llama_server(jobs=jobs, progress=progress, steps=steps)
    if _executable(target):
        return target
    steps.preflight()
    with file_lock(build_dir().parent / f"{LLAMA_CPP_BUILD}.lock"):
        if _executable(target):
            return target
        return _build_quantize_locked(jobs or os.cpu_count() or 1, progress, steps)


def _recorded_cmake_flags() -> list[str]:
    """The flags the cached server was built with (BUILD-INFO), so both tools match; native if unrecorded."""
    recorded = read_build_info().get("cmake_flags")
    if isinstance(recorded, list) and recorded and all(isinstance(flag, str) for flag in recorded):
        return list(recorded)
    return [*BASE_CMAKE_FLAGS, *flag_sets(amx=False)[0].cmake_flags]


def _build_quantize_locked(jobs: int, progress: BuildProgress, steps: QuantizeSteps) -> Path:
    root = build_dir().parent
    log_path = root / f"{LLAMA_CPP_BUILD}-quantize-build.log"
    started = time.monotonic()
    progress.say("the cached llama.cpp build has no llama-quantize: building that one target from the kept source "
                 "(the server is left as it is)")
    cmake_flags = _recorded_cmake_flags()
    try:
        with tempfile.TemporaryDirectory(prefix=f"{LLAMA_CPP_BUILD}-tmp-quantize", dir=root) as tmp_name, \
                log_path.open("w", encoding="utf-8") as log:
            tmp = Path(tmp_name)
            source = steps.fetch(tmp, log, progress)
            built = steps.compile_quantize(source, tmp / "build-quantize", cmake_flags, jobs, log, progress)
            _check_runs(built)
            staged = built_quantize_path().with_name(f".{LLAMA_QUANTIZE_EXE}.{os.getpid()}")
            shutil.copy2(built, staged)
            os.replace(staged, built_quantize_path())
    finally:
        progress.close()
    info = read_build_info()
    if info:
        info["tools"] = sorted({*info.get("tools", ["llama-server"]), LLAMA_QUANTIZE_EXE})
        info["quantize_build_seconds"] = round(time.monotonic() - started, 1)
        write_atomic(build_info_path(), json.dumps(info, indent=2) + "\n")
    progress.say(f"built {built_quantize_path()} in {duration(time.monotonic() - started)}")
    return built_quantize_path()


def _check_runs(binary: Path) -> None:
    """``llama-quantize`` with no arguments prints its usage and exits 1; death by a signal means a bad build."""
    try:
        done = subprocess.run([str(binary)], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise EngineError(f"the new llama-quantize does not run: {exc}") from exc
    if done.returncode < 0:
        raise EngineError(f"the new llama-quantize {exit_reason(done.returncode)} on this CPU")


def quantize_gguf(source: Path, dest: Path, quant_type: str, *, binary: str | None = None,
                  threads: int | None = None) -> Path:
    """Write ``source`` requantised to ``quant_type`` at ``dest`` (``--allow-requantize``; atomically)."""
    if not QUANT_TYPE.match(quant_type):
        raise EngineError(f"{quant_type!r} is not a llama-quantize type (e.g. Q2_K, Q3_K_M, Q4_K_M, Q8_0)")
    exe = binary or find_llama_quantize(build=True)
    dest.parent.mkdir(parents=True, exist_ok=True)
    partial = dest.with_name(f".{dest.name}.{os.getpid()}.partial")
    argv = [exe, "--allow-requantize", str(source), str(partial), quant_type.upper(),
            str(threads or os.cpu_count() or 1)]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, errors="replace", timeout=1800, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        partial.unlink(missing_ok=True)
        raise EngineError(f"llama-quantize failed: {exc}") from exc
    if done.returncode != 0 or not partial.is_file():
        partial.unlink(missing_ok=True)
        tail = " ".join((done.stderr + done.stdout).split()[-40:])
        raise EngineError(f"llama-quantize {exit_reason(done.returncode)} quantising {source.name} to "
                          f"{quant_type}: {tail}")
    os.replace(partial, dest)
    return dest


def requantized(source: Path, quant_type: str, *, binary: str | None = None) -> Path:
    """``source`` requantised to ``quant_type``, made once into ``<cache>/quantized/`` (keyed by the source's
    path, size and mtime, and the type); concurrent callers wait for one quantisation."""
    stat = source.stat()
    key = hashlib.sha256(f"{source.resolve()}|{stat.st_size}|{stat.st_mtime_ns}".encode()).hexdigest()[:12]
    dest = cache_root() / "quantized" / f"{source.stem}-{quant_type.upper()}-{key}.gguf"
    if dest.is_file():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(dest.with_suffix(".lock")):
        if dest.is_file():
            return dest
        return quantize_gguf(source, dest, quant_type, binary=binary)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m tokometer.engines.quantize``: print llama-quantize's path, building it if needed."""
    parser = argparse.ArgumentParser(prog="python -m tokometer.engines.quantize",
                                     description="Find or build llama-quantize (beside tokometer's llama-server).")
    parser.add_argument("-j", "--jobs", type=int, default=None, help="parallel compile jobs (default: all CPUs)")
    args = parser.parse_args(argv)
    progress = progress_for_stderr()
    return run_build_command(
        lambda: (find_llama_quantize() if _executable(built_quantize_path()) or shutil.which("llama-quantize")
                 else str(build_llama_quantize(jobs=args.jobs, progress=progress))), progress)


if __name__ == "__main__":
    sys.exit(main())
