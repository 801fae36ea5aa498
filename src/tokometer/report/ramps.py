"""The ramp's target on the report's timeline: for each ramped step, the load it aimed at over time.

A step ramped by ``bench --ramp`` (or the ramp of ``--find-max --search ramp``) aims at a load that rises from the
ramp's start to the step's value (`tokometer.load.ramp.Ramp.at`), then holds until the step's last send. The
timeline chart draws it on a second axis (concurrency, or requests a second) against the same clock as its
requests: seconds from the run's first measured request (``t0``), the step starting at its earliest due time
(`tokometer.metrics.window.origin_ns`, warm-up included, as the ramp did)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tokometer.metrics.window import origin_ns
from tokometer.records import RequestRecord
from tokometer.store.runs import StoredStep

__all__ = ["SAMPLES", "ramp_targets"]

SAMPLES = 32
"""Points along an exponential ramp (a linear one needs only its two ends)."""


def ramp_targets(steps: Sequence[StoredStep], records: Sequence[RequestRecord], t0: int) -> list[dict[str, Any]]:
    """Per ramped step with requests: ``step`` (its position), ``unit``, ``t_s`` and ``target`` (the ramp's
    target at each time, then held to the last send)."""
    out = []
    for position, step in enumerate(steps):
        ramp = step.load.ramp if step.load is not None else None
        own = [r for r in records if r.step == step.index and r.sent_ns]
        if ramp is None or step.load is None or not own:
            continue
        start, last = origin_ns(own), max(r.sent_ns for r in own)
        points = 2 if ramp.strategy == "linear" else SAMPLES + 1
        times = [ramp.duration_s * k / (points - 1) for k in range(points)]
        hold = (last - start) / 1e9
        if hold > ramp.duration_s:
            times.append(hold)
        offset = (start - t0) / 1e9
        out.append({"step": position, "unit": "req/s" if step.load.mode == "rate" else "concurrency",
                    "t_s": [round(offset + t, 6) for t in times], "target": [round(ramp.at(t), 6) for t in times]})
    return out
