"""Helpers for tests that run benchmarks in-process."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import uvloop

from tokometer.benchmark.run import BenchResult, run_benchmark
from tokometer.benchmark.spec import BenchSpec


def bench(url: str, **values: Any) -> BenchResult:
    """Run a benchmark of ``url`` on a fresh uvloop, as the CLI does.

    Without the check request before the run (``check=False`` unless asked for): these tests
    compare the server's own trace with the measured requests one for one; the check request has
    tests of its own (tests/integration/test_preflight.py), and CLI tests run it as users do."""
    values.setdefault("check", False)
    spec = BenchSpec(url=url, **values)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(run_benchmark(spec))


def median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def kill_parent_and_expect_child_gone(parent: subprocess.Popen[str], child: psutil.Process, log_path: str) -> None:
    """SIGKILL ``parent`` (no atexit, no cleanup of its own) and assert ``child`` dies within 5 s."""
    try:
        parent.kill()
        parent.wait(10)
        deadline = time.monotonic() + 5
        while child.is_running() and child.status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not child.is_running() or child.status() == psutil.STATUS_ZOMBIE
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        if parent.stdout is not None:
            parent.stdout.close()
    Path(log_path).unlink(missing_ok=True)


_JITTER_PROBE = """
import signal, time
def stop(*_):
    raise SystemExit
signal.signal(signal.SIGTERM, stop)
late = []
print("ready", flush=True)
try:
    while True:
        before = time.perf_counter_ns()
        time.sleep(0.001)
        late.append((time.perf_counter_ns() - before) / 1e6 - 1.0)
except SystemExit:
    pass
late.sort()
print(late[int(0.99 * (len(late) - 1))] if late else 0.0, flush=True)
"""


class HostJitter:
    """How late the host wakes an idle process: a side process sleeps 1 ms over and over while a test runs and
    reports the p99 of how much later than asked it woke (ms). On a VM whose hypervisor takes the CPU away now and
    then (steal time), every process is late by that much, the client under test included; a timing test bounds the
    client by its own budget plus this figure, not by a bare millisecond the host never granted anyone."""

    def __init__(self) -> None:
        self.p99_ms: float | None = None
        self._process: subprocess.Popen[str] | None = None

    def __enter__(self) -> HostJitter:
        self._process = subprocess.Popen([sys.executable, "-c", _JITTER_PROBE], stdout=subprocess.PIPE, text=True)
        assert self._process.stdout is not None and self._process.stdout.readline().strip() == "ready"
        return self

    def __exit__(self, *_: object) -> None:
        assert self._process is not None and self._process.stdout is not None
        self._process.terminate()
        out = self._process.communicate(timeout=30)[0]
        self.p99_ms = float(out.strip().splitlines()[-1])
