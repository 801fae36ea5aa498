"""Speculative decoding in the estimate: a draft proposes k tokens, the target verifies them in one step.

With acceptance rate a (each draft token accepted with probability a, independently, until the first
rejection) and k draft tokens, one round yields on average

    E(a, k) = 1 + a + a² + … + a^k = (1 − a^(k+1)) / (1 − a)          (k + 1 when a = 1)

tokens per sequence: the accepted prefix of the draft plus the target's own token at the first rejection
(or after the last draft token). A round of a batch of B sequences costs

    round        = k × draft step + verify step
    draft step   = the draft model's decode step at batch B on the same GPUs (``--draft-model``), or a
                   given fraction of the target's plain decode step (``--draft-cost``: an EAGLE or MTP head
                   costs a few per cent, a separate small model more)
    verify step  = the target's decode step over B × (k + 1) tokens (`roofline.decode_step_s`): the weights
                   (for a mixture of experts, those the B × (k + 1) tokens reach) and each sequence's cache
                   read once, the matmul FLOPs of every token. The attention FLOPs of the k extra query
                   tokens per sequence are left out (a few per cent of a token's FLOPs at these contexts).

    per-request tok/s = E / round          aggregate tok/s = B × E / round
    speed-up          = (E / round) / (1 / plain decode step)

At batch 1 a decode step is bound by reading the weights, so verifying k + 1 tokens costs about one plain
step and the speed-up is nearly E / (1 + k × draft cost); at large batches the step is compute bound,
the verify step costs about k + 1 plain ones and speculation slows the aggregate down. The caches are taken
mid-answer as in `tokometer.perf.estimate`, and the rows are **decode only** (no prompt arriving): the plain
step is the estimate's decode-only step (`BatchEstimate.step_expected_s`), not its closed loop. Not modelled:
speculation with prompts arriving (the closed loop) or in the maximum-load line, the draft's weights and
cache in the memory (the KV capacity is the target's alone), tree drafts, and acceptance that varies by
position.

`required_acceptance` turns a published speed-up round: the acceptance rate that k draft tokens need to
give it (None when even a = 1 cannot), e.g. Groq's Llama 3.1 70B going from 250 to 1,665 tok/s per user.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tokometer.perf.estimate import Estimate
from tokometer.perf.model import ModelSpec
from tokometer.perf.roofline import Deployment, decode_step_s
from tokometer.util.errors import ConfigError

if TYPE_CHECKING:
    from rich.console import Console

__all__ = [
    "MAX_SPEC_TOKENS",
    "Speculation",
    "SpeculativeEstimate",
    "SpeculativeRow",
    "expected_tokens_per_round",
    "explain_speculative",
    "render_speculative",
    "required_acceptance",
    "speculative_estimate",
]

MAX_SPEC_TOKENS = 64
"""The most draft tokens a round may propose (engines use 1 to ~10)."""


def expected_tokens_per_round(acceptance: float, tokens: int) -> float:
    """E(a, k) = (1 − a^(k+1)) / (1 − a): tokens one verify step yields on average (k + 1 at a = 1)."""
    if acceptance >= 1:
        return float(tokens + 1)
    return (1 - acceptance ** (tokens + 1)) / (1 - acceptance)


@dataclass(frozen=True)
class Speculation:
    """An acceptance rate, the draft tokens per round, and the draft: a model or a cost fraction."""

    acceptance: float
    tokens: int = 4
    draft_model: ModelSpec | None = None
    draft_cost: float | None = None
    """Each draft step as a fraction of the target's plain decode step (used without ``draft_model``)."""

    def __post_init__(self) -> None:
        if not 0 <= self.acceptance <= 1:
            raise ConfigError(f"--spec-acceptance must be in [0, 1] (got {self.acceptance})")
        if not 1 <= self.tokens <= MAX_SPEC_TOKENS:
            raise ConfigError(f"--spec-tokens must be 1 to {MAX_SPEC_TOKENS} (got {self.tokens})")
        if self.draft_model is None and self.draft_cost is None:
            raise ConfigError("speculative decoding needs its draft: give --draft-model NAME or --draft-cost "
                              "FRACTION")
        if self.draft_model is not None and self.draft_cost is not None:
            raise ConfigError("give the draft as --draft-model or as --draft-cost, not both")
        if self.draft_cost is not None and not 0 <= self.draft_cost <= 1:
            raise ConfigError(f"--draft-cost must be in [0, 1] of the target's decode step (got {self.draft_cost})")

    @property
    def tokens_per_round(self) -> float:
        return expected_tokens_per_round(self.acceptance, self.tokens)

    def draft_deployment(self, target: Deployment) -> Deployment | None:
        """The draft model on the target's GPUs, in its formats; TP 1 when its heads do not split over them."""
        if self.draft_model is None:
            return None
        tp = target.tp if not self.draft_model.tp_problem(target.tp) else 1
        return Deployment(self.draft_model, target.hardware, target.weight_dtype, target.kv_dtype, tp=tp)

    def describe(self) -> str:
        draft = (f"draft {self.draft_model.name}" if self.draft_model is not None
                 else f"draft step {self.draft_cost:.3g} × the target's")
        return (f"acceptance {self.acceptance:.3g}, {self.tokens} draft tokens ({draft}): "
                f"{self.tokens_per_round:.3g} tokens per verify step")


