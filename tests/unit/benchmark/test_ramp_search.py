"""The ramp search of ``bench --find-max --search ramp``: its slices judged (`tokometer.benchmark.ramp_search`,
`findmax.scan_ramp`), its steady probes (`findmax.next_confirm`) and its answer from saved steps (`findmax.outcome`).

The ramp step's slices are written by hand in the shape `tokometer.metrics.window.window_summary` gives them: a
server whose TTFT p99 is 40 ms up to its capacity and grows with the queue above it."""

from __future__ import annotations

from typing import Any

import pytest

from tokometer.benchmark import findmax
from tokometer.benchmark.ramp_search import MAX_CONFIRMS, MIN_SLICE_REQUESTS, as_summary, ramp_slices, slice_width
from tokometer.benchmark.spec import BenchSpec
from tokometer.load.profiles import LoadStep
from tokometer.load.ramp import Ramp
from tokometer.metrics.distribution import Distribution
from tokometer.metrics.summary import StepSummary

RAMP = Ramp("linear", 4.0, 44.0, 10.0)  # 4 req/s more every second
SPEC = {"find_max": "rate", "slo": "ttft_p99=100ms", "search": "ramp", "rate": [44.0]}
OBJECTIVES = findmax.parse_objectives("ttft_p99=100ms")


def _overload(queue_grew: bool, sustained: float | None) -> dict[str, Any]:
    return {"n": 20, "latency": "ttft", "slope": 0.2 if queue_grew else 0.0, "slope_low": 0.1 if queue_grew else -0.1,
            "rise_ms": 200.0 if queue_grew else 0.0, "send_rate_rps": None, "completion_rate_rps": None,
            "rate_p": None, "sustained_rps": sustained, "queue_grew": queue_grew, "fell_behind": False,
            "overloaded": queue_grew}


def _slice(index: int, ttft_ms: float, requests: int, overload: dict[str, Any] | None = None) -> dict[str, Any]:
    start, end = float(index), float(index + 1)
    target = (RAMP.at(start) + RAMP.at(end)) / 2
    return {"index": index, "start_s": start, "end_s": end, "requests": requests, "completed": requests, "failed": 0,
            "target": target, "send_rate_rps": target, "ttft_ms": Distribution.of([ttft_ms] * requests).to_json(),
            "tpot_ms": Distribution.of([10.0] * requests).to_json(), "itl_ms": None, "e2e_ms": None,
            "goodput_rps": None, "overload": overload}


def _ramp_summary(slices: list[dict[str, Any]]) -> StepSummary:
    base = StepSummary.from_json({"requests_completed": sum(s["requests"] for s in slices), "duration_s": 10.0})
    base.time_slices = {"slice_s": 1.0, "requests_by": "sent", "note": None, "slices": slices}
    return base


def _steady(value: float, ttft_ms: float) -> StepSummary:
    return StepSummary.from_json({"requests_completed": 60, "duration_s": 3.0,
                                  "ttft_ms": Distribution.of([ttft_ms] * 60).to_json()})


CAPACITY_SLICES = [_slice(0, 30, 6), *(_slice(k, 40, 10 + 4 * k) for k in range(1, 6)),
                   _slice(6, 150, 34, _overload(True, 25.0)), _slice(7, 400, 38, _overload(True, 24.0))]
"""Slices 1-5 (6 to 26 req/s) meet; slice 6 (about 30 req/s) misses, its queue growing at a sustained 25/s."""


def test_slices_are_read_back_as_summaries_with_their_load() -> None:
    pieces = ramp_slices(_ramp_summary(CAPACITY_SLICES).time_slices, RAMP, "rate")
    assert [p.index for p in pieces] == list(range(1, 8))  # slice 0 has fewer than MIN_SLICE_REQUESTS
    assert MIN_SLICE_REQUESTS > 6
    assert pieces[0].load == pytest.approx(RAMP.at(1.5)) and pieces[0].summary.ttft_ms.p99 == 40
    as_typed = as_summary(CAPACITY_SLICES[6])
    assert as_typed.overload is not None and as_typed.overload.queue_grew and as_typed.requests_completed == 34
    assert [p.load for p in ramp_slices(_ramp_summary(CAPACITY_SLICES).time_slices, RAMP, "concurrency")][:2] \
        == [10.0, 14.0]  # whole slots: floor of the mean target
    assert slice_width(20.0, None) == 2.0 and slice_width(20.0, 0.5) == 0.5


