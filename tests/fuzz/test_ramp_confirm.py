"""The ramp search's steady probes (`tokometer.benchmark.findmax.next_confirm`) over any ramp's slices and any server
whose steady verdicts are monotone (a probe meets exactly when its load is at most the capacity), over a rate and
over concurrency.

Whatever the slices said (their misses may lie below the capacity, as a slice meets the queue the ones before it
left, or above it), the probes never repeat a load, end within a bound without a cap, and end on an answer that is
a steady pass at or under the capacity; where the search ends by its own rule, the bracket's top is a steady miss
(above the capacity) or, with every ramp miss overruled, there is none. The slices are built in the shape
`tokometer.metrics.window.window_summary` gives them, as tests/unit/benchmark/test_ramp_search.py builds them.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from tokometer.benchmark import findmax
from tokometer.load.profiles import LoadStep
from tokometer.load.ramp import Ramp
from tokometer.metrics.distribution import Distribution
from tokometer.metrics.summary import StepSummary

RAMP = Ramp("linear", 4.0, 44.0, 10.0)
OBJECTIVES = findmax.parse_objectives("ttft_p99=100ms")


def _slice(index: int, missed: bool, sustained: float | None) -> dict[str, Any]:
    target = (RAMP.at(index) + RAMP.at(index + 1)) / 2
    overload = None if sustained is None else {
        "n": 20, "latency": "ttft", "slope": 0.2, "slope_low": 0.1, "rise_ms": 200.0, "send_rate_rps": None,
        "completion_rate_rps": None, "rate_p": None, "sustained_rps": sustained, "queue_grew": True,
        "fell_behind": False, "overloaded": True}
    ttft = Distribution.of([150.0 if missed else 40.0] * 20).to_json()
    return {"index": index, "start_s": float(index), "end_s": float(index + 1), "requests": 20, "completed": 20,
            "failed": 0, "target": target, "send_rate_rps": target, "ttft_ms": ttft,
            "tpot_ms": Distribution.of([10.0] * 20).to_json(), "itl_ms": None, "e2e_ms": None, "goodput_rps": None,
            "overload": overload if missed else None}


@given(st.lists(st.booleans(), min_size=1, max_size=10), st.floats(0.3, 1.0), st.floats(1.0, 60.0),
       st.sampled_from(["rate", "concurrency"]))
def test_steady_probes_never_repeat_and_end_on_a_pass_under_the_capacity(misses: list[bool], sustained_share: float,
                                                                        capacity: float, kind: str) -> None:
    slices = [_slice(k, missed, RAMP.at(k) * sustained_share if missed else None) for k, missed in enumerate(misses)]
    summary = StepSummary.from_json({"requests_completed": 20 * len(slices), "duration_s": 10.0})
    summary.time_slices = {"slice_s": 1.0, "requests_by": "sent", "note": None, "slices": slices}
    if kind == "rate":
        scan = findmax.scan_ramp(summary, LoadStep("rate", rate=44.0, ramp=RAMP), OBJECTIVES, 0, "rate")
    else:
        scan = findmax.scan_ramp(summary, LoadStep("concurrency", concurrency=44, ramp=RAMP), OBJECTIVES, 0,
                                 "concurrency")
    history: list[tuple[float, bool]] = []
    while (value := findmax.next_confirm(scan, history, max_probes=10**9)) is not None:
        assert value not in [v for v, _ in history], (value, history)
        assert value > 0
        history.append((value, value <= capacity))
        assert len(history) <= 64, history
    lo, hi = findmax._ramp_bounds(scan, history)
    assert lo is not None and lo <= capacity and (lo, True) in history, history  # 1 always meets: capacity >= 1
    if hi is not None:
        assert (hi, False) in history and hi > capacity, (lo, hi, history)  # the top confirmed steadily