@dataclass(frozen=True)
class SpeculativeRow:
    """One batch size: the plain step, the draft and verify steps, and the speeds with and without."""

    batch: int
    plain_step_s: float
    draft_step_s: float
    verify_step_s: float
    tokens_per_round: float
    draft_tokens: int

    @property
    def round_s(self) -> float:
        return self.draft_tokens * self.draft_step_s + self.verify_step_s

    @property
    def per_request_tok_s(self) -> float:
        return self.tokens_per_round / self.round_s

    @property
    def plain_per_request_tok_s(self) -> float:
        return 1 / self.plain_step_s

    @property
    def speedup(self) -> float:
        return self.per_request_tok_s / self.plain_per_request_tok_s

    def to_json(self) -> dict[str, Any]:
        return {"batch": self.batch, "plain_step_ms": self.plain_step_s * 1e3, "draft_step_ms": self.draft_step_s * 1e3,
                "verify_step_ms": self.verify_step_s * 1e3, "round_ms": self.round_s * 1e3,
                "per_request_tok_s": {"plain": self.plain_per_request_tok_s, "speculative": self.per_request_tok_s},
                "aggregate_tok_s": {"plain": self.batch * self.plain_per_request_tok_s,
                                    "speculative": self.batch * self.per_request_tok_s},
                "speedup": self.speedup}


@dataclass(frozen=True)
class SpeculativeEstimate:
    """An estimate's batch rows with speculative decoding (expected, at the estimate's efficiencies)."""

    speculation: Speculation
    draft: Deployment | None
    rows: tuple[SpeculativeRow, ...]

    def to_json(self) -> dict[str, Any]:
        s = self.speculation
        return {"acceptance": s.acceptance, "draft_tokens": s.tokens, "tokens_per_round": s.tokens_per_round,
                "draft_model": s.draft_model.name if s.draft_model is not None else None,
                "draft_tp": self.draft.tp if self.draft is not None else None, "draft_cost": s.draft_cost,
                "acceptance_model": "i.i.d. per draft token", "decode_only": True,
                "batches": [r.to_json() for r in self.rows]}


def speculative_estimate(e: Estimate, speculation: Speculation) -> SpeculativeEstimate:
    """``e``'s batch rows with ``speculation``: the draft's k steps and the target's verify step per round."""
    d, eff, k = e.deployment, e.efficiency, speculation.tokens
    draft = speculation.draft_deployment(d)
    rows = []
    for row in e.rows:
        context = row.context_tokens
        plain = row.step_expected_s  # decode only, at the estimate's efficiencies
        if draft is not None:
            draft_step = decode_step_s(draft, row.batch, context, eff)
        else:
            draft_step = (speculation.draft_cost or 0.0) * plain
        verify = decode_step_s(d, row.batch * (k + 1), context, eff)
        rows.append(SpeculativeRow(row.batch, plain, draft_step, verify, speculation.tokens_per_round, k))
    return SpeculativeEstimate(speculation, draft, tuple(rows))


