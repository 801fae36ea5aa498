"""`estimate()`: the limits of a deployment at several batch sizes, bound and expected side by side.

For each batch size B, with every request holding ``input`` prompt tokens and generating ``output``:

    closed loop              `tokometer.perf.closedloop`: B users each sending the next prompt as its
                             answer ends (``bench -c B``): the prefill of the arriving prompts rides in
                             the decode steps (chunked prefill; or stalls them, ``chunked=False``):
                             ITL, TTFT, per-request tok/s = 1 / ITL and aggregate tok/s =
                             B × output / (TTFT + (output − 1) × ITL). What a benchmark at B measures.
    decode only              `decode_step_s(d, B, B × (input + output / 2))`: a batch already running with
                             no prompt arriving (the caches taken mid-answer): B / step tok/s. An upper
                             bound on the closed loop, met when prompts are short beside the answers.
    prefill (one request)    `prefill_s(d, input)`: the TTFT floor of a request that does not wait
    fits                     B × (input + output) ≤ KV capacity

Every step counts the tensor-/expert-parallel communication (`tokometer.perf.collective`).
"bound" is the roofline at 100 % of bandwidth and FLOP/s; "expected" is at the stated
`Efficiency`. ``max_load`` is the steady state with the cache kept full (`tokometer.perf.maxload`): what a
serving benchmark's "throughput at maximum load" measures. `explain()` writes the same arithmetic out in words.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tokometer.perf.closedloop import STEP_TOKENS, ClosedLoop, closed_loop
from tokometer.perf.collective import Communication, communication
from tokometer.perf.lengthsfile import RequestLengths
from tokometer.perf.maxload import MAX_BATCH, MaxLoad, max_load
from tokometer.perf.quant import normalize_dtype, weight_dtype
from tokometer.perf.roofline import (
    ACTIVATION_RESERVE_GIB,
    BOUND,
    Deployment,
    Efficiency,
    compute_bound_batch,
    decode_limiter,
    decode_step_s,
    prefill_s,
)
from tokometer.perf.trackrecord import TrackRecord

__all__ = ["BatchEstimate", "Estimate", "estimate"]


@dataclass(frozen=True)
class BatchEstimate:
    """One batch size: the closed loop (prompts arriving) and decode only, bound and expected, and what limits
    the decode step."""

    batch: int
    fits: bool | None  # None: the hardware's memory size is unknown
    kv_bytes_end: float  # KV the batch holds reserved: each sequence's I + O (spread lengths: a slot's on average)
    context_tokens: int  # KV tokens of the batch mid-answer
    prefill_bound_s: float
    prefill_expected_s: float
    step_bound_s: float  # decode only
    step_expected_s: float
    limiter: str  # "bandwidth" or "compute", at the expected efficiencies
    closed_bound: ClosedLoop
    closed_expected: ClosedLoop
    communication: Communication  # of one decode-only step

    @property
    def per_request_bound_tok_s(self) -> float:
        """Closed loop: 1 / ITL."""
        return self.closed_bound.per_request_tok_s

    @property
    def per_request_expected_tok_s(self) -> float:
        return self.closed_expected.per_request_tok_s

    @property
    def aggregate_bound_tok_s(self) -> float:
        """Closed loop: B × output / (TTFT + (output − 1) × ITL)."""
        return self.closed_bound.aggregate_tok_s

    @property
    def aggregate_expected_tok_s(self) -> float:
        return self.closed_expected.aggregate_tok_s

    @property
    def decode_only_bound_tok_s(self) -> float:
        """Decode only (no prompt arriving): B / step."""
        return self.batch / self.step_bound_s

    @property
    def decode_only_expected_tok_s(self) -> float:
        return self.batch / self.step_expected_s

    def to_json(self) -> dict[str, Any]:
        b, e = self.closed_bound, self.closed_expected
        return {
            "batch": self.batch, "fits": self.fits, "kv_bytes_end": self.kv_bytes_end,
            "context_tokens_mid_answer": self.context_tokens,
            "prefill_ms": {"bound": self.prefill_bound_s * 1e3, "expected": self.prefill_expected_s * 1e3},
            "itl_ms": {"bound": b.itl_s * 1e3, "expected": e.itl_s * 1e3},
            "ttft_ms": {"bound": b.ttft_s * 1e3, "expected": e.ttft_s * 1e3},
            "per_request_tok_s": {"bound": self.per_request_bound_tok_s,
                                  "expected": self.per_request_expected_tok_s},
            "aggregate_tok_s": {"bound": self.aggregate_bound_tok_s, "expected": self.aggregate_expected_tok_s},
            "closed_loop": {"bound": b.to_json(), "expected": e.to_json()},
            "decode_step_ms": {"bound": self.step_bound_s * 1e3, "expected": self.step_expected_s * 1e3},
            "decode_only": {"step_ms": {"bound": self.step_bound_s * 1e3, "expected": self.step_expected_s * 1e3},
                            "per_request_tok_s": {"bound": 1 / self.step_bound_s,
                                                  "expected": 1 / self.step_expected_s},
                            "aggregate_tok_s": {"bound": self.decode_only_bound_tok_s,
                                                "expected": self.decode_only_expected_tok_s}},
            "communication_per_decode_step": self.communication.to_json(),
            "limited_by": self.limiter,
        }


@dataclass(frozen=True)
class Estimate:
    """Memory facts of a deployment and one `BatchEstimate` per batch size."""

    deployment: Deployment
    efficiency: Efficiency
    input_tokens: int
    output_tokens: int
    gpu_memory_utilization: float
    kv_capacity_tokens: int | None
    """Tokens of cache that fit in the layers whose cache grows with the context (None: memory unknown)."""
    compute_bound_batch: int | None  # at 100 %
    compute_bound_batch_expected: int | None
    compute_bound_batch_short: int | None  # at 100 %, with (nearly) empty caches: weights only
    rows: tuple[BatchEstimate, ...] = field(default=())
    max_load: MaxLoad | None = None
    """Expected steady state at maximum load (None: the memory size is unknown)."""
    efficiency_source: str = "typical"
    """Where ``efficiency`` comes from: ``typical``, ``given``, or a calibration (`tokometer.perf.calibrate`)."""
    kv_free_fraction: float | None = None
    """The KV cache's share of the memory left after the weights (TensorRT-LLM's rule), when that sized it:
    ``gpu_memory_utilization`` is then its equivalent share of the whole (`Deployment.kv_memory_share`)."""
    chunked_prefill: bool = True
    """The closed loop's prompts ride in the decode steps (else they are prefilled in steps of their own)."""
    step_tokens: int = STEP_TOKENS
    """Tokens one step may hold (the engine's token budget)."""
    max_batch: int = MAX_BATCH
    """Sequences one engine rank schedules at once (its batch limit): the closed loop and max load run no more."""
    track_record: TrackRecord | None = None
    """How far the estimate has been from published figures of such cases (`tokometer.perf.trackrecord`; None:
    not asked, or not at the typical efficiencies on a GPU)."""
    lengths: RequestLengths | None = None
    """The requests' lengths as a file listed them (``--lengths``), whose means are ``input_tokens`` and
    ``output_tokens`` and whose spread sets each step's cached tokens; None: every request alike."""

    @property
    def engine_holds(self) -> int:
        """The most sequences the engine runs at once by its batch limit (each rank's × ranks)."""
        return self.max_batch * self.deployment.ranks

    @property
    def tokens_per_sequence(self) -> int:
        """The tokens a sequence's room holds reserved: input + output, or where the lengths spread a slot's
        on average over the steps (`RequestLengths.room`)."""
        return round(self.lengths.room) if self.lengths else self.input_tokens + self.output_tokens

    @property
    def past_context(self) -> int | None:
        """The tokens a request holds (input + output) where they pass the model's context
        (`ModelSpec.max_context`): a server refuses such a request (vLLM's ``--max-model-len`` defaults to the
        context) unless a RoPE scaling it is told of extends it. None where they fit."""
        tokens = self.input_tokens + self.output_tokens
        return tokens if tokens > self.deployment.model.max_context else None

    @property
    def max_sequences(self) -> int | None:
        """Requests of `tokens_per_sequence` whose caches fit at once (`Deployment.kv_sequences`: a model's
        window layers keep at most their window of each); None: the memory size is unknown."""
        if self.kv_capacity_tokens is None:
            return None
        return self.deployment.kv_sequences(self.tokens_per_sequence, self.gpu_memory_utilization)

    def _experts_json(self) -> dict[str, Any] | None:
        """A mixture of experts' routing and the experts a step of each batch reaches (None: dense)."""
        d = self.deployment
        m = d.model
        if not m.is_moe:
            return None
        return {"routed": m.experts, "per_token": m.experts_per_token, "format": m.expert_format(d.weight_dtype),
                "weight_bytes": d.expert_weight_bytes, "other_weight_bytes": d.other_weight_bytes,
                "expected_touched_per_layer": {str(r.batch): m.expected_experts(r.batch) for r in self.rows},
                "routing": "uniform (each token's k experts a uniform draw)"}

    def _communication_json(self) -> dict[str, Any]:
        """How the tensor-/expert-parallel communication is counted (`tokometer.perf.collective`)."""
        from tokometer.perf.collective import (
            ACTIVATION_BYTES,
            COLLECTIVE_LATENCY_S,
            COLLECTIVE_LATENCY_SOURCE,
            CUSTOM_SOURCE,
            NCCL_SOURCE,
            PCIE_BUS_SHARE,
            fabric,
        )

        d = self.deployment
        counted = communication(d, 1).counted
        link = fabric(d.hardware.link_gbs)
        timing = ({"rule": "the faster of a custom all-reduce (to 1 MiB) and NCCL, as measured on H100 NVLink for the "
                           "message size, at the message the H100 moves in the same time over this link",
                   "custom_source": CUSTOM_SOURCE, "nccl_source": NCCL_SOURCE} if link == "scale-up" else
                  {"rule": "latency_us_per_collective plus the ring's bytes at bus_share of the link's one-way "
                           "figure (a PCIe link), as NCCL measured over PCIe",
                   "latency_us_per_collective": COLLECTIVE_LATENCY_S * 1e6, "bus_share": PCIE_BUS_SHARE,
                   "latency_source": COLLECTIVE_LATENCY_SOURCE})
        return {"counted": counted, "link_gbs_both_directions": d.hardware.link_gbs,
                "fabric": link,
                "activation_bytes": ACTIVATION_BYTES, "timing": timing,
                "assumption": "tensor parallel: 2 all-reduces of the step's tokens × hidden activations per "
                              "layer, each timed by its message size (timing); expert parallel with tensor-parallel "
                              "attention: the same (every GPU holds every token; the experts' sums are all-reduced); "
                              "attention data parallel: an all-gather before and a reduce-scatter after each "
                              "experts' layer, each as an all-reduce of half the message, no attention all-reduce; "
                              "added to the step (not overlapped)"
                              + ("" if counted else f"; NOT counted here: {d.hardware.name} has no link figure")}

    def to_json(self) -> dict[str, Any]:
        d = self.deployment
        return {
            "model": {"name": d.model.name, "params": d.model.params, "active_params": d.model.active,
                      "kept_16_bit_params": (d.model.kept_params + d.model.kept_expert_params
                                             if d.model.is_native(d.weight_dtype) else 0.0),
                      "source": d.model.source},
            "hardware": {"name": d.hardware.name, "memory_gib": d.hardware.memory_gb,
                         "bandwidth_gbs": d.hardware.bandwidth_gbs, "link_gbs": d.hardware.link_gbs,
                         "gemm_fraction": d.hardware.gemm_fraction,
                         "dense_tflops": {"bf16": d.hardware.bf16_tflops, "fp8": d.hardware.fp8_tflops,
                                          "int8": d.hardware.int8_tops, "fp4": d.hardware.fp4_tflops},
                         "fp4_formats": list(d.hardware.fp4_formats),
                         "peak_tflops": (d.compute_flops or 0) / 1e12
                         or None, "source": d.hardware.source, "note": d.hardware.note,
                         "compute_dtype": d.compute_dtype, "peak": d.compute_peak.to_json() if d.compute_peak else None,
                         "peaks": [p.to_json() for p in d.hardware.peaks]},
            "weight_dtype": normalize_dtype(d.weight_dtype), "kv_dtype": d.kv_dtype, "tp": d.tp, "pp": d.pp,
            "expert_parallel": d.expert_parallel, "attention_dp": d.attention_dp,
            "full_window_cache": d.full_window_cache, "window_memory_whole": d.window_memory_whole,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "lengths": self.lengths.to_json() if self.lengths else None,
            "efficiency": {"decode_bandwidth": self.efficiency.decode_bandwidth,
                           "prefill_compute": self.efficiency.prefill_compute,
                           "decode_compute": self.efficiency.decode_compute,
                           "layer_overhead_s": self.efficiency.layer_overhead_s,
                           "expert_half_width": self.efficiency.expert_half_width,
                           "expert_share": self.efficiency.expert_share(d.expert_gemm_width),
                           "compute_scale": d.compute_scale,
                           "source": self.efficiency_source},
            "weight_bytes": d.weight_bytes, "weight_bytes_per_gpu": d.weight_bytes_per_gpu,
            "weight_format": d.weight_format, "experts": self._experts_json(),
            "kv_bytes_per_token": d.kv_bytes_per_token, "kv_bytes_per_token_per_gpu": d.kv_bytes_per_token_per_gpu,
            "recurrent_layers": d.model.recurrent_layers,
            "recurrent_state_bytes_per_sequence": d.model.recurrent_bytes_per_sequence,
            "gpu_memory_utilization": self.gpu_memory_utilization, "kv_free_fraction": self.kv_free_fraction,
            "activation_reserve_gib": ACTIVATION_RESERVE_GIB, "kv_capacity_tokens": self.kv_capacity_tokens,
            "max_sequences": self.max_sequences, "past_model_context": self.past_context,
            "compute_bound_batch": {"bound": self.compute_bound_batch,
                                    "expected": self.compute_bound_batch_expected,
                                    "bound_short_context": self.compute_bound_batch_short},
            "closed_loop": {"prefill": "chunked" if self.chunked_prefill else "separate steps",
                            "step_tokens": self.step_tokens, "max_batch": self.max_batch,
                            "model": "tokometer.perf.closedloop"},
            "communication": self._communication_json(),
            "batches": [row.to_json() for row in self.rows],
            "max_load": self.max_load.to_json() if self.max_load else None,
            "published_check": self.track_record.to_json() if self.track_record else None,
        }


