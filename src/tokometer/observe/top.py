"""What ``tokometer top`` shows: a running server's last few seconds, from its scrapes and GPU readings. Pure.

`top_view` turns the `Snapshot` s and `GpuSample` s of a sliding window (the last ``window_s``
seconds before ``now_ns``) into the numbers on the screen:

- **now**: the gauges of the newest scrape in the window (requests running and waiting, KV-cache use);
- **over the window**: what `observe.server_window.server_window` makes of the window's scrapes: the
  server's token and request rates (counter increases over the time between the first and the last
  scrape), preemptions (their increase), and TTFT, ITL/TPOT, queue and end-to-end percentiles from
  the histogram buckets that filled in the window (each a number, a range or a bound by
  `observe.buckets`' rule);
- **history**: one value per scrape (gauges) or per pair of successive scrapes (tokens per second),
  for the sparklines;
- **how the output tokens were counted** (``output_counted``): ``live`` where the count moves with
  every token (vLLM; llama.cpp through its ``/slots``: ``output_in_progress``), ``at request end``
  where the server adds a request's tokens only when it ends (llama.cpp without ``/slots``, TGI, the gateway, the
  simulator). Then the rate between two scrapes is one request's tokens or nothing, so no per-scrape
  maximum is given, and a window in which fewer than `MIN_ENDS` requests ended while requests ran
  (the server's count of finished requests; where it has none, the scrape intervals in which the
  token count moved, a lower bound) is **too short** for a rate (``output_too_short``);
- **GPUs**: per GPU its newest reading, `observe.gpu_window.summarize_gpus` over the window, and the
  history of utilisation, memory use and power.

A scrape that failed after the newest answer makes ``no_answer_s``: the seconds since that answer
(or since the view started, when none ever came).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tokometer.observe.buckets import Located
from tokometer.observe.gpu_window import GpuWindow, summarize_gpus
from tokometer.observe.sampler import Gap
from tokometer.observe.server_window import ServerWindow, live_increase, server_window
from tokometer.observe.snapshot import GpuSample, Snapshot
from tokometer.observe.vocabulary import SIM_INFO

__all__ = ["LATENCIES", "MIN_ENDS", "GpuView", "TopView", "top_view"]

MIN_ENDS = 4
"""A counter added to at request ends gives a rate over a window only where at least this many requests ended
in it: each end is one request's tokens at once, so with k ends the rate is uncertain by about 1/k."""

LATENCIES = (("ttft", "TTFT"), ("tpot", "ITL/TPOT"), ("queue", "queue"), ("e2e", "end to end"))
"""The normalised histograms shown, with their labels, in the order shown."""

_SIM_NAMES = re.compile(re.escape(SIM_INFO) + r'\{[^}]*metrics_names="([^"]*)"')


@dataclass(frozen=True, slots=True)
class GpuView:
    """One GPU on the screen: its newest reading, its window, its history (oldest first)."""

    latest: GpuSample
    window: GpuWindow
    utilization_history: tuple[float, ...] = ()
    """0..1 per reading."""
    memory_history: tuple[float, ...] = ()
    """Bytes used per reading."""
    power_history: tuple[float, ...] = ()
    """Watts per reading."""

    def to_json(self) -> dict[str, Any]:
        s = self.latest
        return {
            "index": s.index, "name": s.name, "source": s.source,
            "now": {"utilization": s.utilization, "memory_used_bytes": s.memory_used_bytes,
                    "memory_total_bytes": s.memory_total_bytes, "power_w": s.power_w,
                    "power_limit_w": s.power_limit_w, "temperature_c": s.temperature_c,
                    "sm_clock_mhz": s.sm_clock_mhz, "throttle": list(s.throttle)},
            "window": self.window.to_json(),
            "history": {"utilization": list(self.utilization_history), "memory_used_bytes": list(self.memory_history),
                        "power_w": list(self.power_history)},
        }


