"""Speculative decoding over a window: acceptance rate and mean acceptance length, from the server's own metrics.

From the window's counter increases where the engine counts drafts (vLLM V1, `observe.vocabulary`):

- **acceptance rate** = Δaccepted tokens / Δdraft tokens (0..1): the share of drafted tokens the
  target model kept;
- **mean acceptance length** = 1 + Δaccepted tokens / Δdrafts: the tokens one sequence's step
  emits on average, the target's own ("bonus") token counted, as vLLM's documentation and
  SGLang's ``spec_accept_length`` count it; a step without drafting would emit 1;
- **per position**: Δaccepted at draft position i / Δdrafts, the chance the i-th drafted token
  survives (falling with i: a run stops at its first rejection).

Where the engine exports only gauges (SGLang's ``spec_accept_length``/``spec_accept_rate``, vLLM V0's
acceptance-rate gauge), the window's mean of each gauge is taken (each gauge is the engine's own figure
over its last logging interval, so this is an average of averages: ``source`` says which it is).

A server's numbers are data: a figure no drafting can give (more accepted than drafted tokens, a rate
outside 0..1, a length below 1 or above 1 + the tokens drafted per draft) is not believed: it is None
and ``rejected`` says why.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = ["PER_POSITION", "SpecWindow", "spec_window"]

PER_POSITION = "spec_accepted_at_"
"""The normalised prefix of the per-position accepted-token counters (`observe.vocabulary.Family.per_label`)."""


class _Mean(Protocol):
    @property
    def mean(self) -> float: ...


@dataclass(frozen=True, slots=True)
class SpecWindow:
    """The server's speculative decoding over one window; None where it does not say."""

    source: str
    """``counters`` (Δ of the engine's draft counters) or ``gauges`` (the mean of its own figures)."""
    acceptance_rate: float | None = None
    acceptance_length: float | None = None
    """Mean tokens per sequence per step, the bonus token counted (1 + accepted per draft)."""
    drafts: float | None = None
    draft_tokens: float | None = None
    accepted_tokens: float | None = None
    per_position: list[float] = field(default_factory=list)
    """Acceptance at draft position 0, 1, ... (Δaccepted there / Δdrafts)."""
    rejected: str = ""
    """The server's figures that were not believed, in words (empty: all were)."""

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "acceptance_rate": self.acceptance_rate,
                "acceptance_length": self.acceptance_length, "drafts": self.drafts,
                "draft_tokens": self.draft_tokens, "accepted_tokens": self.accepted_tokens,
                "per_position": list(self.per_position), "rejected": self.rejected}


def _ratio(num: float | None, den: float | None) -> float | None:
    return None if num is None or not den else num / den


def _per_position(counters: Mapping[str, float], drafts: float | None) -> list[float]:
    found = {int(k[len(PER_POSITION):]): v for k, v in counters.items()
             if k.startswith(PER_POSITION) and k[len(PER_POSITION):].isdigit()}
    if not drafts or not found:
        return []
    return [found.get(i, 0.0) / drafts for i in range(max(found) + 1)]


def spec_window(counters: Mapping[str, float], gauges: Mapping[str, _Mean]) -> SpecWindow | None:
    """Speculative decoding from a window's counter increases and gauge means; None: the server drafted
    nothing in the window (or exports nothing of it)."""
    accepted, drafted = counters.get("spec_accepted_tokens"), counters.get("spec_draft_tokens")
    drafts = counters.get("spec_drafts")
    if drafted:
        rate, length, why = _believed(_ratio(accepted, drafted),
                                      None if not drafts or accepted is None else 1.0 + accepted / drafts,
                                      drafted / drafts if drafts else None)
        positions = _per_position(counters, drafts)
        if any(p > 1.0 for p in positions):
            positions, why = [], why or "an acceptance per position above 1"
        return SpecWindow(source="counters", acceptance_rate=rate, acceptance_length=length, drafts=drafts,
                          draft_tokens=drafted, accepted_tokens=accepted, per_position=positions, rejected=why)
    length_g, rate_g = gauges.get("spec_accept_length"), gauges.get("spec_accept_rate")
    if max(length_g.mean if length_g is not None else 0.0, rate_g.mean if rate_g is not None else 0.0) <= 0:
        return None  # SGLang exports its gauges at 0 when it does not draft
    rate, length, why = _believed(rate_g.mean if rate_g is not None else None,
                                  length_g.mean if length_g is not None else None, None)
    return SpecWindow(source="gauges", acceptance_rate=rate, acceptance_length=length, rejected=why)


def _believed(rate: float | None, length: float | None, per_draft: float | None,
              ) -> tuple[float | None, float | None, str]:
    """``(rate, length, why)``: a rate outside 0..1 or a length below 1 (or above 1 + the tokens drafted per
    draft, where known) is None, and ``why`` says so."""
    why = []
    if rate is not None and not 0.0 <= rate <= 1.0:
        why.append(f"acceptance rate {rate:g} is not between 0 and 1")
        rate = None
    top = 1.0 + per_draft if per_draft is not None else float("inf")
    if length is not None and not 1.0 <= length <= top:
        why.append(f"acceptance length {length:g} is not between 1 and {top:g}")
        length = None
    return rate, length, "; ".join(why)
