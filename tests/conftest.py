"""Shared fixtures: real simulator processes on loopback, and a temporary results store."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

# A test marked `timing` checks measured times against what was scheduled or modelled: the simulator's scripted TTFT,
# a Poisson schedule, a trace's arrivals, a search's answer against the modelled capacity. On a shared 2-core host
# (CI's, this project's) a process that is not scheduled for tens of milliseconds makes the server or the client
# late, and the check misses through no fault of the code (seen in CI: TTFT 54.7 ms against a scripted 50 +- 4;
# client loop lag 10.8 ms against 1 ms allowed). Such a test is run again, up to TIMING_RERUNS times, and every
# rerun is counted in pytest's summary ("N rerun"); a fault in the code fails every run. Tests of behaviour, not
# of time, are never marked.
TIMING_RERUNS = 2
# pyproject's `timeout` (600 s) bounds every test; a real vLLM's test may first start it (up to START_TIMEOUT_S).
VLLM_TEST_TIMEOUT_S = 1800


_DATA_HOME = pytest.StashKey[str]()
_CONFIG_HOME = pytest.StashKey[str]()


def pytest_configure(config: pytest.Config) -> None:
    # A suite started in the background of a non-interactive shell (`make test &`, `nohup`, a CI runner's job)
    # inherits SIGINT ignored (POSIX: asynchronous commands ignore it), and every process it starts would too:
    # the Ctrl-C tests would see their SIGINT dropped, and each simulator's stop would wait out its 5 s for a kill.
    # A handler of this process's own is reset to the default in every child at exec; an ignored signal is not.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    # A test that saves without --store writes the default store, runs.db in the user data directory: each test
    # process (an xdist worker too) gets a data directory of its own, so the suite neither reads nor changes the
    # user's runs, nor do its workers share one SQLite file. The cache directory (engine build, model, tokenizers)
    # stays shared: its writers take a file lock.
    config.stash[_DATA_HOME] = os.environ["XDG_DATA_HOME"] = tempfile.mkdtemp(prefix="tokometer-test-data-")
    # Likewise the config directory: a calibration `estimate --calibrate` stores, a hardware.toml or prices.toml of
    # the user's would otherwise change what the tests' estimates say, and a test that calibrates would overwrite
    # the user's own calibration.
    config.stash[_CONFIG_HOME] = os.environ["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix="tokometer-test-config-")
    # Every llama.cpp engine the suite starts (in this process or through the CLI's) runs one thread unless the
    # caller says otherwise: beside four workers and vLLM on two cores, ggml's two threads wait on each other at
    # every operation's barrier (2-3 tokens/s against 19-23 on one; `tokometer.engines.llamacpp.default_threads`).
    os.environ.setdefault("TOKOMETER_ENGINE_THREADS", "1")


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(config.stash.get(_DATA_HOME, ""), ignore_errors=True)
    shutil.rmtree(config.stash.get(_CONFIG_HOME, ""), ignore_errors=True)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    vllm_tests = Path(__file__).parent / "vllm"
    for item in items:
        if item.get_closest_marker("timing") is not None:
            item.add_marker(pytest.mark.flaky(reruns=TIMING_RERUNS, reruns_delay=2))
        if vllm_tests in item.path.parents:
            item.add_marker(pytest.mark.timeout(VLLM_TEST_TIMEOUT_S))


@dataclass
class SimServer:
    """A `tokometer sim` process started for a test."""

    process: subprocess.Popen[str]
    root: str
    api_key: str | None = None
    """The simulator's --api-key: sent with the helpers' own requests."""

    @property
    def openai_url(self) -> str:
        return self.root + "/v1"

    def call(self, path: str, method: str = "GET", body: dict[str, Any] | None = None) -> bytes:
        """``METHOD path`` on the simulator (JSON ``body``), with its key; the whole answer."""
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.root + path, data, headers, method=method)
        with urllib.request.urlopen(request, timeout=30) as response:
            answer: bytes = response.read()
        return answer

    def trace(self, query: str = "") -> list[dict[str, Any]]:
        data: list[dict[str, Any]] = json.loads(self.call("/sim/trace" + query))
        return data

    def clear_trace(self) -> None:
        self.call("/sim/trace", "DELETE")

    def stop(self) -> None:
        self.interrupt()
        self.wait_stopped()

    def interrupt(self) -> None:
        """Ask the process to stop (SIGINT, as Ctrl-C), without waiting for it: `wait_stopped`."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)

    def wait_stopped(self) -> None:
        """Wait up to 5 s for the process `interrupt` asked to stop, then kill it."""
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stdout:
            self.process.stdout.close()


