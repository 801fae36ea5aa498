"""An estimate's track record: how far the estimate has been from published figures of cases like the one asked.

`tokometer.perf.published` keeps published serving figures in two splits: the fit split, on which the typical
efficiencies were chosen, and the held-out split, typed in and checked with nothing chosen on it
(docs/reference/published-figures.md). An estimate at the typical efficiencies carries their record beside its
numbers (`track_record`), so that a reader knows how far to trust them before measuring:

    its kind          the held-out figures of the same kind (`published.case_kind`): at maximum load the
                      deployment's kind (a mixture of experts, NVFP4 on Blackwell, dense over 4-8 GPUs or on
                      1-2), and at a fixed concurrency (the batch rows: a closed loop of users) the fixed
                      concurrencies' of a dense model or of a mixture of experts, as the deployment's is: how
                      many within ±15 % (`published.HELD_OUT_AIM`), the median |error|
    this deployment   the figures of the same model, hardware, TP × PP, weight and KV formats and expert layout,
                      from either split (said which: the fit split's are close by construction), at maximum load
                      and at fixed concurrencies alike: how many, how many within ±15 %, the median error with its
                      sign (+: the estimate was the faster), and where the deployment is a known miss its likely
                      reason (`published.known_miss`)

None at given or calibrated efficiencies (the record is the typical ones') and on hardware that is not a GPU (no
published figure ran on a CPU host). The record says how the estimate has done on such cases, not how it will do on
this one: a case of a kind can miss by more than its kind's median.
"""

from __future__ import annotations

import functools
import statistics
from dataclasses import dataclass
from typing import Any

from tokometer.perf.published import (
    HELD_OUT_AIM,
    PublishedFigure,
    case_kind,
    compare_published,
    figure_kind,
    known_miss,
    published_figures,
)
from tokometer.perf.quant import normalize_dtype
from tokometer.perf.roofline import Deployment

__all__ = ["FEW_USERS", "Record", "TrackRecord", "track_record"]

FEW_USERS = 5
"""The most users a copy a fixed concurrency's figure may have to count in `TrackRecord.few_users`."""


@dataclass(frozen=True)
class Record:
    """The errors of the estimate on a set of published figures (expected / published − 1, each)."""

    scope: str
    """A kind (``mixture of experts``, ``fixed concurrency``, …) or a deployment (``qwen3-30b-a3b B200 TP1
    nvfp4``)."""
    split: str
    """Where the figures are: ``held-out``, ``fit`` or ``fit and held-out``."""
    errors: tuple[float, ...]
    reason: str | None = None
    """Why the deployment misses, where it is a known miss (`published.known_miss`)."""

    def __post_init__(self) -> None:
        if not self.errors:  # every kind has held-out figures in the packaged table (its test checks)
            raise ValueError(f"a record of {self.scope} needs at least one figure")

    @property
    def figures(self) -> int:
        return len(self.errors)

    @property
    def within(self) -> int:
        """Figures within ±15 % (`HELD_OUT_AIM`)."""
        return sum(abs(e) <= HELD_OUT_AIM for e in self.errors)

    @property
    def median_error(self) -> float:
        """The median error with its sign: + the estimate faster than published."""
        return statistics.median(self.errors)

    @property
    def median_abs_error(self) -> float:
        return statistics.median(abs(e) for e in self.errors)

    def to_json(self) -> dict[str, Any]:
        return {"scope": self.scope, "split": self.split, "figures": self.figures, "within_aim": self.within,
                "aim": HELD_OUT_AIM, "median_error": self.median_error, "median_abs_error": self.median_abs_error,
                "known_miss": self.reason}


@dataclass(frozen=True)
class TrackRecord:
    """The estimate's record on the kind of the deployment asked about, and on the deployment itself."""

    kind: Record
    """Held-out figures at maximum load of the deployment's kind."""
    fixed_concurrency: Record
    """Held-out figures at a fixed concurrency (what the batch rows are)."""
    few_users: Record
    """Of `fixed_concurrency`'s figures, those of at most `FEW_USERS` users a copy."""
    deployment: Record | None
    """The deployment's own figures (None: none published)."""

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind.to_json(), "fixed_concurrency": self.fixed_concurrency.to_json(),
                "few_users": self.few_users.to_json(),
                "deployment": self.deployment.to_json() if self.deployment else None,
                "source": "tokometer.perf.published (docs/reference/published-figures.md)"}


def track_record(d: Deployment, efficiency_source: str = "typical") -> TrackRecord | None:
    """The record of the estimate for ``d`` (module docstring); None unless the efficiencies are the typical ones
    and the hardware is a GPU."""
    if efficiency_source != "typical" or d.hardware.kind != "gpu":
        return None
    kind = case_kind(d.model.is_moe, normalize_dtype(d.weight_dtype), d.tp * d.pp, False)
    loops = case_kind(d.model.is_moe, "", 1, True)
    return TrackRecord(_kind_record(kind), _kind_record(loops), _kind_record(loops, FEW_USERS),
                       _deployment_record(d))


@functools.cache
def _kind_record(kind: str, most_users: int | None = None) -> Record:
    """The held-out figures of ``kind``; with ``most_users``, only those of at most that many users a copy."""
    figures = [f for f in published_figures("held-out") if figure_kind(f) == kind
               and (most_users is None or (f.concurrency or 0) // f.replicas <= most_users)]
    scope = kind if most_users is None else f"{kind} at 1-{most_users} users"
    return Record(scope, "held-out", tuple(c.error for c in compare_published(figures=figures)))


def _deployment_record(d: Deployment) -> Record | None:
    same = [f for f in published_figures() if _same_deployment(f, d)]
    if not same:
        return None
    splits = sorted({f.split for f in same})
    reasons = list(dict.fromkeys(r for f in same if (r := known_miss(f))))
    first = same[0]
    scope = f"{first.model} {first.hardware} {first.layout.split(' × ')[-1]} {first.weight_dtype}"
    return Record(scope, " and ".join(splits), tuple(c.error for c in compare_published(figures=same)),
                  "; ".join(reasons) or None)


def _same_deployment(f: PublishedFigure, d: Deployment) -> bool:
    """``f`` ran one copy of ``d``: the same model and hardware rows, TP × PP, formats and expert layout."""
    if (f.tp, f.pp, f.expert_parallel, f.attention_dp) != (d.tp, d.pp, d.expert_parallel, d.attention_dp):
        return False
    if normalize_dtype(f.weight_dtype) != normalize_dtype(d.weight_dtype) or f.kv_dtype != d.kv_dtype:
        return False
    theirs = f.deployment()  # the same rows, not the same names: a hardware file's own "B200" is another GPU
    return theirs.hardware == d.hardware and theirs.model == d.model
