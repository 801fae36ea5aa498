"""Helpers for tests that run benchmarks in-process."""

from __future__ import annotations

import asyncio
import subprocess
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
