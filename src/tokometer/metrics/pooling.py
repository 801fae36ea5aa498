"""A load's trials (``bench --repeat``) pooled into one point: what the knee and the Pareto front judge. Pure.

One trial: its stored summary's own figures (`StepSummary.to_json`: ``output_throughput_tok_s``,
``decode_speed_tok_s.p50``, ``ttft_ms.p50``). Several: throughput = all their output tokens / all their time
(``sum(throughput × duration) / sum(duration)``), decode speed p50 and TTFT p50 = the medians over all their
measured requests that completed (`tokometer.metrics.request`)."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tokometer.metrics import request as m
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


def pool_trials(summaries: Sequence[Mapping[str, Any]], records: Sequence[RequestRecord]) -> Pooled:
    """The load of these trials' ``summaries`` (finished trials only) and their ``records`` (warm-up and unsent
    requests are left out here, as a summary leaves them out)."""
    if not summaries:
        return Pooled(None, None, None)
    if len(summaries) == 1:
        (summary,) = summaries
        return Pooled(summary.get("output_throughput_tok_s"), (summary.get("decode_speed_tok_s") or {}).get("p50"),
                      (summary.get("ttft_ms") or {}).get("p50"))
    time = sum(float(s.get("duration_s") or 0.0) for s in summaries)
    tokens = sum(float(s.get("output_throughput_tok_s") or 0.0) * float(s.get("duration_s") or 0.0)
                 for s in summaries)
    pooled = [r for r in records if not r.warmup and r.sent_ns and r.ok]
    speeds = [v for v in map(m.decode_speed_tok_s, pooled) if v is not None]
    ttfts = [v / 1e6 for v in map(m.ttft_ns, pooled) if v is not None]
    return Pooled(tokens / time if time > 0 else None, statistics.median(speeds) if speeds else None,
                  statistics.median(ttfts) if ttfts else None)
