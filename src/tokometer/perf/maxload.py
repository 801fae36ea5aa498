"""`max_load`: the output throughput of a deployment kept full, in steady state: what serving benchmarks
report as "throughput at maximum load".

An engine under maximum load (continuous batching, every request ``input`` tokens in and ``output`` out)
holds as many sequences as its KV cache and its batch limit allow, and replaces each finished one at once.
In steady state each iteration

- decodes one token for each of the B sequences, whose caches hold ``input + output / 2`` tokens on
  average (`roofline.decode_step_s`: bandwidth or compute bound), and
- prefills the prompts of the sequences that replace the finished ones: B / output of them per iteration,
  B × input / output prompt tokens (chunked prefill, as vLLM, SGLang and TensorRT-LLM schedule it), at the
  prefill's compute efficiency.

    B          = min(max_batch, sequences of input + output tokens whose caches fit: `Deployment.kv_sequences`)
    iteration  = `roofline.mixed_step_s`(B decoding with B × (input + output / 2) cached, B × input / output
                 prompt tokens): the decode roofline + the prompt tokens' FLOPs / (TP × F × e_prefill)
                 + the step's communication (`tokometer.perf.collective`)
    throughput = B / iteration                                   (output tokens per second, all GPUs)

The prefill is *added* to the decode step rather than overlapped with it (`roofline.mixed_step_s`, the same
step the closed loop at a fixed concurrency is made of, `tokometer.perf.closedloop`): the two run as one batch of
kernels whose matmuls grow with the prefill tokens, and the published figures this module is checked
against (`tests/unit/perf/test_perf_published.py`, docs/commands/estimate.md) fit the sum: with the overlap
(``max``) prompt-heavy shapes such as 5000→500 come out 50–66 % too fast, with the sum within 15 %.
Reserving the whole ``input + output`` per sequence is what an engine must do to never preempt; engines
that admit more and preempt are not modelled. Where the requests' lengths spread, a slot's reservation is on
average over the steps E[L·(I + L)] / E[L], more than the means' I + L (``room_tokens``,
`tokometer.perf.lengths`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tokometer.perf.roofline import Deployment, Efficiency, decode_limiter, decode_step_s, mixed_step_s

__all__ = ["MAX_BATCH", "MaxLoad", "max_load"]

MAX_BATCH = 2048
"""The engine's cap on sequences in a batch when none is given: TensorRT-LLM's default ``max_batch_size``
(vLLM V1 caps at ``max_num_seqs``: 256 to 1024 by GPU; give ``max_batch`` to match)."""


@dataclass(frozen=True)
class MaxLoad:
    """Steady state at maximum load."""

    batch: int
    """Sequences decoding at once."""
    limited_by: str
    """What set the batch: ``kv cache`` or ``batch limit``."""
    decode_s: float
    prefill_s: float
    """Prefill time added to each iteration."""
    output_tok_s: float
    per_request_tok_s: float
    """One sequence's decode speed at that load: 1 / iteration."""
    bound: str
    """What the iteration is spent on: ``bandwidth``, ``compute`` (decode) or ``prefill``."""

    @property
    def iteration_s(self) -> float:
        return self.decode_s + self.prefill_s

    def to_json(self) -> dict[str, Any]:
        return {"batch": self.batch, "batch_limited_by": self.limited_by, "decode_ms": self.decode_s * 1e3,
                "prefill_ms": self.prefill_s * 1e3, "output_tok_s": self.output_tok_s,
                "per_request_tok_s": self.per_request_tok_s, "bound": self.bound}


def max_load(d: Deployment, input_tokens: int, output_tokens: int, efficiency: Efficiency | None = None,
             gpu_memory_utilization: float = 0.9, max_batch: int = MAX_BATCH,
             decode_context: float | None = None, room_tokens: float | None = None) -> MaxLoad | None:
    """`MaxLoad` of ``d`` for requests of ``input_tokens`` → ``output_tokens`` (their means); None when the
    hardware's memory is unknown or not one sequence fits. ``decode_context``: the tokens a decoding sequence holds
    cached on average over the steps, where the requests' lengths differ (`tokometer.perf.lengths`); None: every
    request alike, ``input + output / 2``; ``room_tokens`` the tokens a slot holds reserved on average (None:
    ``input + output``)."""
    eff = efficiency or Efficiency()
    if not d.hardware.memory_gb:
        return None
    fit = d.kv_sequences(round(room_tokens or input_tokens + output_tokens), gpu_memory_utilization)
    batch = min(fit, max_batch * d.ranks)  # the cap is each rank's (attention data parallel: TP ranks)
    if batch < 1:
        return None
    context = round(batch * (decode_context or input_tokens + output_tokens / 2))
    decode = decode_step_s(d, batch, context, eff)
    prompt_tokens = batch * input_tokens / output_tokens
    iteration = mixed_step_s(d, batch, context, prompt_tokens, 0, eff, sequences=batch / output_tokens)
    decode = min(decode, iteration)  # the prompts' tokens share the experts' padded tiles: never a negative share
    prefill = iteration - decode
    bound = "prefill" if prefill > decode else decode_limiter(d, batch, context, eff)
    return MaxLoad(batch=batch, limited_by="kv cache" if fit < max_batch * d.ranks else "batch limit", decode_s=decode,
                   prefill_s=prefill, output_tok_s=batch / iteration, per_request_tok_s=1 / iteration, bound=bound)