def test_the_first_failing_slice_and_the_candidate() -> None:
    load = LoadStep("rate", rate=44.0, ramp=RAMP)
    scan = findmax.scan_ramp(_ramp_summary(CAPACITY_SLICES), load, OBJECTIVES, 0, "rate")
    assert [v.index for v in scan.slices] == [1, 2, 3, 4, 5, 6, 7]  # every slice with enough requests
    fail = scan.failing
    assert fail is not None and fail.index == 6 and not fail.probe.passed and fail.probe.saturated
    assert any(m.startswith("ttft_p99 150 ms > 100 ms") for m in fail.probe.misses)
    assert scan.good[-1].probe.value == pytest.approx(26.0)
    assert scan.sustained == 25.0 and scan.candidate == 25.0  # the rate its queue showed it sustained
    assert "first lasting miss slice 6 (6-7 s, 30" in scan.describe() and "sustained about 25/s" in scan.describe()
    # Without a queue that grew, the candidate is the last good slice's load.
    plain = [*CAPACITY_SLICES[:6], _slice(6, 150, 34)]
    again = findmax.scan_ramp(_ramp_summary(plain), load, OBJECTIVES, 0, "rate")
    assert again.sustained is None and again.candidate == pytest.approx(26.0)


def test_a_lone_miss_the_next_slice_does_not_repeat_is_not_the_limit() -> None:
    """Slice 3 (about 18 req/s) misses on noise and slice 4 meets again: the ramp fails at slice 6, where the miss
    lasts (slice 7 misses too), and a steady probe that meets at or above a ramp miss overrules it."""
    noisy = [*CAPACITY_SLICES[:3], _slice(3, 150, 22), *CAPACITY_SLICES[4:]]
    load = LoadStep("rate", rate=44.0, ramp=RAMP)
    scan = findmax.scan_ramp(_ramp_summary(noisy), load, OBJECTIVES, 0, "rate")
    fail = scan.failing
    assert fail is not None and fail.index == 6 and scan.candidate == 25.0
    assert [v.index for v in scan.good] == [1, 2, 4, 5]
    assert findmax.next_confirm(scan, [(25.0, True)]) == 27.5  # bisecting towards the lasting miss at 30
    # A steady pass at the lasting miss overrules it: the next slice that missed (slice 7, 34/s) is the top.
    assert findmax._ramp_bounds(scan, [(25.0, True), (30.0, True)]) == (30.0, 34.0)
    assert findmax._ramp_bounds(scan, [(25.0, True), (34.0, True)]) == (34.0, None)  # every miss overruled


def _confirm(scan: findmax.RampScan, capacity: float) -> list[tuple[float, bool]]:
    history: list[tuple[float, bool]] = []
    while (value := findmax.next_confirm(scan, history)) is not None:
        history.append((value, value <= capacity))
    return history


def test_steady_probes_confirm_step_down_and_stop_within_the_cap() -> None:
    load = LoadStep("rate", rate=44.0, ramp=RAMP)
    scan = findmax.scan_ramp(_ramp_summary(CAPACITY_SLICES), load, OBJECTIVES, 0, "rate")
    # The candidate meets: bisect towards the failing slice (30) until within 5 % or the cap.
    met = _confirm(scan, 29.0)
    assert met[0] == (25.0, True) and met[1] == (27.5, True) and met[2][0] == 28.75 and len(met) == 3
    # The candidate misses: down to the last good slice's load below it, then bisection.
    missed = _confirm(scan, 23.0)
    assert missed[0] == (25.0, False) and missed[1] == pytest.approx((22.0, True))
    assert len(missed) <= MAX_CONFIRMS and all(v <= 25.0 for v, _ in missed)
    # Nothing meets: the cap ends it.
    assert len(_confirm(scan, 1.0)) == MAX_CONFIRMS


