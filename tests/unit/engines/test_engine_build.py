"""The llama.cpp build's logic without a 10-minute compile: the fallback chain, BUILD-INFO, the
re-check of a cached build on another CPU, signal names in errors, progress, and engines that die
with their parent.

The build is driven through its ``BuildSteps`` seam with a **fake compiler**: for each flag set it
"compiles" a tiny executable that either works (a small Python HTTP server that answers the
requests a smoke run makes) or is **deliberately illegal**: a shell script that kills itself with
SIGILL (``kill -ILL $$``), as a ``-march=native`` build with AMX dies on a VM that advertises AMX but
refuses it. CI has no such AMX machine (this one is an AMD EPYC VM), so this is how the Intel/AMX
path is tested; the real smoke run code (``smoke_run``: ``start_llamacpp`` + a few tokens) runs
against those executables unchanged. The real build passing its smoke run is tested in
tests/integration/test_engine_llamacpp.py.
"""

from __future__ import annotations

import io
import json
import shutil
import signal
import struct
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import TextIO

import psutil
import pytest
from click.testing import CliRunner

from tests.helpers import kill_parent_and_expect_child_gone
from tokometer.cli.serve import command as serve_command
from tokometer.engines import build as build_module
from tokometer.engines.binary import find_llama_server
from tokometer.engines.build import (
    FlagSet,
    build_llama_server,
    built_binary_path,
    ensure_runs,
    flag_sets,
    read_build_info,
)
from tokometer.engines.buildprogress import BuildProgress, LineProgress, build_minutes, cmake_percent, duration
from tokometer.engines.cpu import AmxProbe, cpu_fingerprint, cpu_flags, is_x86_64, probe_amx
from tokometer.engines.embedded import start_llamacpp
from tokometer.engines.llamacpp import LlamaCppSettings
from tokometer.engines.process import EngineProcess
from tokometer.engines.signals import EngineDied, exit_reason, signal_advice
from tokometer.engines.smoke import SmokeResult, smoke_run
from tokometer.util.errors import EngineError

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="POSIX signals, Linux prctl")

ILLEGAL = textwrap.dedent("""\
    #!/bin/sh
    # A deliberately illegal "llama-server": dies by SIGILL as an AMX build does on a VM that refuses AMX.
    ulimit -c 0
    if [ "$1" = "--version" ]; then echo "version: 1 (fake, illegal)"; exit 0; fi
    kill -ILL $$
    """)

WORKING = textwrap.dedent("""\
    #!{python}
    # A fake "llama-server" that works: lists its model and completes requests, as a smoke run needs.
    import json, sys
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    args = sys.argv[1:]
    if "--version" in args:
        print("version: 1 (fake)", file=sys.stderr)
        sys.exit(0)
    alias, host, port = (args[args.index(flag) + 1] for flag in ("--alias", "--host", "--port"))
    class Handler(BaseHTTPRequestHandler):
        def _send(self, payload):
            body = json.dumps(payload).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        def do_GET(self):
            self._send({{"data": [{{"id": alias}}]}})
        def do_POST(self):
            request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            self._send({{"choices": [{{"text": " Paris"}}], "usage": {{"completion_tokens": request["max_tokens"]}}}})
        def log_message(self, *args):
            pass
    ThreadingHTTPServer((host, int(port)), Handler).serve_forever()
    """).format(python=sys.executable)


