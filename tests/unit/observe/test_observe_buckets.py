"""The rule for histogram percentiles (`tokometer.observe.buckets`), against observations whose percentiles are known.

Each case draws observations, buckets them as a Prometheus histogram does (cumulative counts per ``le``), and
holds what the rule says against the nearest-rank percentile of the observations themselves.
"""

from __future__ import annotations

import math
import random
from dataclasses import astuple

import pytest

from tokometer.observe.buckets import NUMBER_MAX_RATIO, Located, describe, from_json, locate

INF = math.inf
VLLM_QUEUE = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0,
              960.0, 1920.0, 7680.0)
"""vLLM V1's request_queue_time_seconds buckets (vllm/v1/metrics/loggers.py)."""
VLLM_TTFT = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
             40.0, 80.0, 160.0, 640.0, 2560.0)


def _bucketed(values: list[float], bounds: tuple[float, ...]) -> list[tuple[float, float]]:
    return [(le, float(sum(1 for v in values if v <= le))) for le in (*bounds, INF)]


def _nearest_rank(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(q * len(ordered))) - 1]


def test_everything_in_the_first_bucket_is_a_bound_not_a_number() -> None:
    # the defect seen on a real vLLM: 18 queue times of about 0.02 ms, all in le="0.3"; interpolation said
    # p50 150 ms and p99 297 ms
    queue = [2e-5] * 18
    buckets = _bucketed(queue, VLLM_QUEUE)
    p50, p99 = locate(0.5, buckets), locate(0.99, buckets)
    assert p50 is not None and p99 is not None
    assert astuple(p50) == pytest.approx(astuple(Located("below", 0.0, 0.3, 0.15)))
    assert astuple(p99) == pytest.approx(astuple(Located("below", 0.0, 0.3, 0.297)))
    assert p50.value is None and p99.value is None
    assert describe(p50.scaled(1e3), unit="ms") == "≤ 300 ms"
    assert describe(p99.scaled(1e3), unit="ms") == "≤ 300 ms"


def test_the_inf_bucket_is_a_lower_bound() -> None:
    slow = [0.1] * 5 + [9000.0] * 5
    p90 = locate(0.9, _bucketed(slow, VLLM_QUEUE))
    assert p90 is not None and (p90.kind, p90.lower, p90.upper) == ("above", 7680.0, None)
    assert p90.estimate == 7680.0  # Prometheus answers the largest finite edge
    assert describe(p90, unit="s") == "> 7,680 s"


def test_a_wide_bucket_is_a_range_a_narrow_one_a_number() -> None:
    wide = locate(0.5, _bucketed([0.03] * 10, VLLM_TTFT))  # (20 ms, 40 ms]: twice as high as it starts
    assert wide is not None and (wide.kind, wide.lower, wide.upper) == ("range", 0.02, 0.04)
    assert describe(wide.scaled(1e3), unit="ms") == "20–40 ms"
    half = locate(0.5, _bucketed([0.05] * 10, VLLM_TTFT))  # (40 ms, 60 ms]: 1.5 x, still a range
    assert half is not None and half.kind == "range" and half.value is None
    assert describe(half.scaled(1e3), unit="ms") == "40–60 ms"
    fine = tuple(0.04 * 1.05 ** k for k in range(12))  # buckets 5 % apart: a number
    narrow = locate(0.5, _bucketed([0.05] * 10, fine))
    assert narrow is not None and narrow.kind == "value" and narrow.value == pytest.approx(0.05, rel=0.05)


VLLM_ITL = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0)
"""vLLM V1's inter_token_latency_seconds buckets."""


def test_a_percentile_inside_a_wide_bucket_is_its_range_not_the_interpolation() -> None:
    """The case seen on a real vLLM: inter-token gaps of 52-54 ms (the client's p50 and vLLM's own mean said so)
    filled its (50 ms, 75 ms] bucket, where Prometheus' interpolation put the p50 at about 62.5 ms. The rule
    says 50-75 ms, which holds the truth; no number is shown."""
    rng = random.Random(7)
    gaps = [rng.uniform(0.051, 0.055) for _ in range(400)] + [rng.uniform(0.02, 0.05) for _ in range(40)]
    p50 = locate(0.5, _bucketed(gaps, VLLM_ITL))
    assert p50 is not None and p50.estimate is not None and 0.060 < p50.estimate < 0.065
    truth = _nearest_rank(gaps, 0.5)
    assert 0.051 <= truth <= 0.055
    assert (p50.kind, p50.lower, p50.upper, p50.value) == ("range", 0.05, 0.075, None)
    assert describe(p50.scaled(1e3), unit="ms") == "50–75 ms"