def required_acceptance(speedup: float, tokens: int, draft_cost: float = 0.0, verify_cost: float = 1.0) -> float | None:
    """The smallest acceptance a with E(a, k) / (verify_cost + k × draft_cost) ≥ ``speedup`` (costs in plain
    decode steps; at batch 1 verifying costs about one plain step), or None when even a = 1 falls short."""
    cost = verify_cost + tokens * draft_cost

    def gain(a: float) -> float:
        return expected_tokens_per_round(a, tokens) / cost

    if gain(1.0) < speedup:
        return None
    low, high = 0.0, 1.0
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (low, mid) if gain(mid) >= speedup else (mid, high)
    return high


def explain_speculative(s: SpeculativeEstimate) -> str:
    """The speculative rows' arithmetic in words (``--explain``)."""
    sp = s.speculation
    a, k = sp.acceptance, sp.tokens
    lines = [f"Speculative decoding ({sp.describe()}):",
             f"  tokens per verify step E = (1 − a^(k+1)) / (1 − a) = (1 − {a:.3g}^{k + 1}) / (1 − {a:.3g}) = "
             f"{sp.tokens_per_round:.4g} (each draft token accepted with probability a, independently)"]
    if s.draft is not None:
        lines.append(f"  draft: {s.draft.describe()}, one decode step at the same batch and context")
    for r in s.rows:
        draft = (f"draft {r.draft_step_s * 1e3:,.3f} ms" if s.draft is not None
                 else f"draft {sp.draft_cost:.3g} × {r.plain_step_s * 1e3:,.3f} = {r.draft_step_s * 1e3:,.3f} ms")
        lines.append(
            f"  batch {r.batch:,}: {draft}; verify = the decode step over {r.batch:,} × {k + 1} = "
            f"{r.batch * (k + 1):,} tokens = {r.verify_step_s * 1e3:,.3f} ms; round = {k} × "
            f"{r.draft_step_s * 1e3:,.3f} + {r.verify_step_s * 1e3:,.3f} = {r.round_s * 1e3:,.3f} ms → "
            f"{sp.tokens_per_round:.4g} / {r.round_s * 1e3:,.3f} ms = {r.per_request_tok_s:,.1f} tok/s per request "
            f"(plain {r.plain_per_request_tok_s:,.1f}: × {r.speedup:.2f}), {r.batch * r.per_request_tok_s:,.0f} in all")
    return "\n".join(lines)


def render_speculative(console: Console, s: SpeculativeEstimate) -> None:
    """The speculative rows beside the plain ones: steps, per-request and aggregate tok/s, speed-up."""
    from rich.table import Table

    console.print(f"  speculative decoding: {s.speculation.describe()} (expected, decode only: beside the decode-only "
                  "step; --explain for the arithmetic)")
    table = Table(show_edge=False, title=None)
    for column in ("batch", "draft step ms", "verify step ms", "round ms", "tok/s per request", "tok/s in all",
                   "speed-up"):
        table.add_column(column, justify="right")
    for r in s.rows:
        table.add_row(f"{r.batch:,}", f"{r.draft_step_s * 1e3:,.3g}", f"{r.verify_step_s * 1e3:,.3g}",
                      f"{r.round_s * 1e3:,.3g}", f"{r.plain_per_request_tok_s:,.1f} → {r.per_request_tok_s:,.1f}",
                      f"{r.batch * r.plain_per_request_tok_s:,.0f} → {r.batch * r.per_request_tok_s:,.0f}",
                      f"× {r.speedup:.2f}")
    console.print(table)
