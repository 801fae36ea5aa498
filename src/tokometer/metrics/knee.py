"""The knee of a sweep: the load that gives the most throughput for the least delay.

A sweep trades per-request speed for aggregate throughput: each step of more concurrency (or a higher
rate) makes the server produce more tokens per second in all while each request decodes more slowly.
Where to stop is a judgement; tokometer makes it with Kleinrock's **power** (L. Kleinrock, "Power and
deterministic rules of thumb for probabilistic problems in computer communications", ICC 1979): the
throughput of a system divided by the delay it imposes, which rises while added load buys throughput
cheaply and falls once it mostly buys waiting. Here, per load::

    power = output throughput (tok/s, all requests) × decode speed p50 (tok/s, one request)

which is throughput / TPOT (decode speed = 1 / TPOT per request; the median of 1 / TPOT equals
1 / the median TPOT up to interpolation between the two middle requests), in tokens per second
squared. **The knee is the step with the largest power**; on the "rate vs throughput" chart (x:
output throughput, y: decode speed p50) it is the point with the largest x × y, the point that
touches the highest hyperbola x·y = constant. A tie goes to the lighter load (the earlier one). A
load without both numbers (nothing completed, no token after the first) has no power and is never
the knee. The knee is a trade-off between loads, so it is over loads: the trials of one load
(``bench --repeat``) are one candidate, pooled (`tokometer.report.data`), and fewer than two loads
with a power have no knee (a run of one load, however many trials, has none).

For a load of one trial both numbers are read from its step's `StepSummary` (``output_throughput_tok_s`` and
``decode_speed_tok_s.p50``), so the knee is found from exactly the figures a
report plots.
Definition also in docs/reference/metrics.md ("The knee of a sweep").
"""

from __future__ import annotations

from collections.abc import Sequence

from tokometer.metrics.summary import StepSummary

__all__ = ["knee", "power", "summary_power"]


def power(output_throughput_tok_s: float | None, decode_speed_tok_s: float | None) -> float | None:
    """Kleinrock's power of one step: aggregate output tok/s × per-request decode tok/s (None without both)."""
    if not output_throughput_tok_s or not decode_speed_tok_s:
        return None
    if output_throughput_tok_s < 0 or decode_speed_tok_s < 0:
        return None
    return output_throughput_tok_s * decode_speed_tok_s


def summary_power(summary: StepSummary | None) -> float | None:
    """`power` of a step from its summary; None for a step with no summary."""
    if summary is None:
        return None
    return power(summary.output_throughput_tok_s, summary.decode_speed_tok_s.p50)


def knee(powers: Sequence[float | None]) -> int | None:
    """The index of the largest of the loads' powers (the first of equal ones); None when fewer than two loads
    have one (no trade-off to judge)."""
    if sum(value is not None for value in powers) < 2:
        return None
    best: int | None = None
    for index, value in enumerate(powers):
        if value is not None and (best is None or value > (powers[best] or 0.0)):
            best = index
    return best
