"""A tune's noise floor: how far the baseline moved between its two runs, and the rule that keeps a tune from
calling that noise a change.

Every tune runs the baseline first and again after the last variant (A, B, C, A: `TuneRecord.baseline_again`).
The two runs have the same settings, the same workload and the same seed, so whatever differs between them is
noise: the machine's (other processes, caches, clock speed, heat) and the requests' own spread. The baseline's
second run is compared with its first as ``compare`` compares two runs, load by load; for each metric the
**floor** (`floor_of`) is the end of that comparison's 95 % interval farthest from zero (the change itself where
there is no interval): the largest move the baseline's own repeat cannot rule out.

**The rule** (`apply_floor`): a variant is ``better`` or ``worse`` than the baseline on a metric only when
``compare`` says so *and* the whole 95 % interval of its change lies beyond the floor, on the same side (every
value in it farther from zero than the floor). Otherwise it is ``cannot decide``, saying why. Where there is no
floor (the baseline's second run failed or has not run yet, or the metric could not be compared between the
two), no variant is called better or worse on that metric. ``no change`` and ``cannot decide`` stand as
``compare`` said them.

Memory has one reading per run and no interval: its floor is the relative difference of the baseline's two
readings, and two readings closer than that (or than `MEMORY_TIE`, whichever is larger) are not told apart.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tokometer.tune.verdicts import MetricVerdict

__all__ = ["MEMORY_TIE", "NO_FLOOR", "NoiseFloor", "apply_floor", "apply_floors", "floor_of", "memory_tie"]

MEMORY_TIE = 0.05
"""Two memory readings closer than this (5 % of the lower) are never told apart, whatever the floor."""
NO_FLOOR = "no noise floor: the baseline's second run is missing"
"""Why nothing is called better or worse without a floor (followed by the detail)."""


def floor_of(drift: MetricVerdict) -> float | None:
    """The floor of one metric: the end of the interval of the baseline's second run against its first that is
    farthest from zero, or the size of its change where there is no interval; None when neither was measured."""
    if drift.interval is not None:
        return max(abs(drift.interval[0]), abs(drift.interval[1]))
    return abs(drift.change) if drift.change is not None else None


def _beyond(x: MetricVerdict, floor: float) -> bool:
    """Whether the whole interval of ``x``'s change (or the change, without one) lies beyond ``floor``."""
    low, high = x.interval if x.interval is not None else (x.change, x.change)
    if low is None or high is None:
        return False
    return low > floor or high < -floor


def _shown(x: MetricVerdict, value: float) -> str:
    return f"{100 * value:.1f}{' %' if x.relative else ' pt'}"


def apply_floor(x: MetricVerdict, drift: MetricVerdict | None, why_none: str = NO_FLOOR) -> MetricVerdict:
    """``x`` (a variant against the baseline) judged by the rule of the module docstring against ``drift`` (the
    baseline's second run against its first, on the same metric at the same load); ``why_none``: why there is no
    drift, when there is none. The result carries the floor and ``compare``'s own word."""
    floor = floor_of(drift) if drift is not None else None
    judged = dataclasses.replace(x, floor=floor, compare_word=x.word)
    if x.word not in ("better", "worse"):
        return judged
    if floor is None:
        reason = why_none if drift is None else f"no noise floor: {drift.reason or 'the drift was not measured'}"
        return dataclasses.replace(judged, word="cannot decide", reason=reason)
    if _beyond(x, floor):
        return judged
    return dataclasses.replace(judged, word="cannot decide", reason=(
        f"compare says {x.word}, but its interval reaches within the baseline's own drift between its two runs "
        f"(±{_shown(x, floor)})"))


def apply_floors(verdicts: Mapping[str, MetricVerdict], drift: Mapping[str, MetricVerdict] | None,
                 why_none: str = NO_FLOOR) -> dict[str, MetricVerdict]:
    """`apply_floor` to each metric of ``verdicts``, against the drift of the same metric."""
    return {key: apply_floor(x, (drift or {}).get(key), why_none) for key, x in verdicts.items()}


def memory_tie(first: float | None, again: float | None) -> float:
    """How close two memory readings must be to be told apart: the baseline's two readings' relative difference,
    at least `MEMORY_TIE`."""
    if first is None or again is None or min(first, again) <= 0:
        return MEMORY_TIE
    return max(MEMORY_TIE, abs(again - first) / min(first, again))


@dataclass(frozen=True)
class NoiseFloor:
    """The baseline's second run against its first: the drift of each metric at the headline load, and every
    shared load's; or why there is none."""

    run_id: int | None
    status: str
    """The second run's status (``finished``, ``failed to start``...), or ``not run``."""
    headline: Mapping[str, MetricVerdict]
    """Metric → the second run against the first at the baseline's headline load (empty: no floor)."""
    loads: Mapping[str, Mapping[str, MetricVerdict]]
    """Load (``c=4``) → metric → the same, at each load both runs ran."""
    memory: tuple[float | None, float | None] = (None, None)
    """The two runs' peak memory readings (bytes)."""
    note: str = ""
    """Why there is no floor, when there is none."""

    @property
    def measured(self) -> bool:
        return bool(self.headline)

    @property
    def why_none(self) -> str:
        return f"no noise floor: {self.note}" if self.note else NO_FLOOR

    def to_json(self) -> dict[str, Any]:
        def rows(verdicts: Mapping[str, MetricVerdict]) -> dict[str, Any]:
            return {key: {"drift": x.change, "interval": list(x.interval) if x.interval else None,
                          "floor": floor_of(x), "first": x.base, "again": x.new, "change_kind":
                          "relative" if x.relative else "points", "compare_verdict": x.word} for key, x in
                    verdicts.items()}

        return {"run_id": self.run_id, "status": self.status, "measured": self.measured, "note": self.note or None,
                "metrics": rows(self.headline), "loads": {load: rows(v) for load, v in self.loads.items()},
                "memory_bytes": list(self.memory), "memory_tie": memory_tie(*self.memory)}
