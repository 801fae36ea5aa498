"""Helpers for tests that run benchmarks in-process."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
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


SCRIPT_LATE_MS = 15.0
"""How late the simulator's median send may be against its script in a timing test: it never sends early (it sleeps
until each event's due time, then stamps it), but a loaded host wakes it late (34.2 ms against a scripted 30 at the
median, with the other lanes running on 2 cores): the client is held to the trace, the trace only loosely to the
script."""


def kept_to_script(measured_ms: float, scripted_ms: float) -> bool:
    """Whether the simulator's median ``measured_ms`` kept to ``scripted_ms``: never early, late by under
    `SCRIPT_LATE_MS`."""
    return scripted_ms <= measured_ms < scripted_ms + SCRIPT_LATE_MS


def trace_truth_ms(trace: dict[str, Any], sent_ns: int) -> tuple[float, float]:
    """A streamed request's true TTFT and TPOT (ms), from the simulator's record of what it sent (``/sim/trace``,
    stamped on the client's clock): TTFT from the client's send to the simulator's first content event, so the
    request's way to the simulator on loopback counts, as it does in what the client measures (the host's: 1-4 ms
    at the median on a busy 2-core VM, where a truth counted from the simulator's receipt missed a 3 ms bound);
    TPOT over the tokens after the first event."""
    events, tokens = trace["event_ns"], trace["event_tokens"]
    return (events[0] - sent_ns) / 1e6, (events[-1] - events[0]) / (sum(tokens) - tokens[0]) / 1e6


def check_stamps_follow_the_trace(records: list[Any], traces: list[dict[str, Any]]) -> None:
    """The client and the simulator share a clock: each request is stamped sent before the simulator received it,
    and its first and last tokens after the simulator wrote them, by 5 ms at the median (one wake-up on a busy
    2-core machine can be late by tens of ms, so a bound on each would test the host, not the client)."""
    lags: list[int] = []
    for record, trace in zip(records, traces, strict=True):
        assert record.sent_ns < trace["received_ns"]
        lags += [record.first_token_ns - trace["event_ns"][0], record.last_token_ns - trace["event_ns"][-1]]
    assert min(lags) > 0 and median([float(lag) for lag in lags]) < 5e6, lags


def trace_gap_means_ms(traces: list[dict[str, Any]]) -> tuple[float, float]:
    """The mean gap between the simulator's content events over ``traces``, and the mean gap a token (each gap
    divided by the tokens its later event carried), in ms: what the client's ``chunk_gap_ms`` and ``itl_ms`` means
    are held to."""
    gaps: list[float] = []
    per_token: list[float] = []
    for trace in traces:
        events, tokens = trace["event_ns"], trace["event_tokens"]
        for i in range(1, len(events)):
            gaps.append((events[i] - events[i - 1]) / 1e6)
            per_token.append(gaps[-1] / tokens[i])
    return sum(gaps) / len(gaps), sum(per_token) / len(per_token)


def check_client_against_trace(step: Any, traces: list[dict[str, Any]]) -> None:
    """One step's client figures held to the simulator's trace of it, request by request (``traces`` in the order
    of ``step.records``): the stamps (`check_stamps_follow_the_trace`), TTFT p50 within 3 ms and TPOT p50 within
    3 % of the truths' medians (`trace_truth_ms`), and the chunk-gap and ITL means within 3 % of the trace's
    (`trace_gap_means_ms`)."""
    summary = step.summary
    check_stamps_follow_the_trace(step.records, traces)
    truths = [trace_truth_ms(t, r.sent_ns) for t, r in zip(traces, step.records, strict=True)]
    assert summary.ttft_ms.p50 == pytest.approx(median([t for t, _ in truths]), abs=3.0)
    assert summary.tpot_ms.p50 == pytest.approx(median([p for _, p in truths]), rel=0.03)
    gap_ms, per_token_ms = trace_gap_means_ms(traces)
    assert summary.chunk_gap_ms.mean == pytest.approx(gap_ms, rel=0.03)
    assert summary.itl_ms.mean == pytest.approx(per_token_ms, rel=0.03)


def simulator_medians_ms(traces: list[dict[str, Any]]) -> tuple[float, float]:
    """The simulator's own median TTFT (its first content event after its receipt) and TPOT over ``traces``: what
    its script asked of it (`kept_to_script`)."""
    return (median([(t["event_ns"][0] - t["received_ns"]) / 1e6 for t in traces]),
            median([trace_truth_ms(t, t["received_ns"])[1] for t in traces]))


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
