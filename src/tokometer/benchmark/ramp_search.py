"""The ramp phase of ``bench --find-max ... --search ramp``: one ramped step read slice by slice.

The search (`tokometer.benchmark.findmax`, "Ramp search") runs one step whose load rises from ``--ramp-from``
to the ``-r``/``-c`` value over ``--ramp-time`` and ends there (no hold), cut into time slices
(`tokometer.metrics.window.time_slices`; ``--time-slice``, else a tenth of the ramp). This module reads that
step's slices back as the search judges them:

- a slice's **load** is the ramp's mean target over the slice (``target``): requests a second, or for
  concurrency the whole slots open on average (at least 1);
- a slice is **judged** when at least `MIN_SLICE_REQUESTS` measured requests were sent in it; fewer (the first
  seconds of a slow ramp, the tail after the last send) are left out;
- the slice **as a summary** (`as_summary`) carries what the objectives and the overload tests read: its
  latency distributions, completed and failed requests, goodput over its length, and the overload tests of
  the requests sent in it (`tokometer.metrics.overload`), so that `findmax.judge` judges a slice as it
  judges a steady probe (without the order-statistics doubt: the slice is a pointer, the steady probe that
  follows is the verdict).

What a slice can and cannot tell: its requests were sent at its load, but each met the queue the earlier
slices left behind. Below capacity no queue builds, so a slice that misses there misses on its own. Above
capacity the queue grows from the moment the ramp passed it, and a latency objective breaks only once the
wait has grown past its limit: the first failing slice comes late, at a load above the limit, and the last good
one may be above it too; and near capacity, where the queue is short but not empty, a slice can miss a little
below it. So the ramp gives a candidate and an upper bracket, never an answer; the answer is always a steady
probe that met, and the bracket's top is confirmed by a steady probe at its load when the search has probes left
(`tokometer.benchmark.findmax.next_confirm`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from tokometer.load.ramp import Ramp
from tokometer.metrics.summary import StepSummary
from tokometer.util.limits import MIN_SLICE_S

__all__ = ["MAX_CONFIRMS", "MIN_SLICE_REQUESTS", "SLICES", "RampSlice", "as_summary", "ramp_slices", "slice_width"]

SLICES = 10
"""Slices over the ramp when ``--time-slice`` is not given."""
MIN_SLICE_REQUESTS = 8
"""A slice with fewer measured requests sent in it is not judged (the overload tests need as many)."""
MAX_CONFIRMS = 3
"""Steady probes after the ramp, at most."""


@dataclass(frozen=True)
class RampSlice:
    """One judged slice of the ramp step."""

    index: int
    start_s: float
    end_s: float
    load: float
    requests: int
    summary: StepSummary


def slice_width(ramp_time_s: float, time_slice_s: float | None) -> float:
    """The slices the ramp step is cut into: ``--time-slice``, else a tenth of the ramp, and never under
    `tokometer.util.limits.MIN_SLICE_S` (a ramp of under 10 ms has slices of that)."""
    return time_slice_s if time_slice_s is not None else max(MIN_SLICE_S, ramp_time_s / SLICES)


def as_summary(entry: Mapping[str, Any]) -> StepSummary:
    """A time slice (`tokometer.metrics.window.window_summary`) as the step summary of its own requests."""
    length = float(entry["end_s"]) - float(entry["start_s"])
    return StepSummary.from_json({
        "requests_completed": entry.get("completed", 0), "requests_failed": entry.get("failed", 0),
        "duration_s": length, "goodput_rps": entry.get("goodput_rps"), "send_rate_rps": entry.get("send_rate_rps"),
        "ttft_ms": entry.get("ttft_ms"), "tpot_ms": entry.get("tpot_ms"), "itl_ms": entry.get("itl_ms"),
        "e2e_ms": entry.get("e2e_ms"), "overload": entry.get("overload"),
    })


def _load(target: float, kind: Literal["rate", "concurrency"]) -> float:
    return round(target, 3) if kind == "rate" else float(max(1, math.floor(target + 1e-9)))


def ramp_slices(time_slices: Mapping[str, Any] | None, ramp: Ramp,
                kind: Literal["rate", "concurrency"]) -> list[RampSlice]:
    """The judged slices of a ramp step's ``time_slices``, in time order (see the module docstring)."""
    out = []
    for entry in (time_slices or {}).get("slices") or []:
        if int(entry.get("requests") or 0) < MIN_SLICE_REQUESTS or entry.get("target") is None:
            continue
        if float(entry["start_s"]) >= ramp.duration_s:
            continue
        out.append(RampSlice(int(entry["index"]), float(entry["start_s"]), float(entry["end_s"]),
                             _load(float(entry["target"]), kind), int(entry["requests"]), as_summary(entry)))
    return out
