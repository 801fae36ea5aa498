"""Ramps, time slices and steady state against the simulator's own record of each request
(``tokometer sim``'s trace: when it received each request and when it ended it, on the client's clock).

The load the server really saw is computed from the server's stamps, not the client's: a ramp's
concurrency and its arrivals must follow the target over time.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest

from tests.conftest import SimServer, run_cli
from tests.helpers import bench
from tokometer.load.ramp import Ramp
from tokometer.metrics.window import origin_ns

S = 1e9


def _served_concurrency(traces: list[dict[str, Any]], t0: int, a: float, b: float) -> float:
    """Time-weighted mean number of requests the server held in [a, b) seconds from ``t0``."""
    lo, hi = t0 + a * S, t0 + b * S
    return float(sum(max(0.0, min(t["end_ns"], hi) - max(t["received_ns"], lo)) for t in traces) / (hi - lo))


@pytest.mark.timing  # the client's concurrency a half-second against the server's: lost on a loaded host (CI)
def test_a_concurrency_ramp_is_followed_by_the_server(sim_factory: Callable[..., SimServer]) -> None:
    sim = sim_factory("--ttft-ms", "40", "--itl-ms", "5")
    ramp = Ramp("linear", 1.0, 6.0, 2.0)
    result = bench(sim.openai_url, concurrency=[6], requests=160, input_tokens=16, output_tokens=30, seed=4,
                   ramp="linear", ramp_from=1, ramp_time_s=2.0, time_slice_s=0.5)
    step = result.steps[0]
    traces = sim.trace()
    assert len(traces) == 160
    t0 = origin_ns(step.records)
    assert step.summary.time_slices is not None and step.summary.steady_state is not None
    slices = step.summary.time_slices["slices"]
    assert sum(s["requests"] for s in slices) == 160 == step.summary.requests_completed
    last_send = max(r.sent_ns for r in step.records)
    for s in slices:
        if (t0 + s["end_s"] * S) > last_send:
            break  # the drain
        truth = _served_concurrency(traces, t0, s["start_s"], s["end_s"])
        assert s["achieved_concurrency"] == pytest.approx(truth, abs=0.4)  # the client saw what the server did
        target = s["target"]
        assert target == pytest.approx(sum(ramp.at(s["start_s"] + (k + 0.5) * 0.5 / 64) for k in range(64)) / 64)
        # Slots open as the target passes whole numbers: the load runs up to one slot behind a rising target.
        assert target - 1.3 <= truth <= target + 0.2, (s["start_s"], target, truth)
    state = step.summary.steady_state
    assert state["found"] and state["at_target"] and state["start_s"] >= 2.0
    assert _served_concurrency(traces, t0, state["start_s"], state["end_s"]) == pytest.approx(6.0, rel=0.05)


@pytest.mark.timing  # arrivals by the server's stamps a half-second: a late send moves several (CI, 2026-12-07)
def test_a_rate_ramp_sends_what_its_rate_integrates_to(sim_factory: Callable[..., SimServer]) -> None:
    sim = sim_factory("--ttft-ms", "20", "--itl-ms", "2")
    ramp = Ramp("linear", 5.0, 30.0, 2.0)  # Λ(2 s) = 35 requests, then 30 a second
    result = bench(sim.openai_url, rate=[30.0], arrival="constant", requests=95, input_tokens=16, output_tokens=10,
                   seed=2, ramp="linear", ramp_from=5, ramp_time_s=2.0, time_slice_s=0.5)
    step = result.steps[0]
    received = sorted(t["received_ns"] for t in sim.trace())
    t0 = min(r.due_ns for r in step.records)
    assert len(received) == 95
    for k in range(1, 9):  # the ramp and the first two seconds of the hold, by the server's arrival stamps
        b = 0.5 * k
        arrived = sum(1 for t in received if t < t0 + b * S)
        # Constant arrivals: request i is due when Λ reaches i, so ceil(Λ(b)) are due before b; a late send
        # (a loaded host) moves one across a boundary, not more.
        assert arrived == pytest.approx(math.ceil(ramp.expected(b)), abs=1), (b, arrived)
    assert step.summary.time_slices is not None and step.summary.steady_state is not None
    slices = step.summary.time_slices["slices"]
    assert sum(s["requests"] for s in slices) == 95
    state = step.summary.steady_state
    assert state["basis"] == "arrival rate" and state["found"] and state["start_s"] >= 2.0
    assert state["send_rate_rps"] == pytest.approx(30.0, rel=0.1)


def test_steady_state_leaves_out_the_first_wave(sim_factory: Callable[..., SimServer]) -> None:
    """Eight requests start together and prefill together (the simulator's TTFT grows with the number
    prefilling); the steady state starts once all eight are in flight, so none of them is in it."""
    sim = sim_factory("--ttft-ms", "30", "--itl-ms", "4")
    result = bench(sim.openai_url, concurrency=[8], requests=120, input_tokens=16, output_tokens=25, seed=5)
    step = result.steps[0]
    state = step.summary.steady_state
    assert state is not None
    first_wave = sorted(step.records, key=lambda r: r.sent_ns)[:8]
    t0 = origin_ns(step.records)
    assert state["found"] and state["at_target"]
    opened = max(r.sent_ns for r in first_wave)  # the eighth send opened the window (JSON rounds to 1 us)
    assert abs(t0 + state["start_s"] * S - opened) < 1000
    closed = t0 + state["end_s"] * S
    chosen = [r for r in step.records if opened < r.sent_ns and r.end_ns <= closed + 1000]
    assert len(chosen) == state["requests"] and not set(map(id, chosen)) & set(map(id, first_wave))
    assert state["requests"] < step.summary.requests_completed - 8  # the drain is left out too


def test_a_ramp_without_its_start_is_bad_input() -> None:
    proc = run_cli("bench", "--url", "http://127.0.0.1:9/v1", "-c", "4", "--ramp", "linear", "--ramp-time", "5s")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "tokometer: error: --ramp needs where it starts and how long it takes: give --ramp-from and --ramp-time, "
        "e.g. --ramp-from 1 --ramp-time 30s"]


@pytest.mark.parametrize(("args", "line"), [
    (("-c", "4", "--time-slice", "0.0000000001"),
     "tokometer: error: --time-slice 1e-10 s is out of range: a time slice is at least 0.001 s (1 ms) and at most "
     "1e+06 s"),
    (("-r", "10", "--ramp", "exponential", "--ramp-from", "1e-320", "--ramp-time", "5s"),
     "tokometer: error: --ramp-from 9.99989e-321 is out of range: a ramp starts at 0 (linear) or from 1e-06 to 1e+09"),
])
def test_a_slice_or_a_ramp_out_of_range_is_bad_input(args: tuple[str, ...], line: str) -> None:
    """A 0.1 ns slice once divided by zero at the end of the first step; a ramp from 1e-320 made its arrival times
    NaN (open loop: a traceback; closed loop: the ramp skipped)."""
    proc = run_cli("bench", "--url", "http://127.0.0.1:9/v1", *args)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [line]
