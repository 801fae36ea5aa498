"""How sure a percentile of a sample is: distribution-free intervals from order statistics.

Of ``n`` independent values, the number ``B`` below the true ``q``-quantile is Binomial(n, q), whatever the
distribution. So the ``l``-th and ``u``-th smallest values bracket the quantile with probability
``P(l <= B < u)``; `interval` takes the narrowest such ranks for the confidence asked (two-sided, equal tails;
W. J. Conover, *Practical Nonparametric Statistics*, 3rd ed., §3.2). When ``u`` would have to exceed ``n`` the
sample cannot bound the percentile from above at all: a p99 of 100 values is their second largest, and the
true p99 may lie anywhere beyond it. `bounded_from` is the least ``n`` for which the upper end exists:
``n >= ln((1 - confidence) / 2) / ln(q)``, 368 for a p99 at 95 % (p95: 72, p90: 36, p50: 6, p99.9: 3,688).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from statistics import NormalDist

from tokometer.metrics.distribution import PERCENTILES

__all__ = ["CONFIDENCE", "binomial_cdfs", "bounded_from", "interval", "intervals", "ranks"]

CONFIDENCE = 0.95
EXACT_UP_TO = 2000
"""Ranks for more values come from the binomial's normal approximation (widened by one rank each side)."""


def binomial_cdfs(n: int, q: float) -> list[float]:
    """P(Binomial(n, q) <= k) for k = 0..n, each term in log space (exact enough for n in the hundred thousands)."""
    if not 0 < q < 1:
        return [1.0 if q <= 0 or k == n else 0.0 for k in range(n + 1)]
    log_q, log_r, lg_n = math.log(q), math.log1p(-q), math.lgamma(n + 1)
    out, total = [], 0.0
    for i in range(n + 1):
        total += math.exp(lg_n - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * log_q + (n - i) * log_r)
        out.append(min(total, 1.0))
    return out


def ranks(n: int, q: float, confidence: float = CONFIDENCE) -> tuple[int | None, int | None]:
    """The 1-based ranks (l, u) of the order statistics that bracket the ``q``-quantile of ``n`` values at
    ``confidence``: the largest l with P(B <= l - 1) <= tail and the smallest u with P(B <= u - 1) >= 1 - tail,
    tail = (1 - confidence) / 2; None for an end the sample cannot bound."""
    if n <= 0:
        return None, None
    if n > EXACT_UP_TO and min(q, 1 - q) * n >= 20:  # the binomial's normal approximation, a rank wider
        half = NormalDist().inv_cdf(0.5 + confidence / 2.0) * math.sqrt(n * q * (1 - q))
        lo, hi = math.floor(n * q - half), math.ceil(n * q + 1 + half)
        return (lo if lo >= 1 else None), (hi if hi <= n else None)
    tail, cdf = (1.0 - confidence) / 2.0, binomial_cdfs(n, q)
    lows = [rank for rank in range(1, n + 1) if cdf[rank - 1] <= tail]
    highs = [rank for rank in range(1, n + 1) if cdf[rank - 1] >= 1.0 - tail]
    return (lows[-1] if lows else None), (highs[0] if highs else None)


def interval(ordered: Sequence[float], q: float, confidence: float = CONFIDENCE) -> tuple[float | None, float | None]:
    """(low, high) around the ``q``-quantile (0 < q < 1) of the values ``ordered`` (sorted ascending);
    None for an end the sample cannot bound (too few values beyond the percentile)."""
    lo, hi = ranks(len(ordered), q, confidence)
    return (ordered[lo - 1] if lo is not None else None), (ordered[hi - 1] if hi is not None else None)


def bounded_from(q: float, confidence: float = CONFIDENCE) -> int:
    """The fewest values whose largest bounds the ``q``-quantile from above at ``confidence``."""
    return math.ceil(math.log((1.0 - confidence) / 2.0) / math.log(q))


def intervals(values: Iterable[float], scale: float = 1.0,
              confidence: float = CONFIDENCE) -> dict[str, list[float | None]]:
    """``{"p50": [low, high], ...}`` for each of `PERCENTILES` (keys as `Distribution.to_json` names them), the
    values multiplied by ``scale``; empty for no values."""
    ordered = sorted(v * scale for v in values)
    if not ordered:
        return {}
    return {"p" + f"{p:g}": list(interval(ordered, p / 100.0, confidence)) for p in PERCENTILES}
