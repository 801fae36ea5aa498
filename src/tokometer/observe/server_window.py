"""What the server did between two moments (a benchmark step), from the Snapshots scraped in it.

Pure functions of `Snapshot` values:

- **gauges**: mean and max over the scrapes (a plain mean of the samples, not weighted by time:
  the scrapes are evenly spaced);
- **counters**: the increase from the first scrape to the last, summed pair by pair so that a
  counter reset (the server restarted: a value lower than the one before) counts the later value
  as the increase, as Prometheus' ``rate()``/``increase()`` do (without their extrapolation to the
  window's edges); rates are the increase over the time between the first and the last scrape;
- **live counters**: where a snapshot carries a counter's in-progress gauge (``X_in_progress``:
  llama.cpp's tokens generated so far by the requests still running, `observe.llamacpp_slots`),
  the counter's increase is that of counter + in-progress (pair by pair; a small drop, from the
  two readings not being taken at once, counts 0; a drop of the counter itself is a reset), so
  it moves with every token;
- **counters added to only at request ends** (``at_request_end``: llama.cpp's generated tokens
  without ``/slots``, TGI's and the gateway's tokens, the simulator's): their increase is exact, but
  over a window that holds few request ends it is mostly chance; ``moved`` counts the scrape
  intervals in which each one moved, so a reader can say when a window is too short for it;
- **speculative decoding** (`observe.speculative`): acceptance rate Δaccepted / Δdrafted tokens and
  mean acceptance length 1 + Δaccepted / Δdrafts where the engine counts them, else its own gauges;
- **prefix-cache hit rate**: Δhits / Δqueries where the engine counts both (vLLM V1), else the
  mean of the engine's own hit-rate gauge (vLLM V0, SGLang);
- **histograms**: bucket increases over the window (again pair by pair, a decrease of the count
  being a reset), then p50/p90/p99 located by `observe.buckets.locate`: the bucket holding rank
  q x count, kept with each percentile (``quantiles``), and a number (``p50``...) only where that
  bucket is narrow enough to locate it; Prometheus' ``histogram_quantile`` interpolation is kept
  as each one's ``estimate``. The mean is Δsum / Δcount, exact whatever the buckets.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from tokometer.observe.buckets import Located, locate
from tokometer.observe.prometheus import merge_buckets
from tokometer.observe.snapshot import Histogram, Snapshot
from tokometer.observe.speculative import SpecWindow, spec_window

__all__ = ["GaugeWindow", "HistogramWindow", "ServerWindow", "counter_increase", "histogram_increase",
           "histogram_quantile", "live_increase", "server_window"]

QUANTILES = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))


@dataclass(frozen=True, slots=True)
class GaugeWindow:
    mean: float
    max: float


@dataclass(frozen=True, slots=True)
class HistogramWindow:
    """A server-side latency distribution over the window, in seconds (None: nothing observed)."""

    count: float
    mean: float | None
    """Δsum / Δcount: exact."""
    p50: float | None
    """The percentile as a number where its bucket locates it (`observe.buckets`), else None."""
    p90: float | None
    p99: float | None
    quantiles: dict[str, Located] = field(default_factory=dict)
    """Each percentile's bucket edges, kind and Prometheus estimate, by name (``p50``...)."""


@dataclass(frozen=True, slots=True)
class ServerWindow:
    """The server's own account of one window (a step)."""

    source: str
    samples: int
    """Scrapes that succeeded in the window."""
    gaps: int
    """Scrapes that failed in the window."""
    duration_s: float
    """From the first successful scrape to the last (0 with fewer than two)."""
    gauges: dict[str, GaugeWindow] = field(default_factory=dict)
    counters: dict[str, float] = field(default_factory=dict)
    """Increase of each normalised counter over the window."""
    rates: dict[str, float] = field(default_factory=dict)
    """Increase per second (prompt/generation tokens per second as the server counted them)."""
    prefix_cache_hit_rate: float | None = None
    speculative: SpecWindow | None = None
    """Acceptance rate and length of speculative decoding over the window (None: no drafting seen)."""
    histograms: dict[str, HistogramWindow] = field(default_factory=dict)
    live: list[str] = field(default_factory=list)
    """Counters whose increase includes the tokens of the requests still running (moves with every token)."""
    at_request_end: list[str] = field(default_factory=list)
    """Counters the server adds to only when a request ends (and no live count of them was read)."""
    moved: dict[str, int] = field(default_factory=dict)
    """For each ``at_request_end`` counter: the scrape intervals (of ``samples`` - 1) in which it moved."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def counter_increase(values: Sequence[float]) -> float:
    """The increase of a counter over successive readings; a decrease is a reset (the later value counts)."""
    total = 0.0
    for before, after in itertools.pairwise(values):
        total += after - before if after >= before else after
    return total


def live_increase(pairs: Sequence[tuple[float, float]]) -> float:
    """The increase of counter + in-progress over successive ``(counter, in_progress)`` readings: a drop of the
    counter is a reset (the later sum counts); any other drop is the two readings' skew, counted 0."""
    total = 0.0
    for (c0, g0), (c1, g1) in itertools.pairwise(pairs):
        total += c1 + g1 if c1 < c0 else max(0.0, (c1 + g1) - (c0 + g0))
    return total