def _row(d: Deployment, batch: int, input_tokens: int, output_tokens: int, eff: Efficiency, utilization: float,
         chunked: bool, step_tokens: int, max_batch: int, per_sequence: float, reserved: float) -> BatchEstimate:
    context = round(batch * per_sequence)
    room = d.kv_sequences(round(reserved), utilization) if d.hardware.memory_gb else None
    return BatchEstimate(
        batch=batch, fits=None if room is None else batch <= room,
        kv_bytes_end=batch * d.kv_bytes_per_sequence(reserved), context_tokens=context,
        prefill_bound_s=prefill_s(d, input_tokens), prefill_expected_s=prefill_s(d, input_tokens, 0, eff),
        step_bound_s=decode_step_s(d, batch, context), step_expected_s=decode_step_s(d, batch, context, eff),
        limiter=decode_limiter(d, batch, context, eff),
        closed_bound=closed_loop(d, batch, input_tokens, output_tokens, BOUND, chunked=chunked,
                                 step_tokens=step_tokens, gpu_memory_utilization=utilization, max_batch=max_batch,
                                 decode_context=per_sequence, room_tokens=reserved),
        closed_expected=closed_loop(d, batch, input_tokens, output_tokens, eff, chunked=chunked,
                                    step_tokens=step_tokens, gpu_memory_utilization=utilization,
                                    max_batch=max_batch, decode_context=per_sequence, room_tokens=reserved),
        communication=communication(d, batch))


