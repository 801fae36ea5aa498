"""Percentile intervals from order statistics (`tokometer.metrics.order_stats`), against hand-computed values."""

from __future__ import annotations

import random

from tokometer.metrics.order_stats import binomial_cdfs, bounded_from, interval, intervals, ranks


def test_ranks_match_the_binomial_by_hand() -> None:
    # n = 100, median: P(B <= 39) = 0.0176 <= 0.025 < P(B <= 40) = 0.0284, so l = 40; u = 61 by symmetry.
    assert ranks(100, 0.5) == (40, 61)
    assert abs(binomial_cdfs(100, 0.5)[39] - 0.017600) < 1e-5
    # A p99 of 100 values has no upper end: P(B <= 99) = 1 - 0.99**100 = 0.634 < 0.975.
    assert ranks(100, 0.99)[1] is None
    assert [bounded_from(q) for q in (0.5, 0.9, 0.95, 0.99, 0.999)] == [6, 36, 72, 368, 3688]
    assert ranks(368, 0.99)[1] == 368 and ranks(367, 0.99)[1] is None


def test_the_interval_covers_the_true_percentile_as_often_as_it_says() -> None:
    rng = random.Random(7)
    hits = 0
    for _ in range(400):  # exponential values: the true p90 is ln(10)
        low, high = interval(sorted(rng.expovariate(1.0) for _ in range(200)), 0.9)
        assert low is not None and high is not None
        hits += low <= 2.302585 <= high
    assert 0.93 * 400 <= hits <= 0.99 * 400, hits


def test_intervals_of_each_percentile() -> None:
    out = intervals(range(1, 101), scale=2.0)
    assert out["p50"] == [80.0, 122.0] and out["p99"][1] is None and set(out) == {"p50", "p90", "p95", "p99", "p99.9"}
    assert intervals([]) == {}
