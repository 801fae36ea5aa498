"""A window of Snapshots -> what the server did: hand-made scrapes whose answer is known exactly."""

from __future__ import annotations

import math
from dataclasses import astuple

import pytest

from tokometer.observe.buckets import Located
from tokometer.observe.server_window import (
    GaugeWindow,
    counter_increase,
    histogram_increase,
    histogram_quantile,
    server_window,
)
from tokometer.observe.snapshot import Histogram, Snapshot

INF = math.inf
S = 1_000_000_000


def _h(*buckets: tuple[float, float], total: float = 0.0) -> Histogram:
    return Histogram(buckets=tuple(buckets), count=buckets[-1][1], sum=total)


def _snap(t_s: float, *, gauges: dict[str, float] | None = None, counters: dict[str, float] | None = None,
          histograms: dict[str, Histogram] | None = None, source: str = "vllm") -> Snapshot:
    return Snapshot(at_ns=int(t_s * S), source=source, gauges=gauges or {}, counters=counters or {},
                    histograms=histograms or {})


def test_counter_increase_with_a_reset() -> None:
    assert counter_increase([10, 15, 20]) == 10
    assert counter_increase([10, 15, 3, 8]) == 5 + 3 + 5  # reset after 15: the server counted 3 since
    assert counter_increase([5]) == 0


def test_gauges_counters_and_rates() -> None:
    snaps = [
        _snap(10, gauges={"requests_running": 2, "kv_cache_usage": 0.5},
              counters={"generation_tokens": 1000, "prompt_tokens": 100, "preemptions": 1}),
        _snap(11, gauges={"requests_running": 6, "kv_cache_usage": 0.9},
              counters={"generation_tokens": 1400, "prompt_tokens": 300, "preemptions": 1}),
        _snap(12, gauges={"requests_running": 4, "kv_cache_usage": 0.7},
              counters={"generation_tokens": 1800, "prompt_tokens": 500, "preemptions": 3}),
    ]
    w = server_window(snaps, gaps=1)
    assert (w.source, w.samples, w.gaps, w.duration_s) == ("vllm", 3, 1, 2.0)
    assert w.gauges["requests_running"] == GaugeWindow(mean=4.0, max=6.0)
    assert w.gauges["kv_cache_usage"].mean == pytest.approx(0.7) and w.gauges["kv_cache_usage"].max == 0.9
    assert w.counters == {"generation_tokens": 800, "prompt_tokens": 400, "preemptions": 2}
    assert w.rates == {"generation_tokens": 400.0, "prompt_tokens": 200.0, "preemptions": 1.0}
    assert w.prefix_cache_hit_rate is None and w.histograms == {}


def test_prefix_cache_hit_rate_from_counters_else_the_gauge() -> None:
    counted = [_snap(0, counters={"prefix_cache_queries": 100, "prefix_cache_hits": 10},
                     gauges={"prefix_cache_hit_rate": 0.9}),
               _snap(1, counters={"prefix_cache_queries": 300, "prefix_cache_hits": 60},
                     gauges={"prefix_cache_hit_rate": 0.9})]
    assert server_window(counted).prefix_cache_hit_rate == 0.25  # 50 hits / 200 queries, not the gauge
    gauge_only = [_snap(0, gauges={"prefix_cache_hit_rate": 0.2}), _snap(1, gauges={"prefix_cache_hit_rate": 0.4})]
    assert server_window(gauge_only).prefix_cache_hit_rate == pytest.approx(0.3)


def test_histogram_quantile_interpolates_as_prometheus_does() -> None:
    buckets = [(0.1, 10.0), (0.2, 30.0), (0.5, 40.0), (INF, 40.0)]
    assert histogram_quantile(0.5, buckets) == pytest.approx(0.15)  # rank 20: halfway through (0.1, 0.2]
    assert histogram_quantile(0.25, buckets) == pytest.approx(0.1)  # rank 10: the top of the first bucket
    assert histogram_quantile(0.1, buckets) == pytest.approx(0.04)  # rank 4: the first bucket starts at 0
    assert histogram_quantile(0.9, buckets) == pytest.approx(0.2 + 0.3 * 6 / 10)
    assert histogram_quantile(0.5, [(0.1, 0.0), (INF, 0.0)]) is None  # nothing observed
    # a rank in the +Inf bucket: the largest finite bound, as histogram_quantile answers
    assert histogram_quantile(0.99, [(0.1, 1.0), (1.0, 2.0), (INF, 10.0)]) == 1.0
    assert histogram_quantile(0.5, [(INF, 3.0)]) is None