def estimate(d: Deployment, batches: list[int], input_tokens: int, output_tokens: int,
             efficiency: Efficiency | None = None, gpu_memory_utilization: float = 0.9, *,
             chunked_prefill: bool = True, step_tokens: int = STEP_TOKENS, max_batch: int = MAX_BATCH,
             lengths: RequestLengths | None = None) -> Estimate:
    """Limits of ``d`` at each batch size in ``batches`` for requests of ``input_tokens`` → ``output_tokens``;
    the closed loop with prompts prefilled in chunks of a ``step_tokens`` budget (or in steps of their own), and
    at most ``max_batch`` sequences a rank at once (the engine's batch limit). ``lengths``: the requests' lengths
    spread as these did (a file's: ``input_tokens`` and ``output_tokens`` are their means), each step's cached
    tokens their `RequestLengths.decode_context` a sequence rather than I + O / 2, and each sequence's reserved
    room their `RequestLengths.room` rather than I + O."""
    eff = efficiency or Efficiency()
    weight_dtype(d.weight_dtype)
    capacity = d.kv_capacity_tokens(gpu_memory_utilization) if d.hardware.memory_gb else None
    mid = lengths.decode_context if lengths else input_tokens + output_tokens / 2
    reserved = lengths.room if lengths else input_tokens + output_tokens
    rows = [_row(d, batch, input_tokens, output_tokens, eff, gpu_memory_utilization, chunked_prefill, step_tokens,
                 max_batch, mid, reserved) for batch in batches]
    turns = (compute_bound_batch(d, mid, BOUND), compute_bound_batch(d, mid, eff), compute_bound_batch(d, 0, BOUND))
    return Estimate(d, eff, input_tokens, output_tokens, gpu_memory_utilization, capacity, *turns, tuple(rows),
                    max_load=max_load(d, input_tokens, output_tokens, eff, gpu_memory_utilization, max_batch,
                                      decode_context=lengths.decode_context if lengths else None,
                                      room_tokens=lengths.room if lengths else None),
                    chunked_prefill=chunked_prefill, step_tokens=step_tokens, max_batch=max_batch, lengths=lengths)