@pytest.mark.parametrize("seed", range(20))
def test_the_bucket_always_holds_the_true_percentile(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.choice([1, 3, 18, 100, 1000])
    median = rng.choice([2e-5, 0.003, 0.03, 0.2, 1.0, 30.0])
    values = [rng.lognormvariate(math.log(median), rng.choice([0.1, 0.5, 1.5])) for _ in range(n)]
    bounds = rng.choice([VLLM_QUEUE, VLLM_TTFT, (0.01, 0.015, 0.02, 0.03, 0.045, 0.07, 0.1),
                         tuple(1e-5 * 1.08 ** k for k in range(200))])
    buckets = _bucketed(values, bounds)
    for q in (0.5, 0.9, 0.99):
        truth = _nearest_rank(values, q)
        found = locate(q, buckets)
        assert found is not None
        assert found.lower is not None
        assert found.lower <= truth and (found.lower == 0 or truth > found.lower)
        assert found.upper is None or truth <= found.upper
        if found.kind == "value":  # a number only from a bucket that locates it to +-5 % of its middle
            assert found.lower > 0 and found.upper is not None and found.upper <= NUMBER_MAX_RATIO * found.lower
            assert found.value is not None and abs(found.value - truth) <= 0.1 * truth
        else:
            assert found.value is None
        if found.upper == bounds[0]:
            assert found.kind == "below" and found.lower == 0
        elif found.upper is None:
            assert found.kind == "above" and found.lower == bounds[-1]
        else:
            assert found.kind == ("value" if found.upper <= NUMBER_MAX_RATIO * found.lower else "range")


def test_nothing_observed_and_bad_quantiles() -> None:
    assert locate(0.5, [(0.1, 0.0), (INF, 0.0)]) is None
    assert locate(1.5, [(0.1, 1.0), (INF, 1.0)]) is None
    assert locate(0.5, []) is None
    assert describe(None) == "-"


def test_a_block_stored_before_the_rule_still_reads() -> None:
    old = {"count": 18.0, "mean": 2e-5, "p50": 0.15, "p90": 0.27, "p99": 0.297}
    located = from_json(old, "p50")
    assert located == Located("unknown", None, None, 0.15)
    assert located is not None and describe(located, unit="ms") == "≈ 0.1 ms" and located.value is None
    assert from_json(old, "p75") is None and from_json(None, "p50") is None
    new = {"count": 18.0, "p50": None, "quantiles": {"p50": {"kind": "below", "lower": 0.0, "upper": 0.3,
                                                             "estimate": 0.15}}}
    assert describe(from_json(new, "p50")) == "≤ 0.3"


OLD_BLOCK = {"source": "vllm", "samples": 5, "gaps": 0, "duration_s": 4.0, "gauges": {}, "counters": {},
             "rates": {"generation_tokens": 90.0}, "prefix_cache_hit_rate": None,
             "histograms": {"queue": {"count": 18.0, "mean": 2e-5, "p50": 0.15, "p90": 0.27, "p99": 0.297}}}
"""A step's server block as runs stored before the rule kept it: bare interpolated numbers, no buckets."""


def _new_block() -> dict[str, object]:
    from tokometer.observe.server_window import server_window
    from tokometer.observe.snapshot import Histogram, Snapshot

    def snap(t: int, n: float) -> Snapshot:
        h = Histogram(buckets=((0.3, n), (1.0, n), (INF, n)), count=n, sum=n * 2e-5)
        return Snapshot(at_ns=t * 1_000_000_000, source="vllm", histograms={"queue": h})

    return server_window([snap(0, 0.0), snap(4, 18.0)]).to_json()


def test_the_step_report_reads_old_and_new_blocks() -> None:
    from tokometer.report.console import server_lines

    old = server_lines(OLD_BLOCK)
    # stored without its bucket: the number, marked as an interpolation
    assert "server queue: p50 ≈ 150.0 / p99 ≈ 297.0 ms, mean 0.020 ms (18 observed)" in old
    new = server_lines(_new_block())
    assert "server queue: p50 ≤ 300 / p99 ≤ 300 ms, mean 0.020 ms (18 observed)" in new


def test_the_report_chart_draws_a_bound_as_its_bucket() -> None:
    pytest.importorskip("plotly")
    from tokometer.report.charts import server

    def run(block: dict[str, object]) -> dict[str, object]:
        return {"id": 1, "name": "r", "steps": [{"label": "c=2", "server": block, "summary": {}}]}

    for block, y, bars in ((OLD_BLOCK, 150.0, None), (_new_block(), 150.0, (150.0, 150.0))):
        fig = server([run(block)])
        trace = next(t for t in fig.data if (t.meta or {}).get("name") == "queue p50")
        assert list(trace.y) == [pytest.approx(y)]
        if bars is None:
            assert list(trace.error_y.array) == [0.0] and list(trace.text) == ["≈ 150.0 ms"]
        else:  # the middle of (0, 300 ms] with bars to its edges, and the bound in words
            assert (trace.error_y.arrayminus[0], trace.error_y.array[0]) == pytest.approx(bars)
            assert list(trace.text) == ["≤ 300 ms"]