def test_histogram_percentiles_come_from_the_window_s_bucket_increases() -> None:
    # before the window: 100 fast requests; in it: 20 more, 10 in (0.1, 0.2], 10 in (0.2, 0.4]
    first = _h((0.1, 100.0), (0.2, 100.0), (0.4, 100.0), (INF, 100.0), total=5.0)
    middle = _h((0.1, 100.0), (0.2, 105.0), (0.4, 105.0), (INF, 105.0), total=5.75)
    last = _h((0.1, 100.0), (0.2, 110.0), (0.4, 120.0), (INF, 120.0), total=9.5)
    w = server_window([_snap(0, histograms={"ttft": first}), _snap(1, histograms={"ttft": middle}),
                       _snap(2, histograms={"ttft": last})])
    ttft = w.histograms["ttft"]
    assert ttft.count == 20
    assert ttft.mean == pytest.approx(4.5 / 20)
    # rank 10 of 20: the top of (0.1, 0.2]; a bucket twice as high as its lower edge only gives a range
    assert astuple(ttft.quantiles["p50"]) == pytest.approx(astuple(Located("range", 0.1, 0.2, 0.2)))
    assert astuple(ttft.quantiles["p90"]) == pytest.approx(astuple(Located("range", 0.2, 0.4, 0.2 + 0.2 * 8 / 10)))
    assert ttft.quantiles["p99"].estimate == pytest.approx(0.2 + 0.2 * 9.8 / 10)
    assert (ttft.p50, ttft.p90, ttft.p99) == (None, None, None)  # no number where the bucket cannot locate it


def test_histogram_reset_takes_the_later_histogram() -> None:
    before = _h((0.1, 50.0), (INF, 60.0), total=10.0)
    restarted = _h((0.1, 2.0), (INF, 4.0), total=1.0)
    later = _h((0.1, 3.0), (INF, 6.0), total=1.5)
    increase = histogram_increase([before, restarted, later])
    assert increase == Histogram(buckets=((0.1, 3.0), (INF, 6.0)), count=6.0, sum=1.5)


def test_one_scrape_gives_gauges_but_no_deltas() -> None:
    w = server_window([_snap(5, gauges={"requests_waiting": 3}, counters={"generation_tokens": 10},
                             histograms={"e2e": _h((INF, 1.0))})])
    assert w.samples == 1 and w.duration_s == 0.0
    assert w.gauges["requests_waiting"] == GaugeWindow(3.0, 3.0)
    assert w.counters == {} and w.rates == {} and w.histograms == {}


def test_no_scrapes_at_all() -> None:
    w = server_window([], gaps=4)
    assert (w.source, w.samples, w.gaps) == ("none", 0, 4)


def test_snapshots_are_taken_in_time_order_and_sources_reported() -> None:
    a = _snap(2, counters={"generation_tokens": 30})
    b = _snap(1, counters={"generation_tokens": 10}, source="unknown")
    w = server_window([a, b])
    assert w.counters == {"generation_tokens": 20} and w.rates == {"generation_tokens": 20.0}
    assert w.source == "mixed: unknown, vllm"


def test_to_json_is_plain_data() -> None:
    import json

    first = _h((0.1, 0.0), (INF, 0.0))
    last = _h((0.1, 2.0), (INF, 2.0), total=0.1)
    w = server_window([_snap(0, gauges={"requests_running": 1}, histograms={"tpot": first}),
                       _snap(0.5, gauges={"requests_running": 3}, histograms={"tpot": last})])
    data = json.loads(json.dumps(w.to_json()))
    assert data["gauges"]["requests_running"] == {"mean": 2.0, "max": 3.0}
    # both observations in the first bucket: every percentile is "<= 100 ms", Prometheus' figure kept beside
    assert data["histograms"]["tpot"] == {
        "count": 2.0, "mean": 0.05, "p50": None, "p90": None, "p99": None,
        "quantiles": {"p50": {"kind": "below", "lower": 0.0, "upper": 0.1, "estimate": 0.05},
                      "p90": {"kind": "below", "lower": 0.0, "upper": 0.1, "estimate": pytest.approx(0.09)},
                      "p99": {"kind": "below", "lower": 0.0, "upper": 0.1, "estimate": pytest.approx(0.099)}}}
    assert data["prefix_cache_hit_rate"] is None and data["duration_s"] == 0.5
