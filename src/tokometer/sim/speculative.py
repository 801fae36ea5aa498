"""The simulator's draft model: speculative decoding with a stated acceptance rate (``--spec-tokens``).

Each decode step of a sequence the draft proposes ``tokens`` (k) tokens; the target model verifies
them in the same step and accepts each one with probability ``acceptance`` (a), independently of
the others, stopping at the first rejected one; the step then emits the accepted tokens plus the
one the target samples itself (the "bonus" token), so a step gives 1 + accepted tokens. Hence, per
step, E[accepted] = a + a^2 + ... + a^k and the mean acceptance length is 1 + E[accepted].

A step's time: the target verifies k + 1 tokens per sequence (in the modelled engine, the k
drafted ones are counted as prompt-like tokens of the step, `tokometer.sim.engine`), and the draft
costs ``draft_cost`` of a step per drafted token (0: a free draft, as an n-gram one nearly is).

The counters are vLLM V1's (``vllm/v1/spec_decode/metrics.py``, ``SpecDecodingProm``): drafts (one
per sequence per step that drafted), draft tokens, accepted tokens, and accepted tokens per draft
position; the simulator exports them under those names (`tokometer.sim.prometheus`). The first
token of an answer comes from the prefill, with no draft, as in vLLM.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

__all__ = ["Draft", "DraftCounts", "draft_for", "expected_acceptance_length"]


def expected_acceptance_length(tokens: int, acceptance: float) -> float:
    """The mean tokens a step emits per sequence: 1 + a + a^2 + ... + a^k (no answer-length cut)."""
    return 1.0 + sum(acceptance**i for i in range(1, tokens + 1))


@dataclass(slots=True)
class DraftCounts:
    """Totals since the simulator started, as vLLM counts them."""

    drafts: int = 0
    draft_tokens: int = 0
    accepted_tokens: int = 0
    accepted_per_position: list[int] = field(default_factory=list)


class Draft:
    """k drafted tokens per step, each accepted with probability a until the first rejection; seeded."""

    def __init__(self, tokens: int, acceptance: float, draft_cost: float, seed: int) -> None:
        self.tokens = tokens
        self.acceptance = acceptance
        self.draft_cost = draft_cost
        self.counts = DraftCounts(accepted_per_position=[0] * tokens)
        self._rng = random.Random(f"spec-draft:{seed}")

    def verify(self) -> int:
        """One sequence's step: draft, verify, count; the tokens accepted (0..k)."""
        accepted = 0
        while accepted < self.tokens and self._rng.random() < self.acceptance:
            self.counts.accepted_per_position[accepted] += 1
            accepted += 1
        self.counts.drafts += 1
        self.counts.draft_tokens += self.tokens
        self.counts.accepted_tokens += accepted
        return accepted

    @property
    def step_factor(self) -> float:
        """How much longer than a plain decode step one with drafting takes, for the draft's own work."""
        return 1.0 + self.tokens * self.draft_cost


def draft_for(tokens: int, acceptance: float, draft_cost: float, seed: int) -> Draft | None:
    """The draft of a simulator configured with ``tokens`` drafted per step; None without one."""
    return Draft(tokens, acceptance, draft_cost, seed) if tokens > 0 else None
