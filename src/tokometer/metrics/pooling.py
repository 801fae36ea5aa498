"""A load's trials (``bench --repeat``) pooled into one point: what the knee and the Pareto front judge. Pure.

One trial: its summary's own figures (``output_throughput_tok_s``, ``decode_speed_tok_s.p50``, ``ttft_ms.p50``).
Several: throughput = all their output tokens / all their time (``sum(throughput × duration) / sum(duration)``),
decode speed p50 and TTFT p50 = the medians over all their measured requests that completed
(`tokometer.metrics.request`)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from tokometer.metrics import request as m
from tokometer.metrics.summary import StepSummary
from tokometer.records import RequestRecord

__all__ = ["Pooled", "pool_trials"]


@dataclass(frozen=True, slots=True)
class Pooled:
    """A load's pooled figures; None where its trials do not give one."""

    throughput: float | None
    """Output tok/s of all requests."""
    decode_p50: float | None
    """Decode tok/s of one request, p50."""
    ttft_p50_ms: float | None


def pool_trials(summaries: Sequence[StepSummary], records: Sequence[RequestRecord]) -> Pooled:
    """The load of these trials' ``summaries`` (finished trials only) and their ``records`` (warm-up and unsent
    requests are left out here, as a summary leaves them out)."""
    if not summaries:
        return Pooled(None, None, None)
    if len(summaries) == 1:
        (summary,) = summaries
        return Pooled(summary.output_throughput_tok_s, summary.decode_speed_tok_s.p50, summary.ttft_ms.p50)
    time = sum(s.duration_s for s in summaries)
    tokens = sum(s.output_throughput_tok_s * s.duration_s for s in summaries)
    pooled = [r for r in records if not r.warmup and r.sent_ns and r.ok]
    speeds = [v for v in map(m.decode_speed_tok_s, pooled) if v is not None]
    ttfts = [v / 1e6 for v in map(m.ttft_ns, pooled) if v is not None]
    return Pooled(tokens / time if time > 0 else None, statistics.median(speeds) if speeds else None,
                  statistics.median(ttfts) if ttfts else None)