def _script(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


class RecordingProgress(BuildProgress):
    """Keeps every line the build would show."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []
        self.phases: list[str] = []
        self.percents: list[float] = []

    def say(self, message: str) -> None:
        self.lines.append(message)

    def phase(self, name: str, detail: str) -> None:
        super().phase(name, detail)
        self.phases.append(name)

    def compile_percent(self, percent: float) -> None:
        self.percents.append(percent)


class FakeSteps:
    """A fake compiler: per flag set, "works", "sigill" (an illegal binary), "oom" (SIGKILLed, as by the OOM
    killer) or "broken" (does not compile)."""

    def __init__(self, model: Path, outcomes: dict[str, str], amx: AmxProbe | None = None) -> None:
        self.model = model
        self.outcomes = outcomes
        self._amx = amx
        self.fetches = 0
        self.compiled: list[str] = []
        self.smoked: list[Path] = []

    def preflight(self) -> None:
        return None

    def amx(self) -> AmxProbe | None:
        return self._amx

    def fetch(self, work: Path, log: TextIO, progress: BuildProgress) -> Path:
        self.fetches += 1
        progress.phase("download", "fake source")
        source = work / "src" / "llama.cpp"
        source.mkdir(parents=True)
        return source

    def compile(self, source: Path, build: Path, flags: FlagSet, jobs: int, log: TextIO,
                progress: BuildProgress) -> Path:
        assert source.is_dir()  # the one fetched source tree, reused by every attempt
        self.compiled.append(flags.name)
        progress.phase("compile", flags.name)
        for line in ("[  0%] Building C object a.o", "[ 50%] Building CXX object b.o", "[100%] Linking llama-server"):
            log.write(line + "\n")
            percent = cmake_percent(line)
            assert percent is not None
            progress.compile_percent(percent)
        outcome = self.outcomes[flags.name]
        if outcome == "broken":
            raise EngineError(f"building llama-server failed at cmake configure ({flags.name}) (exit 1)")
        text = {"sigill": ILLEGAL, "oom": ILLEGAL.replace("kill -ILL", "kill -KILL"), "works": WORKING}[outcome]
        return _script(build / "bin" / "llama-server", text)

    def smoke(self, binary: Path) -> SmokeResult:
        self.smoked.append(binary)
        return smoke_run(binary, model=self.model, timeout_s=30)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty tokometer cache dir, no llama-server on PATH or in the environment."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", f"{empty}:/usr/bin:/bin")
    monkeypatch.delenv("TOKOMETER_LLAMA_SERVER", raising=False)
    return tmp_path / "cache"


@pytest.fixture
def model(tmp_path: Path) -> Path:
    """A tiny GGUF file (a header with no keys): enough for the launcher; the fake servers ignore it."""
    path = tmp_path / "tiny.gguf"
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 0))
    return path


AMX_OK = AmxProbe(True, "tile instructions ran")
AMX_REFUSED = AmxProbe(False, "the kernel refuses this process AMX tile state (arch_prctl: Operation not supported)")


def test_a_working_native_build_is_installed_with_its_record(cache: Path, model: Path) -> None:
    steps = FakeSteps(model, {"native": "works"})
    progress = RecordingProgress()
    path = build_llama_server(jobs=2, progress=progress, steps=steps)
    assert path == built_binary_path() and path.is_file()
    assert steps.compiled == ["native"] and steps.fetches == 1
    info = read_build_info()
    assert info["flags"] == "native" and "-DGGML_NATIVE=ON" in info["cmake_flags"]
    assert [a["result"] for a in info["attempts"]] == ["ok"]
    assert info["smoke"] == "generated 4 tokens in " + info["smoke"].split(" in ")[1]
    assert info["cpu_fingerprint"] == cpu_fingerprint() and info["verified_cpus"] == [cpu_fingerprint()]
    assert info["amx_probe"] is None
    assert progress.lines[0].startswith("building llama-server from source: this happens once and takes about 7-12 min")
    assert "with the native flag set" in progress.lines[-1] and "smoke run: generated 4 tokens" in progress.lines[-1]
    assert progress.phases == ["download", "compile", "smoke"] and progress.percents == [0.0, 50.0, 100.0]
    assert build_llama_server(progress=progress, steps=steps) == path  # cached and verified: nothing more runs
    assert steps.compiled == ["native"] and len(steps.smoked) == 1


def test_sigill_in_the_smoke_run_rebuilds_without_amx(cache: Path, model: Path) -> None:
    steps = FakeSteps(model, {"native": "sigill", "native-no-amx": "works", "portable": "works"}, amx=AMX_OK)
    progress = RecordingProgress()
    build_llama_server(jobs=2, progress=progress, steps=steps)
    assert steps.compiled == ["native", "native-no-amx"]
    assert steps.fetches == 1  # the source is reused, not downloaded again
    info = read_build_info()
    assert info["flags"] == "native-no-amx"
    assert "-DCMAKE_CXX_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16" in info["cmake_flags"]
    first, second = info["attempts"]
    assert first["flags"] == "native"
    assert first["result"] == "killed by SIGILL (illegal instruction) in its smoke run"
    assert "llama-server was killed by SIGILL (illegal instruction) while starting" in first["detail"]
    assert second == {**second, "flags": "native-no-amx", "result": "ok"}
    assert info["amx_probe"] == "tile instructions ran"
    said = "\n".join(progress.lines)
    assert ("the native build was killed by SIGILL (illegal instruction) in its smoke run: rebuilding with the "
            "native-no-amx flag set (this CPU's instructions except AMX), reusing the source") in said
    assert ("with the native-no-amx flag set (this CPU's instructions except AMX; native: killed by SIGILL "
            "(illegal instruction) in its smoke run)") in progress.lines[-1]
    with start_llamacpp(LlamaCppSettings(model_path=model, binary=str(built_binary_path()), parallel=1,
                                         ctx_size=512, ready_timeout_s=30)) as engine:
        assert engine.identity["engine_build"]["flags"] == "native-no-amx"


def test_when_no_amx_traps_too_the_portable_build_is_used(cache: Path, model: Path) -> None:
    steps = FakeSteps(model, {"native": "sigill", "native-no-amx": "sigill", "portable": "works"}, amx=AMX_OK)
    build_llama_server(progress=RecordingProgress(), steps=steps)
    assert steps.compiled == ["native", "native-no-amx", "portable"] and steps.fetches == 1
    info = read_build_info()
    assert info["flags"] == "portable" and "-DGGML_NATIVE=OFF" in info["cmake_flags"]
    assert [a["result"].split(" (")[0] for a in info["attempts"]] == ["killed by SIGILL", "killed by SIGILL", "ok"]


def test_a_cpu_without_amx_goes_from_native_to_portable(cache: Path, model: Path) -> None:
    steps = FakeSteps(model, {"native": "sigill", "portable": "works"}, amx=None)
    build_llama_server(progress=RecordingProgress(), steps=steps)
    assert steps.compiled == ["native", "portable"]  # no native-no-amx build: it would equal native here


def test_refused_amx_skips_the_native_build(cache: Path, model: Path) -> None:
    steps = FakeSteps(model, {"native-no-amx": "works"}, amx=AMX_REFUSED)
    progress = RecordingProgress()
    build_llama_server(progress=progress, steps=steps)
    assert steps.compiled == ["native-no-amx"]  # one build, not two
    info = read_build_info()
    assert info["attempts"][0] == {"flags": "native", "result": "skipped", "seconds": 0.0,
                                   "detail": f"the CPU advertises AMX but {AMX_REFUSED.detail}"}
    assert any(line.startswith("skipping the native flag set: the CPU advertises AMX but the kernel refuses")
               for line in progress.lines)
    assert "native: skipped" in progress.lines[-1]


def test_a_fallback_that_does_not_compile_moves_on(cache: Path, model: Path) -> None:
    steps = FakeSteps(model, {"native": "sigill", "native-no-amx": "broken", "portable": "works"}, amx=AMX_OK)
    build_llama_server(progress=RecordingProgress(), steps=steps)
    assert [a["result"] for a in read_build_info()["attempts"]][1:] == ["did not compile", "ok"]


def test_a_native_build_that_does_not_compile_is_an_error(cache: Path, model: Path) -> None:
    steps = FakeSteps(model, {"native": "broken"})
    with pytest.raises(EngineError, match=r"failed at cmake configure \(native\)"):
        build_llama_server(progress=RecordingProgress(), steps=steps)
    assert steps.compiled == ["native"] and not built_binary_path().exists()


def test_a_sigkill_is_not_cured_by_other_flags(cache: Path, model: Path) -> None:
    steps = FakeSteps(model, {"native": "oom"}, amx=AMX_OK)
    with pytest.raises(EngineError, match=r"the new llama-server \(native flags\) failed its smoke run: llama-server "
                                          r"was killed by SIGKILL \(killed\) while starting: perhaps out of memory"):
        build_llama_server(progress=RecordingProgress(), steps=steps)
    assert steps.compiled == ["native"] and not built_binary_path().exists()


def test_when_every_build_traps_nothing_is_installed(cache: Path, model: Path) -> None:
    steps = FakeSteps(model, {"native": "sigill", "native-no-amx": "sigill", "portable": "sigill"}, amx=AMX_OK)
    with pytest.raises(EngineError, match=r"every llama-server build failed its smoke run on this CPU \(native: "
                                          r"killed by SIGILL .*portable: killed by SIGILL.*full log: .*b11434-build"):
        build_llama_server(progress=RecordingProgress(), steps=steps)
    assert not built_binary_path().exists()
    assert not list(built_binary_path().parent.parent.parent.glob("b11434-tmp*"))  # temp dirs cleaned up


def test_rebuild_is_forced(cache: Path, model: Path) -> None:
    steps = FakeSteps(model, {"native": "works"})
    build_llama_server(progress=RecordingProgress(), steps=steps)
    built_at = built_binary_path().stat().st_mtime_ns
    build_llama_server(progress=RecordingProgress(), steps=steps, force=True)
    assert steps.compiled == ["native", "native"] and built_binary_path().stat().st_mtime_ns >= built_at


def _as_if_built_elsewhere(binary_text: str) -> None:
    """Make the cached build look like one copied from another machine: another CPU verified it."""
    info = read_build_info()
    info.update(cpu_fingerprint="0123456789abcdef", cpu_model="Some Other CPU", verified_cpus=["0123456789abcdef"])
    (built_binary_path().parent.parent / "BUILD-INFO.json").write_text(json.dumps(info))
    _script(built_binary_path(), binary_text)


def test_a_cached_build_from_another_cpu_that_traps_is_rebuilt(cache: Path, model: Path) -> None:
    steps = FakeSteps(model, {"native": "works"})
    build_llama_server(progress=RecordingProgress(), steps=steps)
    _as_if_built_elsewhere(ILLEGAL)
    progress = RecordingProgress()
    assert build_llama_server(progress=progress, steps=steps) == built_binary_path()
    assert steps.compiled == ["native", "native"]  # rebuilt at start, not reported as a mystery
    assert progress.lines[0] == "checking that the cached llama-server runs on this CPU (once per CPU, a few seconds)"
    assert progress.lines[1] == ("the cached llama-server was killed by SIGILL (illegal instruction) on this CPU "
                                 "(built for 'Some Other CPU'?): rebuilding it for this one")
    info = read_build_info()
    assert info["cpu_fingerprint"] == cpu_fingerprint() and info["verified_cpus"] == [cpu_fingerprint()]


def test_a_cached_build_from_another_cpu_that_runs_is_kept_and_remembered(cache: Path, model: Path) -> None:
    steps = FakeSteps(model, {"native": "works"})
    build_llama_server(progress=RecordingProgress(), steps=steps)
    _as_if_built_elsewhere(WORKING)
    assert ensure_runs(RecordingProgress(), steps) == built_binary_path()
    assert steps.compiled == ["native"] and len(steps.smoked) == 2
    assert read_build_info()["verified_cpus"] == ["0123456789abcdef", cpu_fingerprint()]
    assert ensure_runs(RecordingProgress(), steps) == built_binary_path()
    assert len(steps.smoked) == 2  # this CPU is now known: no smoke run at start


def test_the_binary_lookup_checks_a_cached_build_once(cache: Path, model: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    steps = FakeSteps(model, {"native": "works"})
    monkeypatch.setattr(build_module, "CMakeSteps", lambda: steps)
    _script(built_binary_path(), ILLEGAL)  # a build made before BUILD-INFO had fingerprints, that traps here
    assert find_llama_server() == str(built_binary_path())
    assert steps.compiled == ["native"]
    err = capsys.readouterr().err
    assert "tokometer build: the cached llama-server was killed by SIGILL (illegal instruction) on this CPU" in err
    assert find_llama_server() == str(built_binary_path())
    assert len(steps.smoked) == 2  # the trapping one, then the rebuilt one; none for the second lookup


def test_serve_rebuild(cache: Path, model: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    steps = FakeSteps(model, {"native": "works"})
    monkeypatch.setattr(build_module, "CMakeSteps", lambda: steps)
    runner = CliRunner()
    done = runner.invoke(serve_command, ["--rebuild", "--dry-run", "--model", str(model), "--port", "0"])
    assert done.exit_code == 0, done.output
    assert steps.compiled == ["native"]
    assert done.output.splitlines()[-1].startswith(f"{built_binary_path()} --model {model}")
    done = runner.invoke(serve_command, ["--rebuild", "--dry-run", "--model", str(model), "--port", "0"])
    assert steps.compiled == ["native", "native"]  # --rebuild builds even when a build is cached
    refused = runner.invoke(serve_command, ["--rebuild", "--engine", "ollama", "--model", "x"])
    assert refused.exit_code != 0 and "does not apply to --engine ollama" in str(refused.exception)


def test_flag_sets() -> None:
    assert [f.name for f in flag_sets(amx=False)] == ["native", "portable"]
    with_amx = flag_sets(amx=True)
    assert [f.name for f in with_amx] == ["native", "native-no-amx", "portable"]
    assert "-DCMAKE_C_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16" in with_amx[1].cmake_flags


@pytest.mark.skipif(shutil.which("cc") is None or not is_x86_64(), reason="needs an x86-64 C compiler")
def test_no_amx_flags_beat_the_later_march() -> None:
    # ggml puts -march=native *after* CMAKE_C_FLAGS; GCC (and Clang) keep an explicit -mno-amx-* anyway. Checked
    # with an AMX target, since this machine's own -march=native has no AMX to remove.
    c_flags = next(f for f in flag_sets(amx=True)[1].cmake_flags if f.startswith("-DCMAKE_C_FLAGS="))
    no_amx = c_flags.removeprefix("-DCMAKE_C_FLAGS=").split()
    macros = subprocess.run(["cc", *no_amx, "-march=sapphirerapids", "-dM", "-E", "-"], input="", text=True,
                            capture_output=True, check=False)
    if macros.returncode != 0:
        pytest.skip(f"this compiler does not know sapphirerapids: {macros.stderr.strip()[:200]}")
    assert "__AVX512F__" in macros.stdout and "__AMX_" not in macros.stdout


def test_signal_named_error_message(cache: Path, model: Path, tmp_path: Path) -> None:
    ours = _script(built_binary_path(), ILLEGAL)
    settings = LlamaCppSettings(model_path=model, binary=str(ours), parallel=1, ctx_size=512, ready_timeout_s=30)
    with pytest.raises(EngineDied) as caught:
        start_llamacpp(settings)
    message = str(caught.value)
    assert message.startswith("llama-server was killed by SIGILL (illegal instruction) while starting: the build uses "
                              "CPU instructions this machine refuses; run 'tokometer serve --rebuild' to rebuild it "
                              "for this CPU; its log ends: ")
    assert "\n" not in message and "status -4" not in message
    assert caught.value.exit_code == -4 and caught.value.signal == signal.SIGILL
    theirs = _script(tmp_path / "mine" / "llama-server", ILLEGAL)
    with pytest.raises(EngineDied, match=r"SIGILL \(illegal instruction\) while starting: this binary uses CPU "
                                         r"instructions this machine refuses; rebuild it for this CPU; its log"):
        start_llamacpp(LlamaCppSettings(model_path=model, binary=str(theirs), parallel=1, ctx_size=512))


def test_exit_reasons_in_words() -> None:
    assert exit_reason(1) == "exited with status 1"
    assert exit_reason(-signal.SIGSEGV) == "was killed by SIGSEGV (segmentation fault)"
    assert exit_reason(-signal.SIGBUS) == "was killed by SIGBUS (bus error)"
    assert exit_reason(-signal.SIGKILL) == "was killed by SIGKILL (killed)"
    assert "out of memory" in signal_advice(-signal.SIGKILL)
    assert exit_reason(-signal.SIGABRT) == "was killed by SIGABRT (aborted)"
    assert exit_reason(-signal.SIGFPE) == "was killed by SIGFPE (arithmetic error)"
    assert exit_reason(-signal.SIGUSR1).startswith("was killed by SIGUSR1")
    assert signal_advice(0) == signal_advice(2) == ""


def test_cmake_progress_lines() -> None:
    assert cmake_percent("[ 42%] Building CXX object ggml/src/ggml.c.o") == 42.0
    assert cmake_percent("[100%] Built target llama-server") == 100.0
    assert cmake_percent("[84/200] Building CXX object x.o") == 42.0
    assert cmake_percent("-- Configuring done") is None
    assert build_minutes(2) == (7, 12) and build_minutes(16)[0] >= 1
    assert duration(45) == "45s" and duration(185) == "3m05s"


def test_plain_progress_lines_stay_few() -> None:
    stream = io.StringIO()
    every_step = LineProgress(stream, min_interval_s=0)
    every_step.expect_compile_seconds(300)
    every_step.phase("compile", "llama-server")
    for percent in range(101):
        every_step.compile_percent(float(percent))
    lines = stream.getvalue().splitlines()
    assert lines[0] == "tokometer build: compile: llama-server"
    assert [line.split(": ")[2].split("%")[0] for line in lines[1:]] == [str(p) for p in range(0, 101, 10)]
    assert "elapsed, about" in lines[2] and lines[-1].endswith("elapsed, done)")
    stream = io.StringIO()
    rate_limited = LineProgress(stream, min_interval_s=3600, heartbeat_s=3600)
    rate_limited.phase("compile", "llama-server")
    for percent in range(101):
        rate_limited.compile_percent(float(percent))
    assert len(stream.getvalue().splitlines()) == 2  # the phase, then 100% (never more than one per interval)


def test_amx_probe_on_this_machine() -> None:
    probe = probe_amx()
    assert probe.usable in (True, False, None) and probe.detail
    if is_x86_64() and "amx_tile" not in cpu_flags():
        # No AMX here (e.g. AMD): the kernel refuses the tile state, and the tile instructions trap for real.
        assert probe.usable is False and "refuses this process AMX tile state" in probe.detail
        trapped = probe_amx(ask_permission=False)
        assert trapped.usable is False and "SIGILL" in trapped.detail


@pytest.mark.parametrize("from_thread", [False, True], ids=["main-thread", "short-lived-thread"])
def test_engine_dies_with_its_sigkilled_parent(from_thread: bool, tmp_path: Path) -> None:
    script = textwrap.dedent(f"""
        import threading, time
        from tokometer.engines.process import EngineProcess
        started = []
        def start():
            started.append(EngineProcess(["sleep", "60"], "sleeper"))
        if {from_thread}:
            thread = threading.Thread(target=start)
            thread.start()
            thread.join()  # the forking thread is gone: the engine must live on
        else:
            start()
        time.sleep(0.5)
        print(started[0].pid, started[0].alive(), started[0].log_path, flush=True)
        time.sleep(60)
        """)
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        pid_text, alive, log_path = parent.stdout.readline().split()
        child = psutil.Process(int(pid_text))
        assert alive == "True" and child.is_running()
    except BaseException:
        parent.kill()
        raise
    kill_parent_and_expect_child_gone(parent, child, log_path)


def test_an_engine_started_from_a_thread_outlives_the_thread() -> None:
    started: list[EngineProcess] = []
    thread = threading.Thread(target=lambda: started.append(EngineProcess(["sleep", "60"], "sleeper")))
    thread.start()
    thread.join()
    time.sleep(0.3)  # PR_SET_PDEATHSIG would have fired by now had the thread forked it
    assert started[0].alive()
    assert started[0].stop() == -signal.SIGTERM


@pytest.mark.timeout(60)  # a read that waits for a FIFO's writer fails here instead of hanging
def test_a_replaced_build_info_reads_as_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """BUILD-INFO.json was read whole, unbounded: ``/dev/zero`` in its place took the memory and a FIFO waited for
    a writer forever. Both now read as no build info, as a missing or corrupt file does."""
    import os

    info = tmp_path / "BUILD-INFO.json"
    monkeypatch.setattr(build_module, "build_info_path", lambda: info)
    info.symlink_to("/dev/zero")
    assert build_module.read_build_info() == {}
    info.unlink()
    os.mkfifo(info)
    assert build_module.read_build_info() == {}
    info.unlink()
    info.write_text('{"version": "b1"}', encoding="utf-8")
    assert build_module.read_build_info() == {"version": "b1"}