def stop_all(servers: list[SimServer]) -> None:
    """Stop ``servers`` side by side: each is asked before any is waited for, so that their shutdowns (0.3 s each on
    the 2-core AMD EPYC VM) overlap instead of adding up at a test's teardown."""
    for server in servers:
        server.interrupt()
    for server in servers:
        server.wait_stopped()


def _start_listening(*args: str) -> tuple[subprocess.Popen[str], str]:
    """Start ``tokometer ARGS`` and wait for its "listening on URL" line."""
    process = subprocess.Popen([sys.executable, "-m", "tokometer", *args], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    assert process.stdout is not None
    line = process.stdout.readline()
    if "listening on" not in line:
        process.kill()
        rest = process.stdout.read()
        process.stdout.close()
        raise RuntimeError(f"tokometer {args[0]} did not start: {line}{rest}")
    return process, line.strip().split()[-1]


def start_sim(*args: str) -> SimServer:
    """Start ``tokometer sim --port 0 ARGS`` and wait for its URL line."""
    key = args[args.index("--api-key") + 1] if "--api-key" in args else None
    return SimServer(*_start_listening("sim", "--port", "0", *args), api_key=key)


def start_gateway(config: Path, *args: str) -> SimServer:
    """Start ``tokometer gateway --config CONFIG --port 0`` (the same handle: root URL, stop)."""
    return SimServer(*_start_listening("gateway", "--config", str(config), "--port", "0", *args))


@pytest.fixture
def sim_factory() -> Iterator[Callable[..., SimServer]]:
    started: list[SimServer] = []

    def make(*args: str) -> SimServer:
        server = start_sim(*args)
        started.append(server)
        return server

    yield make
    stop_all(started)


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "runs.db"


@pytest.fixture(params=["sqlite", "postgresql"])
def new_store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], str]]:
    """A maker of new, empty results stores' URLs on each backend: SQLite files, PostgreSQL databases
    (tests/store_backends.py: skipped without a server, except where TOKOMETER_REQUIRE_POSTGRES=1)."""
    from tests.store_backends import store_urls

    with store_urls(request.param, tmp_path) as make:
        yield make


@pytest.fixture
def store_url(new_store_url: Callable[[], str]) -> str:
    """A new, empty results store's URL, on SQLite and on PostgreSQL."""
    return new_store_url()


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run the real ``tokometer`` command line in a subprocess."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "tokometer", *args], capture_output=True, text=True,
                          timeout=timeout, env=full_env)