def test_the_ramps_miss_is_confirmed_steadily_and_searched_above_when_it_meets() -> None:
    """The ramp's lasting miss at slice 6 (30/s, its queue sustaining 29/s) is a pointer: its slice met the queue the
    earlier ones left, so a server of capacity 33/s can miss there. The candidate (29) meets and is within 5 % of 30,
    so the next steady probe is at 30 itself; it meets, which overrules the slice, and the search goes on towards the
    next slice that missed (7, 34/s): 32 meets, and the cap ends the search there, not at 29."""
    slices = [*CAPACITY_SLICES[:6], _slice(6, 150, 34, _overload(True, 29.0)), CAPACITY_SLICES[7]]
    load = LoadStep("rate", rate=44.0, ramp=RAMP)
    scan = findmax.scan_ramp(_ramp_summary(slices), load, OBJECTIVES, 0, "rate")
    assert scan.candidate == 29.0 and scan.miss_loads == (30.0, 34.0)
    history = _confirm(scan, 33.0)
    assert history == [(29.0, True), (30.0, True), (32.0, True)]
    # Where the miss holds steadily, the search ends on it: the bracket is two steady probes.
    assert _confirm(scan, 29.5) == [(29.0, True), (30.0, False)]
    steps = [(0, load, _ramp_summary(slices)), (1, LoadStep("rate", rate=29.0), _steady(29.0, 40)),
             (2, LoadStep("rate", rate=30.0), _steady(30.0, 40)), (3, LoadStep("rate", rate=32.0), _steady(32.0, 40))]
    found = findmax.outcome(SPEC, steps)
    assert found is not None and found.best == 32.0 and found.failed_at == 34.0
    assert not found.converged  # 32 to the slice at 34 is wider than 5 %, and the miss there is not confirmed
    assert "search cut short; 34 missed in the ramp, not confirmed by a steady probe" in found.answer()
    unconfirmed = findmax.outcome(SPEC, steps[:2])  # 29 met, within 5 % of the slice's 30: not yet confirmed
    assert unconfirmed is not None and unconfirmed.best == 29.0 and not unconfirmed.converged


def test_the_answer_is_recomputed_from_saved_steps_and_is_a_steady_probe() -> None:
    ramp_load = LoadStep("rate", rate=44.0, ramp=RAMP)
    steps = [(0, ramp_load, _ramp_summary(CAPACITY_SLICES)),
             (1, LoadStep("rate", rate=25.0), _steady(25.0, 40)),
             (2, LoadStep("rate", rate=27.5), _steady(27.5, 300)),
             (3, LoadStep("rate", rate=26.25), _steady(26.25, 45))]
    found = findmax.outcome(SPEC, steps)
    assert found is not None and found.search == "ramp" and found.scan is not None
    assert found.best == 26.25 and found.failed_at == 27.5 and found.converged
    assert [p.step for p in found.probes] == [1, 2, 3]  # the ramp step is not a probe
    assert found.best in [p.value for p in found.probes if p.passed]
    data = found.to_json()
    assert data["search"] == "ramp" and data["ramp"]["failed_slice"] == 6 and data["ramp"]["candidate"] == 25.0
    assert "first lasting miss slice 6" in found.answer() and "the limit lies between 26.25 and 27.5" in found.answer()
    # With only the candidate met, the ramp's failing slice is the bracket's top.
    short = findmax.outcome(SPEC, steps[:2])
    assert short is not None and short.best == 25.0 and short.failed_at == pytest.approx(30.0)
    assert not short.converged  # 25 to 30 is wider than 5 %: the search would go on
    # A bisection's answer says so too.
    plain = findmax.outcome({**SPEC, "search": "bisect"}, steps[1:])
    assert plain is not None and plain.search == "bisect" and plain.to_json()["ramp"] is None