def _subtract(after: Histogram, before: Histogram) -> Histogram:
    if after.count < before.count or [b for b, _ in after.buckets] != [b for b, _ in before.buckets]:
        return after  # reset (or re-bucketed by a restart): the later histogram is the increase
    buckets = tuple((le, max(0.0, a - b)) for (le, a), (_, b) in zip(after.buckets, before.buckets, strict=True))
    return Histogram(buckets=buckets, count=after.count - before.count, sum=after.sum - before.sum)


def histogram_increase(values: Sequence[Histogram]) -> Histogram | None:
    """The observations made between the first and the last of successive readings (resets handled)."""
    if not values:
        return None
    steps = [_subtract(after, before) for before, after in itertools.pairwise(values)]
    if not steps:
        return Histogram(buckets=tuple((le, 0.0) for le, _ in values[0].buckets), count=0.0, sum=0.0)
    return Histogram(buckets=merge_buckets(h.buckets for h in steps), count=sum(h.count for h in steps),
                     sum=sum(h.sum for h in steps))


def histogram_quantile(q: float, buckets: Sequence[tuple[float, float]]) -> float | None:
    """The q-quantile of cumulative ``(le, count)`` buckets, as Prometheus' histogram_quantile computes it
    (its interpolation; `observe.buckets.locate` says whether the bucket can locate it)."""
    located = locate(q, buckets)
    return None if located is None else located.estimate


def _histogram_window(h: Histogram) -> HistogramWindow:
    quantiles = {name: found for name, q in QUANTILES if (found := locate(q, h.buckets)) is not None}
    values = {name: (quantiles[name].value if name in quantiles else None) for name, _ in QUANTILES}
    return HistogramWindow(count=h.count, mean=h.sum / h.count if h.count > 0 else None, quantiles=quantiles,
                           **values)


def server_window(snapshots: Sequence[Snapshot], gaps: int = 0) -> ServerWindow:
    """Summarise the Snapshots scraped in one window (in scrape order); ``gaps``: scrapes that failed."""
    snaps = sorted(snapshots, key=lambda s: s.at_ns)
    if not snaps:
        return ServerWindow(source="none", samples=0, gaps=gaps, duration_s=0.0)
    sources = {s.source for s in snaps}
    source = snaps[-1].source if len(sources) == 1 else "mixed: " + ", ".join(sorted(sources))
    duration = (snaps[-1].at_ns - snaps[0].at_ns) / 1e9

    gauges: dict[str, GaugeWindow] = {}
    for name in dict.fromkeys(k for s in snaps for k in s.gauges):
        values = [s.gauges[name] for s in snaps if name in s.gauges]
        gauges[name] = GaugeWindow(mean=sum(values) / len(values), max=max(values))

    counters: dict[str, float] = {}
    rates: dict[str, float] = {}
    live: list[str] = []
    moved: dict[str, int] = {}
    at_end = set(snaps[-1].at_request_end)
    for name in dict.fromkeys(k for s in snaps for k in s.counters):
        series = [s.counters[name] for s in snaps if name in s.counters]
        if len(series) < 2:
            continue
        gauge = f"{name}_in_progress"
        if all(gauge in s.gauges for s in snaps if name in s.counters):
            counters[name] = live_increase([(s.counters[name], s.gauges[gauge]) for s in snaps if name in s.counters])
            live.append(name)
        else:
            counters[name] = counter_increase(series)
            if name in at_end:
                moved[name] = sum(1 for a, b in itertools.pairwise(series) if b != a)
        if duration > 0:
            rates[name] = counters[name] / duration

    hit_rate: float | None = None
    if counters.get("prefix_cache_queries", 0.0) > 0 and "prefix_cache_hits" in counters:
        hit_rate = counters["prefix_cache_hits"] / counters["prefix_cache_queries"]
    elif "prefix_cache_hit_rate" in gauges:
        hit_rate = gauges["prefix_cache_hit_rate"].mean

    histograms: dict[str, HistogramWindow] = {}
    for name in dict.fromkeys(k for s in snaps for k in s.histograms):
        series_h = [s.histograms[name] for s in snaps if name in s.histograms]
        if len(series_h) < 2:
            continue
        increase = histogram_increase(series_h)
        if increase is not None:
            histograms[name] = _histogram_window(increase)

    return ServerWindow(source=source, samples=len(snaps), gaps=gaps, duration_s=duration, gauges=gauges,
                        counters=counters, rates=rates, prefix_cache_hit_rate=hit_rate,
                        speculative=spec_window(counters, gauges), histograms=histograms,
                        live=live, at_request_end=list(moved), moved=moved)
