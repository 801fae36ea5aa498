"""Helpers for tests that run benchmarks in-process."""

from __future__ import annotations

import asyncio
from typing import Any

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
