"""Where a histogram percentile lies: a number only when its bucket can locate it, else a range or a bound.

A Prometheus histogram keeps counts per bucket, not observations. The q-quantile's bucket is
exact: it is the first bucket whose cumulative count reaches q x count, and it holds the
⌈q x count⌉-th smallest observation (the nearest-rank percentile). Where in the bucket that
observation lies is not known; Prometheus' ``histogram_quantile`` interpolates linearly, as if
the bucket's observations were spread evenly over it. The rule (`locate`):

- **below** (``≤ U``): the bucket is the first one (lower edge 0). Nothing says where in (0, U]
  the observations are: a queue time of 0.02 ms and one of 290 ms fall in the same ``le="0.3"``;
- **above** (``> L``): the ``+Inf`` bucket, which has no upper edge;
- **range** (``L–U``): a bucket whose upper edge is more than `NUMBER_MAX_RATIO` times its lower;
- **value**: a bucket narrow enough (upper edge ≤ 1.1 x lower: ±5 % around its middle) that the
  interpolated figure is shown as a number.

Every bucket of the engines' default histograms is wider than that (vLLM's inter-token buckets go 50, 75,
100 ms: a p50 interpolated to 62.5 ms in (50, 75] while the observations' own median was 53 ms), so their
percentiles are ranges; a number shows only from a histogram with fine buckets.

A run stored before the rule has only the interpolated numbers: they read as kind ``unknown``,
written ``≈ 150.0``. Every other kind keeps its bucket's edges (``lower``, ``upper``; ``upper`` None for ``+Inf``) and
Prometheus' interpolated ``estimate`` (what a Grafana panel shows), so the JSON and the results
store say which bucket a percentile came from. `describe` writes one as text.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["NUMBER_MAX_RATIO", "Located", "bucket_index", "describe", "from_json", "locate"]

NUMBER_MAX_RATIO = 1.1
"""A percentile is a number only in a bucket whose upper edge is at most this many times its lower edge (then
the interpolated figure is within 5 % of the true one)."""


@dataclass(frozen=True, slots=True)
class Located:
    """One histogram percentile: the bucket holding it, what may be said of it, and Prometheus' figure."""

    kind: str
    """``value``, ``range``, ``below`` (the first bucket), ``above`` (the ``+Inf`` bucket), or ``unknown`` (a run
    stored before the rule: its interpolated number, without the bucket it came from)."""
    lower: float | None
    """The bucket's lower edge (0 for the first bucket); None where not known (a run stored before the rule)."""
    upper: float | None
    """The bucket's upper edge; None for ``+Inf`` or where not known."""
    estimate: float | None
    """Prometheus' ``histogram_quantile``: linear within the bucket, the largest finite edge in ``+Inf``."""

    @property
    def value(self) -> float | None:
        """The percentile as a number, only where its bucket locates it (kind ``value``)."""
        return self.estimate if self.kind == "value" else None

    def scaled(self, factor: float) -> Located:
        """The same in another unit (x ``factor``: 1e3 for milliseconds)."""
        def s(v: float | None) -> float | None:
            return None if v is None else v * factor
        return Located(self.kind, s(self.lower), s(self.upper), s(self.estimate))

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "lower": self.lower, "upper": self.upper, "estimate": self.estimate}


def bucket_index(rank: float, buckets: Sequence[tuple[float, float]]) -> int | None:
    """The index of the first cumulative ``(le, count)`` bucket whose count reaches ``rank`` (None: none)."""
    below = 0.0
    for i, (_, count) in enumerate(buckets):
        if count >= rank and count > below:
            return i
        below = count
    return None


def _interpolate(i: int, rank: float, buckets: Sequence[tuple[float, float]]) -> float | None:
    le, count = buckets[i]
    lower, below = (buckets[i - 1] if i > 0 else (0.0, 0.0))
    if math.isinf(le):
        return lower if i > 0 else None
    if i == 0 and le <= 0:
        return le
    return lower + (le - lower) * (rank - below) / (count - below)


def locate(q: float, buckets: Sequence[tuple[float, float]]) -> Located | None:
    """The q-quantile of cumulative ``(le, count)`` buckets (``+Inf`` last) by the rule; None: nothing observed."""
    if not buckets or not 0.0 <= q <= 1.0 or buckets[-1][1] <= 0:
        return None
    rank = q * buckets[-1][1]
    i = bucket_index(rank, buckets)
    if i is None:
        return None
    estimate = _interpolate(i, rank, buckets)
    upper = buckets[i][0]
    lower = buckets[i - 1][0] if i > 0 else min(0.0, upper)
    if math.isinf(upper):
        return Located("above", lower, None, estimate)
    if i == 0:
        return Located("below", lower, upper, estimate)
    if lower > 0 and upper <= NUMBER_MAX_RATIO * lower:
        return Located("value", lower, upper, estimate)
    return Located("range", lower, upper, estimate)


def from_json(histogram: Mapping[str, Any] | None, name: str) -> Located | None:
    """Percentile ``name`` (``p50``...) of a stored histogram block; a block stored before the rule (no
    ``quantiles``) gives its bare number as kind ``unknown`` (edges not kept). None: not there."""
    if not histogram:
        return None
    stored = (histogram.get("quantiles") or {}).get(name)
    if isinstance(stored, Mapping):
        return Located(str(stored.get("kind")), stored.get("lower"), stored.get("upper"), stored.get("estimate"))
    value = histogram.get(name)
    return Located("unknown", None, None, float(value)) if isinstance(value, int | float) else None


def _num(value: float, digits: int) -> str:
    return f"{value:,.{digits}f}"


def _edge(value: float, digits: int) -> str:
    """A bucket edge, without trailing zeros (``300``, ``2.5``)."""
    text = _num(value, digits)
    return text.rstrip("0").rstrip(".") if "." in text else text


def describe(p: Located | None, digits: int = 1, unit: str = "") -> str:
    """``12.3``, ``20–40``, ``≤ 300``, ``> 10,000``, ``≈ 150.0`` (stored without its bucket; then ``unit``);
    ``-`` for nothing."""
    suffix = f" {unit}" if unit else ""
    if p is None:
        return "-"
    if p.kind == "value" and p.estimate is not None:
        return _num(p.estimate, digits) + suffix
    if p.kind == "range" and p.lower is not None and p.upper is not None:
        return f"{_edge(p.lower, digits)}–{_edge(p.upper, digits)}{suffix}"
    if p.kind == "below" and p.upper is not None:
        return f"≤ {_edge(p.upper, digits)}{suffix}"
    if p.kind == "above" and p.lower is not None:
        return f"> {_edge(p.lower, digits)}{suffix}"
    if p.kind == "unknown" and p.estimate is not None:
        return f"≈ {_num(p.estimate, digits)}{suffix}"
    return "-"
