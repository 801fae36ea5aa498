"""Whether a step's server kept up with the requests sent to it: two stated tests on the records.

Under a request rate, a server that cannot sustain the rate builds a queue that grows through the step: each
request waits for every one before it, so its TTFT grows with its send time, and the server finishes requests
more slowly than they were sent. `overload` tests both, each one-sided at level `ALPHA`:

- **Queue growth** (Mann–Kendall, with Sen's slope). TTFT (E2E when no request streamed) of the completed
  requests against their send times: the Theil–Sen slope ``b`` (the median of the pairwise slopes, seconds of
  TTFT per second of sending) and its one-sided lower confidence bound from Kendall's S (variance
  ``n(n-1)(2n+5)/18``; P. K. Sen, JASA 63, 1968), the variance widened by the lag autocorrelations of the
  detrended series' ranks that are significant at 5 % (K. H. Hamed and A. R. Rao, J. Hydrology 204, 1998):
  waits in a queue follow one another. Overloaded when the bound is above zero. In a queue fed at
  rate ``λ`` and served at ``μ < λ`` the wait grows by ``(λ - μ) / μ`` seconds per second, so ``b`` also gives
  the rate the server sustained: ``sustained_rps = λ / (1 + b)``.
- **Completions against sends**. The completed requests over their span (first to last end) and the sent ones
  over theirs (first to last send), taken as two Poisson counts: given their sum, the completions are
  Binomial(sum, T_done / (T_done + T_sent)) when the two rates are equal; overloaded when so few completions
  (or so long a span) has probability below `ALPHA`. The two counts are of the same requests, so this test is
  conservative; it catches a server that finished clearly fewer than it was sent, the queue test the rest.

Limits, stated: a stable server whose queue is still filling from empty (a probe far shorter than the queue's
own time to settle, near capacity) also has TTFT growing, and reads as overloaded: then the probe's numbers
were not its steady state either, and an answer built on it errs low, never high. Measured on hand-built
queues (one server, fixed service time, Poisson arrivals, 100 requests; tests/unit/metrics/test_overload.py):
at 60 % of capacity about 1 % of probes read as overloaded, at 80 % about 17 %, at 90 % about a third; at
105 % of capacity two thirds are caught, at 125 % nearly all. A server with many slots (a batching engine)
wanders less than one server and reads truer near capacity.
Over `MAX_PAIRS_OF` requests, every k-th in send order is used (the slope needs all pairs).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from statistics import NormalDist
from typing import Any

import numpy as np

from tokometer.metrics import request as m
from tokometer.metrics.order_stats import binomial_cdfs
from tokometer.records import RequestRecord

__all__ = ["ALPHA", "MAX_PAIRS_OF", "MIN_REQUESTS", "Overload", "overload"]

ALPHA = 0.01
"""The level of each test (one-sided)."""
MIN_REQUESTS = 8
"""Fewer completed requests are not tested (None)."""
MAX_PAIRS_OF = 1000


@dataclass(frozen=True, slots=True)
class Overload:
    """The two tests of one step (see the module docstring)."""

    n: int
    """Completed requests tested."""
    latency: str
    """``ttft`` or ``e2e``: the latency whose trend was tested."""
    slope: float
    """Theil–Sen slope: seconds of latency per second of send time."""
    slope_low: float
    """Its one-sided lower confidence bound at 1 - `ALPHA`."""
    rise_ms: float
    """The fitted rise over the step: slope × (last send - first send), in ms."""
    send_rate_rps: float | None
    completion_rate_rps: float | None
    rate_p: float | None
    """P-value of the completions-against-sends test (None: a span of zero)."""
    sustained_rps: float | None
    """send rate / (1 + slope) when the slope is positive: the rate the server finished at by the queue's
    growth; None otherwise."""
    queue_grew: bool
    fell_behind: bool

    @property
    def overloaded(self) -> bool:
        return self.queue_grew or self.fell_behind

    def why(self) -> str:
        """The evidence, in words (empty when not overloaded)."""
        parts = []
        if self.queue_grew:
            sustained = f"; sustained about {self.sustained_rps:.3g} req/s" if self.sustained_rps else ""
            parts.append(f"{self.latency.upper()} rose {self.rise_ms:,.0f} ms through the step (Theil-Sen "
                         f"{1e3 * self.slope:.3g} ms/s, {100 * (1 - ALPHA):g}% bound {1e3 * self.slope_low:.3g} "
                         f"ms/s > 0{sustained})")
        if self.fell_behind and self.completion_rate_rps and self.send_rate_rps:
            parts.append(f"finished {self.completion_rate_rps:.3g} req/s of {self.send_rate_rps:.3g} sent "
                         f"(p = {self.rate_p:.2g})")
        return "; ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "overloaded": self.overloaded}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Overload | None:
        if not data:
            return None
        names = cls.__dataclass_fields__
        return cls(**{k: v for k, v in data.items() if k in names})


def _sen(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """(Theil–Sen slope, its one-sided lower bound at 1 - ALPHA) of y against x, Kendall's variance widened for
    the series' own autocorrelation (Hamed & Rao)."""
    i, j = np.triu_indices(len(x), k=1)
    dx, dy = x[j] - x[i], y[j] - y[i]
    keep = dx > 0
    slopes = np.sort(dy[keep] / dx[keep])
    n, pairs = len(x), len(slopes)
    slope = float(np.median(slopes))
    ranked = np.argsort(np.argsort(y - slope * x)).astype(float)
    ranked -= ranked.mean()
    spread, significant = float((ranked * ranked).sum()), NormalDist().inv_cdf(0.975) / math.sqrt(n)
    lag = np.arange(1, n - 2, dtype=np.float64)
    rho = np.correlate(ranked, ranked, mode="full")[n:2 * n - 3] / spread if spread else np.zeros(len(lag))
    weight = (n - lag) * (n - lag - 1) * (n - lag - 2)
    widen = float((weight * rho)[np.abs(rho) > significant].sum())
    factor = max(1.0, 1.0 + 2.0 * widen / (n * (n - 1) * (n - 2)))
    c = NormalDist().inv_cdf(1 - ALPHA) * math.sqrt(n * (n - 1) * (2 * n + 5) / 18.0 * factor)
    low_rank = math.floor((pairs - c) / 2)  # 0-based: the (N - C)/2-th smallest pairwise slope
    return slope, float(slopes[low_rank]) if low_rank >= 0 else -math.inf


