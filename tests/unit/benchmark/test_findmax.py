"""The find-max search, objectives and verdicts (`tokometer.benchmark.findmax`), and the sweep plan."""

from __future__ import annotations

from typing import Any

import pytest

from tokometer.benchmark import findmax
from tokometer.benchmark.plan import SweepPlan
from tokometer.load.profiles import LoadStep
from tokometer.metrics.summary import StepSummary
from tokometer.util.errors import ConfigError


def test_objectives_parse_with_units_and_default_errors() -> None:
    text = "ttft_p99=2s, tpot_p50=50, itl_p99.9=0.5s,goodput_share=90%"
    parsed = {o.name: o.limit for o in findmax.parse_objectives(text)}
    assert parsed == {"ttft_p99": 2000.0, "tpot_p50": 50.0, "itl_p99.9": 500.0, "goodput_share": 0.9,
                      "error_rate": 0.01}
    # A run saved before one vocabulary wrote goodput= and errors=: its spec still reads, in today's names.
    old = {o.name: o.limit for o in findmax.parse_objectives("ttft_p99=2s,goodput=0.9,errors=2%")}
    assert old == {"ttft_p99": 2000.0, "goodput_share": 0.9, "error_rate": 0.02}
    assert findmax.per_request_slo(findmax.parse_objectives("ttft_p99=2s,ttft_p50=1s,tpot_p50=50ms,itl_p50=9")) == \
        {"slo_ttft_ms": 1000.0, "slo_tpot_ms": 50.0}
    for text, message in (("ttft=2s", "unknown objective"), ("output_throughput=0.5", "unknown objective"),
                          ("ttft_p99", "NAME=LIMIT"), ("error_rate=2%", "at least one"),
                          ("tpot_p50=-1", "not a time"), ("goodput=x", "not a share")):
        with pytest.raises(ConfigError, match=message):
            findmax.parse_objectives(text)


def _walk(kind: findmax.Kind, start: float, capacity: float) -> list[float]:
    """The probes of a search against a server that meets the objectives up to ``capacity``."""
    history: list[tuple[float, bool]] = []
    while (value := findmax.next_probe(kind, history, start)) is not None:
        history.append((value, value <= capacity))
    return [v for v, _ in history]


def test_the_search_doubles_then_bisects() -> None:
    assert _walk("concurrency", 1, 13) == [1, 2, 4, 8, 16, 12, 14, 13]
    assert _walk("concurrency", 4, 0) == [4, 2, 1]  # nothing meets: halves to the floor
    rates = _walk("rate", 1, 27.6)
    assert rates[:6] == [1, 2, 4, 8, 16, 32]
    assert findmax._bounds([(r, r <= 27.6) for r in rates]) == pytest.approx((27.0, 28.0))
    assert len(_walk("rate", 1, 1e9)) == findmax.MAX_PROBES  # never fails: stops at the probe limit


def test_the_answer_is_the_highest_pass_below_the_lowest_failure() -> None:
    # A noisy pass above a failure does not count.
    assert findmax._bounds([(4, True), (8, False), (6, True), (10, True)]) == (6, 8)


def _summary(ttft_p99: float, *, failed: int = 0, sent: float = 10.0, done: float = 10.0,
             growth: float = 1.0, goodput: float | None = None) -> dict[str, Any]:
    return {"requests_completed": 100 - failed, "requests_failed": failed, "duration_s": 10.0,
            "goodput_rps": goodput, "ttft_ms": {"p99": ttft_p99}, "send_rate_rps": sent,
            "completion_rate_rps": done, "ttft_growth": growth}


def _judge(summary: dict[str, Any], load: LoadStep, objectives: list[findmax.Objective],
           step: int = 0) -> findmax.Probe:
    """`findmax.judge` of a summary as a saved step's ``summary`` holds it (`StepSummary.to_json`'s keys)."""
    return findmax.judge(StepSummary.from_json(summary), load, objectives, step)


