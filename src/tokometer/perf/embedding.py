"""``tokometer estimate --workload embed``: an embedding (or rerank) pass is a prefill only.

One pass over a batch of B inputs of T tokens each processes B × T prompt tokens and decodes nothing, so its
time is `tokometer.perf.roofline.embedding_pass_s` (the prefill formula, B sequences, nothing cached), bound
(100 % of peak) and expected (at the efficiencies `tokometer.perf.questions.resolve_efficiency` picks). A server
that runs one pass after another then answers 1 / pass time requests per second, B of them inputs per
second and B × T input tokens per second; the latency of a request alone is one pass. Nothing is kept in
a KV cache between passes, so memory sets no batch limit here beyond the activations (not modelled).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from tokometer.perf.quant import normalize_dtype
from tokometer.perf.questions import EstimateSpec, estimate_inputs
from tokometer.perf.roofline import BOUND, Deployment, Efficiency, embedding_pass_s

__all__ = ["EmbeddingEstimate", "EmbeddingRow", "embedding_estimate", "render_embedding_estimate",
           "run_embedding_estimate"]

@dataclass(frozen=True)
class EmbeddingRow:
    """One batch size: the pass's time, bound and expected, and what limits it."""

    batch: int
    tokens_each: int
    bound_s: float
    expected_s: float
    limiter: str  # "compute" or "bandwidth", at the expected efficiencies

    def rates(self, seconds: float) -> dict[str, float]:
        return {"requests_per_s": 1 / seconds, "inputs_per_s": self.batch / seconds,
                "input_tok_s": self.batch * self.tokens_each / seconds}

    def to_json(self) -> dict[str, Any]:
        return {"batch": self.batch, "input_tokens_each": self.tokens_each,
                "pass_ms": {"bound": self.bound_s * 1e3, "expected": self.expected_s * 1e3},
                "bound": self.rates(self.bound_s), "expected": self.rates(self.expected_s),
                "limited_by": self.limiter}


@dataclass(frozen=True)
class EmbeddingEstimate:
    deployment: Deployment
    efficiency: Efficiency
    input_tokens: int
    rows: tuple[EmbeddingRow, ...] = field(default=())
    efficiency_source: str = "typical"

    def to_json(self) -> dict[str, Any]:
        d = self.deployment
        return {"workload": "embed", "model": d.model.name, "hardware": d.hardware.name,
                "weight_dtype": normalize_dtype(d.weight_dtype), "tp": d.tp, "input_tokens_each": self.input_tokens,
                "efficiency": {"prefill_compute": self.efficiency.prefill_compute,
                               "decode_bandwidth": self.efficiency.decode_bandwidth,
                               "source": self.efficiency_source},
                "batches": [row.to_json() for row in self.rows]}


def embedding_estimate(d: Deployment, batches: list[int], tokens_each: int, efficiency: Efficiency) -> \
        EmbeddingEstimate:
    rows = []
    for batch in batches:
        expected = embedding_pass_s(d, batch, tokens_each, efficiency)
        rows.append(EmbeddingRow(batch, tokens_each, embedding_pass_s(d, batch, tokens_each, BOUND), expected,
                                 _limiter(d, batch, tokens_each, efficiency)))
    return EmbeddingEstimate(d, efficiency, tokens_each, tuple(rows))


def _limiter(d: Deployment, batch: int, tokens_each: int, efficiency: Efficiency) -> str:
    """Compute when faster arithmetic would shorten the pass (the FLOPs term is the larger), else bandwidth."""
    compute = efficiency.prefill_compute
    faster, slower = (1.0, compute) if compute < 1 else (1.0, 0.99)
    times = [embedding_pass_s(d, batch, tokens_each, replace(efficiency, prefill_compute=c)) for c in (faster, slower)]
    return "compute" if times[1] > times[0] * (1 + 1e-9) else "bandwidth"


def run_embedding_estimate(spec: EstimateSpec) -> EmbeddingEstimate:
    """``spec``'s deployment (model and hardware required) doing embedding passes of each batch size."""
    d, batches, efficiency, source = estimate_inputs(spec)
    return replace(embedding_estimate(d, batches, spec.input_tokens, efficiency), efficiency_source=source)


def _n(value: float) -> str:
    return f"{value:,.1f}" if value < 1000 else f"{value:,.0f}"


def render_embedding_estimate(console: Console, e: EmbeddingEstimate) -> None:
    d = e.deployment
    console.print(Text.assemble((d.describe(), "bold"), f": embedding passes of {e.input_tokens:,} tokens per input "
                                "(a prefill only: nothing is decoded)"))
    table = Table(show_edge=False)
    for column in ("inputs per pass", "pass ms", "requests/s", "inputs/s", "input tok/s", "bound by"):
        table.add_column(column, justify="left" if column == "bound by" else "right")
    for row in e.rows:
        bound, expected = row.rates(row.bound_s), row.rates(row.expected_s)
        table.add_row(f"{row.batch:,}", f"{row.bound_s * 1e3:,.3g} → {row.expected_s * 1e3:,.3g}",
                      *(f"{_n(bound[k])} → {_n(expected[k])}" for k in ("requests_per_s", "inputs_per_s",
                                                                        "input_tok_s")),
                      row.limiter)
    console.print(table)
    f = e.efficiency
    console.print(f"  bound → expected: expected at {f.prefill_compute:.0%} of peak FLOP/s, "
                  f"{f.decode_bandwidth:.0%} of peak bandwidth ({e.efficiency_source}); one pass at a time, "
                  "one request per pass; a request alone waits one pass")
