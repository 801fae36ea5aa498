"""One metric of a tune's variant against its baseline, in the tune's words: `MetricVerdict`, `Word`, `WORDS`.

``compare``'s verdicts (`tokometer.compare.gate`) become the tune's words: an improvement is ``better``, a
regression ``worse``, "no change" and "within threshold" are ``no change``, "cannot tell" is ``cannot decide``.
A verdict also carries the noise floor it was judged against (`tokometer.tune.noise`) and ``compare``'s own word.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from tokometer.compare.gate import MetricComparison

__all__ = ["WORDS", "MetricVerdict", "Word", "word_of"]

Word = Literal["better", "worse", "no change", "cannot decide"]
WORDS: Mapping[str, Word] = {"improvement": "better", "regression": "worse", "no change": "no change",
                             "within threshold": "no change", "cannot tell": "cannot decide"}
"""``compare``'s verdicts in the tune's words."""


def word_of(verdict: str) -> Word:
    """The tune's word for one of ``compare``'s verdicts."""
    return WORDS[verdict]


@dataclass(frozen=True)
class MetricVerdict:
    """One metric of a variant against the baseline (or of one variant against another)."""

    key: str
    """``compare``'s name: ``output_throughput``, ``ttft_p99``..."""
    label: str
    unit: str
    higher_is_better: bool
    word: Word
    base: float | None
    new: float | None
    change: float | None
    """Relative (0.1 = +10 %); for the error rate in points of requests."""
    interval: tuple[float, float] | None
    """The 95 % interval of the change (bootstrap)."""
    relative: bool = True
    reason: str | None = None
    floor: float | None = None
    """The tune's noise floor for this metric (`tokometer.tune.noise`), where it was applied."""
    compare_word: Word | None = None
    """``compare``'s own word before the noise floor was applied (None where it was not)."""

    @classmethod
    def of(cls, x: MetricComparison) -> MetricVerdict:
        interval = (x.ci_low, x.ci_high) if x.ci_low is not None and x.ci_high is not None else None
        return cls(x.key, x.label, x.unit, x.higher_is_better, word_of(x.verdict), x.base, x.new, x.change,
                   interval, x.relative, x.reason)

    def to_json(self) -> dict[str, Any]:
        return {"verdict": self.word, "change": self.change, "change_kind": "relative" if self.relative else "points",
                "interval": list(self.interval) if self.interval else None, "base": self.base, "new": self.new,
                "label": self.label, "unit": self.unit, "higher_is_better": self.higher_is_better,
                "reason": self.reason, "floor": self.floor, "compare_verdict": self.compare_word}