def run_cli_here(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run the ``tokometer`` command line in this process: `tokometer.cli.main`, the entry point ``python -m
    tokometer`` calls, with its standard output and error captured and its exit status (`run_cli`'s answer).

    For the commands that read a store or files and print text or write files (``report``, ``runs --id``,
    ``runs --tag``, ``compare --json``, their one-line errors), where what is asserted is their output, exit status
    and files: a subprocess adds only the interpreter's start and the package's import (1-2 s of CPU a call, many
    times that beside the parallel lane's workers). ``env`` is set for the call and restored after it. Not for a
    command whose premise is the process (a signal, the interpreter's exit, a server it starts, a PYTHONPATH of its
    own) nor for console tables (their width and styling follow the real standard output): those keep
    `run_cli`."""
    import contextlib
    import io

    from tokometer.cli import main

    saved = {key: os.environ.get(key) for key in env or {}}
    os.environ.update(env or {})
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main(list(args))
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
                if isinstance(exc.code, str):
                    print(exc.code, file=sys.stderr)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value

    def text(stream: io.StringIO) -> str:  # as run_cli's text mode reads a pipe: universal newlines
        return stream.getvalue().replace("\r\n", "\n").replace("\r", "\n")

    return subprocess.CompletedProcess(["tokometer", *args], code, text(out), text(err))


def bench_stored(store: Path, *args: str) -> int:
    """Run ``tokometer bench ARGS --store STORE`` (it must succeed) and return the id of the run it saved."""
    from tokometer.store import ResultStore

    done = run_cli("bench", *args, "--store", str(store))
    assert done.returncode == 0, done.stderr
    results = ResultStore(f"sqlite:///{store}", read_only=True)
    try:
        return int(results.list_runs(1)[0]["id"])
    finally:
        results.close()


@pytest.fixture(scope="module")
def engine_two_slots() -> Iterator[Any]:
    """The embedded llama.cpp engine (bundled model, 2 slots), for the tests of one module."""
    from tokometer.engines import LlamaCppSettings, start_llamacpp

    require_llama_server()
    with start_llamacpp(LlamaCppSettings(parallel=2)) as handle:
        yield handle


def require_llama_server() -> None:
    """Skip when no llama-server can be found, except where one is required (``make test`` and CI
    set TOKOMETER_REQUIRE_ENGINE=1 after building it): there a missing engine fails loudly."""
    from tokometer.engines import find_llama_server
    from tokometer.util.errors import EngineError

    try:
        find_llama_server()
    except EngineError as exc:
        if os.environ.get("TOKOMETER_REQUIRE_ENGINE") == "1":
            pytest.fail(f"the embedded engine is required here but missing: {exc}")
        pytest.skip(f"no llama-server (run 'make engine'): {exc}")


def require_ray() -> None:
    """Skip without Ray (the ``tokometer[ray]`` extra), except where it is required (``make test`` and CI
    set TOKOMETER_REQUIRE_RAY=1): there a missing Ray fails loudly."""
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        if os.environ.get("TOKOMETER_REQUIRE_RAY") == "1":
            pytest.fail("Ray is required here but missing: pip install 'tokometer[ray]'")
        pytest.skip("no Ray (pip install 'tokometer[ray]')")


def require_redis_server() -> str:
    """The path of ``redis-server``. Skip without one, except where it is required (``make test`` and
    CI set TOKOMETER_REQUIRE_REDIS=1; .ci/run installs it): there a missing server fails loudly."""
    import shutil

    path = shutil.which("redis-server")
    if path is None:
        if os.environ.get("TOKOMETER_REQUIRE_REDIS") == "1":
            pytest.fail("redis-server is required here but missing: apt-get install redis-server")
        pytest.skip("no redis-server (apt-get install redis-server)")
    return path


@dataclass
class RedisServer:
    """A real ``redis-server`` on a loopback port, without persistence; `stop` kills it, `start`
    brings it back on the same port (empty)."""

    binary: str
    port: int
    directory: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        import socket
        import time

        if self.process is not None and self.process.poll() is None:
            return
        log = (self.directory / "redis.log").open("ab")
        with log:
            self.process = subprocess.Popen(
                [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                 "--dir", str(self.directory)],
                stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server exited: {(self.directory / 'redis.log').read_text()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as conn:
                    conn.sendall(b"PING\r\n")
                    if conn.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                pass
            time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"redis-server did not answer on port {self.port}")

    def keys(self) -> int:
        """How many keys the server holds (DBSIZE)."""
        import socket

        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as conn:
            conn.sendall(b"DBSIZE\r\n")
            answer = conn.recv(64)
        assert answer.startswith(b":"), answer
        return int(answer[1:].split(b"\r\n")[0])

    def wait_for_keys(self, count: int, timeout: float = 10) -> None:
        """Wait until the server holds at least ``count`` keys (a write made in the background has landed)."""
        import time

        deadline = time.monotonic() + timeout
        while self.keys() < count:
            assert time.monotonic() < deadline, f"fewer than {count} keys after {timeout} s"
            time.sleep(0.02)

    def stop(self) -> None:
        """Kill the server (SIGKILL: an outage, not a shutdown)."""
        if self.process is not None:
            if self.process.poll() is None:
                self.process.kill()
            self.process.wait()
            self.process = None


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A started `RedisServer` of the test's own, killed at teardown."""
    import socket

    binary = require_redis_server()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = RedisServer(binary, port, tmp_path)
    server.start()
    yield server
    server.stop()