@dataclass(frozen=True, slots=True)
class TopView:
    """Everything one frame of ``tokometer top`` shows (None: the server does not export it, or no data yet)."""

    metrics_url: str
    window_s: float
    """The window asked for (``--window``)."""
    server: ServerWindow
    """`server_window` of the scrapes in the window (its ``duration_s`` is the span they cover)."""
    source: str
    """The engine recognised (``vllm``, ``sglang``, ...; ``tokometer-sim (vllm names)``; ``unknown``)."""
    running: float | None = None
    waiting: float | None = None
    kv_cache_usage: float | None = None
    """0..1."""
    output_tok_s: float | None = None
    prompt_tok_s: float | None = None
    requests_s: float | None = None
    """Requests finished per second."""
    preemptions: float | None = None
    """Preemptions in the window."""
    prefix_cache_hit_rate: float | None = None
    running_history: tuple[float, ...] = ()
    waiting_history: tuple[float, ...] = ()
    kv_history: tuple[float, ...] = ()
    output_tok_s_history: tuple[float, ...] = ()
    """Output tokens per second between each pair of successive scrapes."""
    output_counted: str = ""
    """``live`` (the count moves with every token), ``at request end``, or empty (no output counter)."""
    output_in_progress: bool = False
    """The count includes the tokens of the requests still running (llama.cpp's ``/slots``)."""
    output_moved: int | None = None
    """With ``at request end``: the scrape intervals in the window in which the count moved."""
    output_request_ends: float | None = None
    """With ``at request end``: requests that ended in the window (the server's count, else ``output_moved``)."""
    output_too_short: bool = False
    """The count is added to at request ends, and fewer than `MIN_ENDS` ended in the window while requests ran."""
    raw_samples: int = 0
    """Samples of the newest scrape."""
    raw: dict[str, float] = field(default_factory=dict)
    """An unknown engine's samples (of the newest scrape), kept raw; empty for an engine tokometer knows."""
    no_answer_s: float | None = None
    """Seconds without an answer, when the newest scrape failed."""
    no_answer_reason: str = ""
    gpus: tuple[GpuView, ...] = field(default_factory=tuple)

    def latency_ms(self, name: str) -> dict[str, Any] | None:
        """``{"p50", "p90", "p99", "mean", "count", "quantiles"}`` of a normalised histogram over the window, in
        ms: a percentile is a number only where its bucket locates it (`observe.buckets`), else None, and
        ``quantiles`` holds each one's bucket edges, kind and Prometheus estimate."""
        h = self.server.histograms.get(name)
        if h is None:
            return None
        return {"p50": _ms(h.p50), "p90": _ms(h.p90), "p99": _ms(h.p99), "mean": _ms(h.mean), "count": h.count,
                "quantiles": {k: v.scaled(1e3).to_json() for k, v in h.quantiles.items()}}

    def located_ms(self, name: str, quantile: str) -> Located | None:
        """Percentile ``quantile`` (``p50``...) of histogram ``name`` over the window, in ms, with its bucket."""
        h = self.server.histograms.get(name)
        found = h.quantiles.get(quantile) if h is not None else None
        return None if found is None else found.scaled(1e3)

    def to_json(self) -> dict[str, Any]:
        return {
            "metrics_url": self.metrics_url, "source": self.source, "window_s": self.window_s,
            "duration_s": self.server.duration_s, "samples": self.server.samples, "gaps": self.server.gaps,
            "no_answer_s": self.no_answer_s, "no_answer_reason": self.no_answer_reason or None,
            "requests_running": self.running, "requests_waiting": self.waiting, "kv_cache_usage": self.kv_cache_usage,
            "output_tok_s": self.output_tok_s, "output_counted": self.output_counted or None,
            "output_in_progress": self.output_in_progress,
            "output_moved": self.output_moved, "output_request_ends": self.output_request_ends,
            "output_too_short": self.output_too_short,
            "prompt_tok_s": self.prompt_tok_s, "requests_s": self.requests_s,
            "preemptions": self.preemptions, "prefix_cache_hit_rate": self.prefix_cache_hit_rate,
            "speculative": self.server.speculative.to_json() if self.server.speculative is not None else None,
            "latency_ms": {name: self.latency_ms(name) for name, _ in LATENCIES},
            "history": {"requests_running": list(self.running_history), "requests_waiting": list(self.waiting_history),
                        "kv_cache_usage": list(self.kv_history), "output_tok_s": list(self.output_tok_s_history)},
            "raw_samples": self.raw_samples, "raw": dict(self.raw),
            "gpus": [g.to_json() for g in self.gpus],
            "server": self.server.to_json(),
        }


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1e3


def _source(snap: Snapshot) -> str:
    if snap.source != "tokometer-sim":
        return snap.source
    for key in snap.raw:
        match = _SIM_NAMES.match(key)
        if match:
            return f"tokometer-sim ({match.group(1)} names)"
    return snap.source


