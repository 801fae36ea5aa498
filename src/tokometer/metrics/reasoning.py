"""`ReasoningSummary`: a step's reasoning and answer apart, for reasoning models.

Present only when some completed answer of the step had reasoning (streamed in a field of its own,
inline between ``<think>`` tags, or counted by the server in its usage). TTFT stays "any token"
(reasoning counts); the time to the first *answer* token is `ttfat_ms`. The step's decode speed and
TPOT count reasoning and answer tokens alike, as far as they were streamed (reasoning a server counts
but hides, ``hidden_tokens_total``, is reported apart); `answer_decode_speed_tok_s` is the answer's own.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tokometer.metrics import request as m
from tokometer.metrics.distribution import Distribution
from tokometer.records import RequestRecord

__all__ = ["ReasoningSummary", "summarize_reasoning"]

_MS = 1e-6


@dataclass(slots=True)
class ReasoningSummary:
    """Reasoning against answer over a step's completed requests."""

    requests: int
    """Completed answers that had reasoning."""
    no_answer: int
    """Of those, answers that ended before their first answer token (cut while reasoning)."""
    ttfat_ms: Distribution
    """Time to first answer token, over every completed answer that had an answer (TTFT where it did not reason)."""
    reasoning_tokens_total: int
    reasoning_tokens: Distribution
    """Per answer that reasoned."""
    answer_tokens_total: int
    answer_tokens: Distribution
    """Per completed answer."""
    reasoning_share: float | None
    """Reasoning tokens / output tokens, over the completed answers."""
    answer_decode_speed_tok_s: Distribution
    reasoning_tokens_source: dict[str, int] = field(default_factory=dict)
    hidden_tokens_total: int = 0
    """Reasoning tokens the server counted but never streamed (o-series APIs): in the output tokens and
    the reasoning share, never in TPOT, ITL or decode speed."""

    def to_json(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "no_answer": self.no_answer,
            "ttfat_ms": self.ttfat_ms.to_json(),
            "reasoning_tokens": {"total": self.reasoning_tokens_total, "source": self.reasoning_tokens_source,
                                 "hidden": self.hidden_tokens_total,
                                 "per_request": self.reasoning_tokens.to_json()},
            "answer_tokens": {"total": self.answer_tokens_total, "per_request": self.answer_tokens.to_json()},
            "reasoning_share": self.reasoning_share,
            "answer_decode_speed_tok_s": self.answer_decode_speed_tok_s.to_json(),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ReasoningSummary:
        """The summary `to_json` wrote."""
        reasoning = data.get("reasoning_tokens") or {}
        answer = data.get("answer_tokens") or {}
        share = data.get("reasoning_share")
        return cls(requests=int(data.get("requests") or 0), no_answer=int(data.get("no_answer") or 0),
                   ttfat_ms=Distribution.from_json(data.get("ttfat_ms")),
                   reasoning_tokens_total=int(reasoning.get("total") or 0),
                   reasoning_tokens=Distribution.from_json(reasoning.get("per_request")),
                   answer_tokens_total=int(answer.get("total") or 0),
                   answer_tokens=Distribution.from_json(answer.get("per_request")),
                   reasoning_share=float(share) if share is not None else None,
                   answer_decode_speed_tok_s=Distribution.from_json(data.get("answer_decode_speed_tok_s")),
                   reasoning_tokens_source=dict(reasoning.get("source") or {}),
                   hidden_tokens_total=int(reasoning.get("hidden") or 0))


def summarize_reasoning(ok: Sequence[RequestRecord]) -> ReasoningSummary | None:
    """The reasoning summary of a step's completed requests; ``None`` when none of them reasoned."""
    reasoning = [r for r in ok if m.reasoned(r)]
    if not reasoning:
        return None
    ttfat = [v for v in (m.ttfat_ns(r) for r in ok) if v is not None]
    answers = [v for v in (m.answer_tokens(r) for r in ok) if v is not None]
    counted = [r.reasoning_tokens or 0 for r in reasoning]
    output = sum(r.output_tokens or 0 for r in ok)
    speeds = [v for v in (m.answer_decode_speed_tok_s(r) for r in ok) if v is not None]
    return ReasoningSummary(
        requests=len(reasoning),
        no_answer=sum(1 for r in reasoning if m.ttfat_ns(r) is None),
        ttfat_ms=Distribution.of(ttfat, _MS),
        reasoning_tokens_total=sum(counted),
        reasoning_tokens=Distribution.of(float(n) for n in counted),
        answer_tokens_total=sum(answers),
        answer_tokens=Distribution.of(float(n) for n in answers),
        reasoning_share=sum(counted) / output if output else None,
        answer_decode_speed_tok_s=Distribution.of(speeds),
        reasoning_tokens_source=dict(Counter(r.reasoning_tokens_source for r in reasoning
                                             if r.reasoning_tokens_source)),
        hidden_tokens_total=sum(r.hidden_tokens or 0 for r in reasoning),
    )
