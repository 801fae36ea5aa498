"""Shared fixtures: real simulator processes on loopback, and a temporary results store."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest


@dataclass
class SimServer:
    """A `tokometer sim` process started for a test."""

    process: subprocess.Popen[str]
    root: str

    @property
    def openai_url(self) -> str:
        return self.root + "/v1"

    def trace(self) -> list[dict[str, Any]]:
        with urllib.request.urlopen(self.root + "/sim/trace", timeout=10) as response:
            data: list[dict[str, Any]] = json.loads(response.read())
        return data

    def clear_trace(self) -> None:
        request = urllib.request.Request(self.root + "/sim/trace", method="DELETE")
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdout:
            self.process.stdout.close()


def start_sim(*args: str) -> SimServer:
    """Start ``tokometer sim --port 0 ARGS`` and wait for its URL line."""
    process = subprocess.Popen(
        [sys.executable, "-m", "tokometer", "sim", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    if "listening on" not in line:
        process.kill()
        rest = process.stdout.read()
        raise RuntimeError(f"the simulator did not start: {line}{rest}")
    return SimServer(process, line.strip().split()[-1])


@pytest.fixture
def sim_factory() -> Iterator[Callable[..., SimServer]]:
    started: list[SimServer] = []

    def make(*args: str) -> SimServer:
        server = start_sim(*args)
        started.append(server)
        return server

    yield make
    for server in started:
        server.stop()


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "runs.db"


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run the real ``tokometer`` command line in a subprocess."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "tokometer", *args], capture_output=True, text=True,
                          timeout=timeout, env=full_env)


def require_llama_server() -> None:
    """Skip when no llama-server can be found, except where one is required (``make test`` and CI
    set TOKOMETER_REQUIRE_ENGINE=1 after building it): there a missing engine fails loudly."""
    from tokometer.engines import find_llama_server
    from tokometer.errors import EngineError

    try:
        find_llama_server()
    except EngineError as exc:
        if os.environ.get("TOKOMETER_REQUIRE_ENGINE") == "1":
            pytest.fail(f"the embedded engine is required here but missing: {exc}")
        pytest.skip(f"no llama-server (run 'make engine'): {exc}")