def _rate_history(snaps: Sequence[Snapshot], counter: str, live: bool) -> tuple[float, ...]:
    out = []
    gauge = f"{counter}_in_progress"
    for before, after in itertools.pairwise(s for s in snaps if counter in s.counters):
        seconds = (after.at_ns - before.at_ns) / 1e9
        if seconds <= 0:
            continue
        a, b = before.counters[counter], after.counters[counter]
        if live:
            increase = live_increase([(a, before.gauges[gauge]), (b, after.gauges[gauge])])
        else:
            increase = b - a if b >= a else b  # a drop is a reset: the new value is the increase
        out.append(increase / seconds)
    return tuple(out)


def _gpu_views(samples: Sequence[GpuSample], start_ns: int, now_ns: int) -> tuple[GpuView, ...]:
    inside = sorted((s for s in samples if start_ns <= s.at_ns <= now_ns), key=lambda s: s.at_ns)
    summary = summarize_gpus(inside)
    views = []
    for window in summary.gpus:
        own = [s for s in inside if s.index == window.index and s.source == window.source]
        views.append(GpuView(
            latest=own[-1], window=window,
            utilization_history=tuple(s.utilization for s in own if s.utilization is not None),
            memory_history=tuple(s.memory_used_bytes for s in own if s.memory_used_bytes is not None),
            power_history=tuple(s.power_w for s in own if s.power_w is not None)))
    return tuple(views)


def top_view(metrics_url: str, snapshots: Sequence[Snapshot], gpu_samples: Sequence[GpuSample], gaps: Sequence[Gap],
             *, now_ns: int, window_s: float, started_ns: int | None = None) -> TopView:
    """The frame at ``now_ns`` over the last ``window_s`` seconds (readings after ``now_ns`` are left out).

    ``gaps``: the readings that failed (the sampler's); ``started_ns``: when the view started, for
    "no answer" before any scrape succeeded.
    """
    start_ns = now_ns - int(window_s * 1e9)
    snaps = sorted((s for s in snapshots if start_ns <= s.at_ns <= now_ns), key=lambda s: s.at_ns)
    server_gaps = [g for g in gaps if g.source == "server" and g.at_ns <= now_ns]
    window = server_window(snaps, sum(1 for g in server_gaps if g.at_ns >= start_ns))
    answered = [s.at_ns for s in snapshots if s.at_ns <= now_ns]
    last_answer = max(answered, default=started_ns)
    no_answer_s: float | None = None
    reason = ""
    if server_gaps and (last_answer is None or server_gaps[-1].at_ns > last_answer):
        no_answer_s = (now_ns - last_answer) / 1e9 if last_answer is not None else None
        reason = server_gaps[-1].reason
    gpus = _gpu_views(gpu_samples, start_ns, now_ns)
    if not snaps:
        return TopView(metrics_url=metrics_url, window_s=window_s, server=window, source="none",
                       no_answer_s=no_answer_s, no_answer_reason=reason, gpus=gpus)
    newest = snaps[-1]

    def history(name: str) -> tuple[float, ...]:
        return tuple(s.gauges[name] for s in snaps if name in s.gauges)

    live = "generation_tokens" in window.live
    counted = "" if "generation_tokens" not in window.counters else \
        "at request end" if "generation_tokens" in window.at_request_end else "live"
    moved = window.moved.get("generation_tokens") if counted == "at request end" else None
    # request ends in the window: the server's count of finished requests, else the intervals the count moved in
    ends = window.counters.get("requests_finished", moved) if moved is not None else None
    busy = any(s.gauges.get("requests_running", 0) > 0 for s in snaps)
    too_short = ends is not None and ends < MIN_ENDS and busy

    return TopView(
        metrics_url=metrics_url, window_s=window_s, server=window, source=_source(newest),
        running=newest.gauges.get("requests_running"), waiting=newest.gauges.get("requests_waiting"),
        kv_cache_usage=newest.gauges.get("kv_cache_usage"),
        output_tok_s=window.rates.get("generation_tokens"), prompt_tok_s=window.rates.get("prompt_tokens"),
        requests_s=window.rates.get("requests_finished"), preemptions=window.counters.get("preemptions"),
        prefix_cache_hit_rate=window.prefix_cache_hit_rate,
        running_history=history("requests_running"), waiting_history=history("requests_waiting"),
        kv_history=history("kv_cache_usage"), output_tok_s_history=_rate_history(snaps, "generation_tokens", live),
        output_counted=counted, output_in_progress=live, output_moved=moved, output_request_ends=ends,
        output_too_short=too_short,
        raw_samples=len(newest.raw), raw=dict(newest.raw) if newest.source == "unknown" else {},
        no_answer_s=no_answer_s, no_answer_reason=reason, gpus=gpus)