@pytest.mark.parametrize(("values", "match"), [
    ({"rate": [40.0], "search": "ramp", "ramp_from": 2, "ramp_time_s": 10}, "give find_max too"),
    ({"find_max": "rate", "slo": "ttft_p99=1s", "search": "ramp", "ramp_from": 2}, "give all three"),
    ({"find_max": "rate", "slo": "ttft_p99=1s", "search": "ramp", "ramp_time_s": 5, "rate": [40.0]}, "give all three"),
    ({"find_max": "rate", "slo": "ttft_p99=1s", "ramp": "linear", "ramp_from": 2, "ramp_time_s": 5, "rate": [40.0]},
     "give search ramp"),
    ({"find_max": "rate", "slo": "ttft_p99=1s", "search": "ramp", "ramp_from": 50, "ramp_time_s": 5,
      "rate": [40.0]}, "below every step's load"),
    ({"find_max": "rate", "slo": "ttft_p99=1s", "search": "ramp", "ramp_from": 2, "ramp_time_s": 5, "rate": [40.0],
      "workers": 2}, "one event loop"),
])
def test_a_ramp_search_needs_its_ramp(values: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        BenchSpec(url="http://127.0.0.1:1/v1", **values)


def test_a_ramp_search_plans_its_ramp_step_first() -> None:
    from tokometer.benchmark.plan import RampSearchPlan, plan_for

    spec = BenchSpec(url="http://127.0.0.1:1/v1", find_max="rate", slo="ttft_p99=1s", search="ramp", ramp_from=2,
                     ramp_time_s=10, rate=[40.0])
    plan = plan_for(spec)
    assert isinstance(plan, RampSearchPlan)
    first = plan.next_step([])
    assert first is not None and first.load.ramp == Ramp("linear", 2.0, 40.0, 10.0)
    assert first.limits is not None and first.limits.duration_s == 10.0 and first.limits.requests is None
    assert first.time_slice_s == 1.0


SLOTS = Ramp("linear", 2.0, 12.0, 10.0)  # a slot more every second


def _slots_slice(index: int, ttft_ms: float) -> dict[str, Any]:
    entry = _slice(index, ttft_ms, 20)
    return {**entry, "target": (SLOTS.at(index) + SLOTS.at(index + 1)) / 2}


def test_a_concurrency_slice_misses_at_the_most_slots_it_had_open() -> None:
    """A server that holds 8 requests at once: slice 6 (6-7 s, mean target 8.5) had a 9th slot open for its second
    half, and misses. The miss counts at 9, not at the slice's 8 whole slots on average, so the steady probes go
    7 (met), 8 (met) and 9 (the ramp's miss, confirmed: missed): the answer is 8, which counting the miss at 8 would
    never have probed."""
    slices = [*(_slots_slice(k, 40) for k in range(6)), _slots_slice(6, 400), _slots_slice(7, 900)]
    load = LoadStep("concurrency", concurrency=12, ramp=SLOTS)
    scan = findmax.scan_ramp(_ramp_summary(slices), load, OBJECTIVES, 0, "concurrency")
    fail = scan.failing
    assert fail is not None and fail.index == 6 and fail.probe.value == 8.0 and scan.miss_load == 9.0
    assert scan.candidate == 7.0  # the last good slice's whole slots (mean 7.5)
    history = _confirm(scan, 8.0)
    assert history == [(7.0, True), (8.0, True), (9.0, False)]
    spec = {"find_max": "concurrency", "slo": "ttft_p99=100ms", "search": "ramp", "concurrency": [12]}
    steps = [(0, load, _ramp_summary(slices)), (1, LoadStep("concurrency", concurrency=7), _steady(7, 40)),
             (2, LoadStep("concurrency", concurrency=8), _steady(8, 40)),
             (3, LoadStep("concurrency", concurrency=9), _steady(9, 400))]
    found = findmax.outcome(spec, steps)
    assert found is not None and found.best == 8.0 and found.failed_at == 9.0 and found.converged


def test_a_ramps_slices_are_never_under_the_shortest_slice() -> None:
    from tokometer.util.limits import MIN_SLICE_S

    assert slice_width(5e-9, None) == MIN_SLICE_S  # a tenth of a 5 ns ramp
    assert slice_width(30.0, None) == 3.0 and slice_width(30.0, 0.5) == 0.5


@pytest.mark.parametrize(("value", "match"), [(1e-10, "at least 0.001 s"), (0.0009, "at least 0.001 s"),
                                              (2e6, "at most 1e\\+06 s")])
def test_a_time_slice_out_of_range_is_refused(value: float, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        BenchSpec(url="http://127.0.0.1:1/v1", concurrency=[2], time_slice_s=value)
    assert BenchSpec(url="http://127.0.0.1:1/v1", concurrency=[2], time_slice_s=0.001).time_slice_s == 0.001


@pytest.mark.parametrize(("values", "match"), [
    ({"rate": [10.0], "ramp": "exponential", "ramp_from": 1e-320, "ramp_time_s": 5.0},
     "ramp_from 9.99989e-321 is out of range"),
    ({"rate": [2e9], "ramp": "linear", "ramp_from": 1.0, "ramp_time_s": 5.0}, "less than or equal to 1000000000"),
    ({"rate": [10.0], "ramp": "linear", "ramp_from": 1.0, "ramp_time_s": 1e-12}, "greater than or equal to 0.001"),
])
def test_a_ramp_out_of_range_is_bad_input(values: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        BenchSpec(url="http://127.0.0.1:1/v1", **values)