def test_probes_are_judged_on_each_objective_and_saturation() -> None:
    objectives = findmax.parse_objectives("ttft_p99=2s,goodput_share=0.9")
    rate = LoadStep("rate", rate=10.0)
    assert _judge(_summary(1500, goodput=9.5), rate, objectives).passed
    missed = _judge(_summary(2500, failed=3, goodput=8.0), rate, objectives)
    assert missed.misses == ("ttft_p99 2,500 ms > 2 s", "goodput_share 80% < 90%", "error_rate 3.0% > 1%")
    saturated = _judge(_summary(1500, goodput=9.5, done=7.0, growth=4.0), rate, objectives)
    assert saturated.saturated and not saturated.passed
    # Completions lagging without the queue growing (a short step's tail) is not saturation, nor the reverse.
    assert _judge(_summary(1500, goodput=9.5, done=7.0, growth=1.2), rate, objectives).passed
    assert _judge(_summary(1500, goodput=9.5, done=9.8, growth=4.0), rate, objectives).passed
    unmeasured = _judge({"requests_completed": 0, "requests_failed": 5}, rate, objectives)
    assert "ttft_p99: not measured" in unmeasured.misses


def test_a_sweep_repeats_whole_passes() -> None:
    plan = SweepPlan([LoadStep("concurrency", concurrency=1), LoadStep("concurrency", concurrency=4)], repeat=3)
    done: list[Any] = []
    order = []
    while (step := plan.next_step(done)) is not None:
        order.append((step.load.concurrency, step.trial))
        done.append(step)
    assert order == [(1, 1), (4, 1), (1, 2), (4, 2), (1, 3), (4, 3)]
    single = SweepPlan([LoadStep("synchronous")])
    # a sweep counts the steps done, so None stands in for one
    assert single.next_step([]) == single.next_step([]) and single.next_step([None]) is None  # type: ignore[list-item]
    first = single.next_step([])
    assert first is not None and first.trial is None


def test_an_overloaded_probe_misses_whatever_the_slo_and_doubtful_verdicts_say_so() -> None:
    objectives = findmax.parse_objectives("ttft_p99=2s")
    rate = LoadStep("rate", rate=16.875)
    # Issue 26: a loose SLO held at 16.875/s against a capacity of 16/s; the overload test (as stored) says no.
    overloaded = {"slope": 0.06, "slope_low": 0.03, "rise_ms": 350.0, "send_rate_rps": 16.87, "n": 100,
                  "completion_rate_rps": 15.98, "rate_p": 0.3, "sustained_rps": 15.9, "queue_grew": True,
                  "fell_behind": False, "latency": "ttft"}
    doubtful = {"ttft_ms": {"p99": [150.0, None]}}
    probe = _judge({**_summary(172), "ttft_ms": {"p99": 172, "count": 100}, "overload": overloaded,
                    "percentile_ci": doubtful}, rate, objectives)
    assert not probe.passed and probe.saturated and probe.misses[0].startswith("overloaded: TTFT rose 350 ms")
    assert probe.uncertain == () and probe.requests_needed is None  # the overload settles it
    # Kept up, p99 of 100 requests below the limit: met, but a p99 has no upper end below 368 requests.
    kept_up = {**overloaded, "slope": 0.0, "slope_low": -0.01, "queue_grew": False}
    met = _judge({**_summary(172), "ttft_ms": {"p99": 172, "count": 100}, "overload": kept_up,
                  "percentile_ci": doubtful}, LoadStep("rate", rate=9.375), objectives, step=1)
    assert met.passed and met.requests_needed == 368 and "95% interval 150 ms to unbounded" in met.uncertain[0]
    sure = _judge({**_summary(172), "ttft_ms": {"p99": 172, "count": 400}, "overload": kept_up,
                   "percentile_ci": {"ttft_ms": {"p99": [150.0, 190.0]}}}, rate, objectives)
    assert sure.passed and sure.uncertain == ()
    search = findmax.FindMax("rate", tuple(objectives), (met, probe), best=9.375, failed_at=16.875, converged=False)
    assert search.answer() == ("highest load meeting ttft_p99 <= 2 s, error_rate <= 1%: 9.375 req/s (search cut short; "
                               "16.875 missed: the limit lies between 9.375 and 16.875); uncertain: 1 of 2 verdicts "
                               "(9.375) rest on a percentile whose 95% interval holds the limit; about 368 requests "
                               "per probe would settle them (-n 368)")
    assert search.to_json()["requests_needed"] == 368