def overload(records: Sequence[RequestRecord], send_rate_rps: float | None,
             completion_rate_rps: float | None) -> Overload | None:
    """The step's two tests over its measured (non-warm-up) requests, given the step's send and completion
    rates (`tokometer.metrics.summary`); None with fewer than `MIN_REQUESTS` completed or no spread of send
    times."""
    window = sorted((r for r in records if not r.warmup and r.sent_ns), key=lambda r: r.sent_ns)
    ok = [r for r in window if r.ok]
    latency, points = "ttft", [(r.sent_ns, m.ttft_ns(r)) for r in ok if m.ttft_ns(r) is not None]
    if len(points) < MIN_REQUESTS:
        latency, points = "e2e", [(r.sent_ns, m.e2e_ns(r)) for r in ok]
    if len(points) < MIN_REQUESTS:
        return None
    if len(points) > MAX_PAIRS_OF:
        points = points[::math.ceil(len(points) / MAX_PAIRS_OF)]
    x = np.array([(s - points[0][0]) / 1e9 for s, _ in points])
    y = np.array([(v or 0) / 1e9 for _, v in points])
    if x[-1] <= 0:
        return None
    slope, low = _sen(x, y)
    rate_p = None
    if send_rate_rps and completion_rate_rps:
        sent, done = len(window), len(ok)
        sent_span, done_span = (sent - 1) / send_rate_rps, (done - 1) / completion_rate_rps
        rate_p = binomial_cdfs(sent + done, done_span / (done_span + sent_span))[done]
    return Overload(
        n=len(points), latency=latency, slope=slope, slope_low=low, rise_ms=1e3 * slope * float(x[-1]),
        send_rate_rps=send_rate_rps, completion_rate_rps=completion_rate_rps, rate_p=rate_p,
        sustained_rps=send_rate_rps / (1 + slope) if send_rate_rps and slope > 0 else None,
        queue_grew=low > 0, fell_behind=rate_p is not None and rate_p < ALPHA)
