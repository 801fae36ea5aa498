"""What would it take to see N tokens/s? (``tokometer estimate --target N``)

Two different questions, answered separately, both at the stated (expected) efficiencies:

- **Per request** (one user sees N tok/s): a decode step must take 1/N s, so the weights and the
  request's KV cache must be read N times a second:
  bandwidth needed = (W_read + KV per token × context + 2 × recurrent state) × N / e_bw, in total over the TP
                     group (the state of a linear-attention or state-space model, read and written back a token).
  Batching does not help here; only bandwidth, fewer bytes (quantisation) or TP do.
- **In aggregate** (the server as a whole): for each hardware × weight format, the fewest GPUs
  (TP 1, 2, 4, 8) and the smallest batch b with b / decode step(b) ≥ N whose KV caches fit.
  Aggregate speed grows with b (the weight read is shared), so the smallest such b is found by
  bisection between 1 and the number of sequences that fit.

Context per sequence is taken mid-answer: input + output / 2 tokens; with the requests' own lengths
(``estimate --target N --lengths FILE``), their means for input and output and the tokens a decoding sequence
holds on average over the steps (`tokometer.perf.lengths`: long answers weigh as long as they decode).

The formats searched are those of today's hardware: bf16, fp8, nvfp4, mxfp4 and AWQ (int4), each at its own
peak where the row lists one (`tokometer.perf.quant`). Per request, the answer also names the fastest
**single-GPU** configuration and says plainly when none reaches the target: at batch 1 a step reads the
weights once, so one stream's speed is capped by one GPU's bandwidth over the bytes a token reads, whatever
the batch. Speculative decoding multiplies a stream's speed by at most k + 1 (k draft tokens all accepted,
the draft free: `tokometer.perf.speculative`), so the answer gives the tokens per verify step the fastest
configuration would need. The per-user speeds specialised silicon publishes (Cerebras, SambaNova, Groq:
`tokometer.perf.published.published_per_user`) are shown beside it as context, not as a model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tokometer.perf.collective import communication
from tokometer.perf.hardwarespec import HardwareSpec
from tokometer.perf.lengthsfile import RequestLengths
from tokometer.perf.model import ModelSpec
from tokometer.perf.published import PerUserFigure, published_per_user
from tokometer.perf.quant import normalize_dtype
from tokometer.perf.roofline import Deployment, Efficiency, decode_step_s, kv_format_problem, weight_bytes_read
from tokometer.util.errors import ConfigError

__all__ = ["TARGET_DTYPES", "TargetAnswer", "TargetOption", "reach_target"]

TARGET_DTYPES = ("bf16", "fp8", "nvfp4", "mxfp4", "awq")
TP_SIZES = (1, 2, 4, 8)


@dataclass(frozen=True)
class TargetOption:
    """One hardware × format: fewest GPUs and smallest batch reaching the target in aggregate (if any)."""

    deployment: Deployment
    reached: bool
    batch: int  # the smallest batch that reaches it, else the largest that fits
    aggregate_tok_s: float
    per_request_tok_s: float  # at that batch
    batch1_tok_s: float  # one request alone
    max_sequences: int

    def to_json(self) -> dict[str, Any]:
        d = self.deployment
        return {"hardware": d.hardware.name, "weight_dtype": normalize_dtype(d.weight_dtype),
                "dequantised_to": d.dequantised_to, "tp": d.tp,
                "gpus": d.gpus, "reached": self.reached, "batch": self.batch,
                "aggregate_tok_s": self.aggregate_tok_s, "per_request_tok_s": self.per_request_tok_s,
                "batch1_tok_s": self.batch1_tok_s, "max_sequences": self.max_sequences}


@dataclass(frozen=True)
class TargetAnswer:
    """Both answers: bandwidth needed per request, and the hardware options in aggregate."""

    target: float
    model: ModelSpec
    input_tokens: int
    output_tokens: int
    efficiency: Efficiency
    per_request_bandwidth_gbs: dict[str, float]  # weight format -> GB/s needed for N tok/s per request
    best_per_request: TargetOption | None  # the fastest single request among the options
    options: list[TargetOption] = field(default_factory=list)
    best_single_gpu: TargetOption | None = None  # the fastest single request on one GPU
    specialised: list[PerUserFigure] = field(default_factory=list)  # published per-user speeds, as context
    lengths: RequestLengths | None = None
    """The requests' lengths from a file (``--lengths``): their means are ``input_tokens`` and ``output_tokens``,
    their spread sets `context_tokens`."""

    @property
    def context_tokens(self) -> float:
        """The tokens a decoding sequence holds on average: the lengths' (`RequestLengths.decode_context`), else
        input + output / 2."""
        return self.lengths.decode_context if self.lengths else self.input_tokens + self.output_tokens / 2

    @property
    def tokens_per_step_needed(self) -> float | None:
        """Tokens per verify step speculative decoding would have to yield for the fastest single request to
        reach the target (its speed-up is at most that): target / its batch-1 speed (None: nothing fits)."""
        best = self.best_per_request
        return self.target / best.batch1_tok_s if best else None

    def per_request_lines(self) -> list[str]:
        """The per-request answer in words: the fastest configuration, the fastest single GPU, and what
        speculative decoding would have to give."""
        lines, best, one = [], self.best_per_request, self.best_single_gpu
        if best is not None:
            verdict = "reaches it" if best.reached else "does not reach it"
            lines.append(f"Fastest single request here: {best.deployment.describe()} at {best.batch1_tok_s:,.0f} "
                         f"tok/s: {verdict}.")
        if one is not None and not one.reached:
            d = one.deployment
            lines.append(f"No single-GPU configuration reaches {self.target:,.0f} tok/s per request: a stream's "
                         f"speed is bound by one GPU's bandwidth at batch 1 (the weights are read once a token); "
                         f"the fastest, {d.describe()}, gives {one.batch1_tok_s:,.0f}.")
        elif one is not None:
            lines.append(f"One GPU is enough per request: {one.deployment.describe()} at {one.batch1_tok_s:,.0f} "
                         "tok/s.")
        needed = self.tokens_per_step_needed
        if best is not None and not best.reached and needed is not None:
            lines.append(f"Speculative decoding multiplies a stream's speed by at most k + 1 (k draft tokens all "
                         f"accepted, a free draft): from {best.batch1_tok_s:,.0f} tok/s it would need "
                         f"{needed:,.1f} tokens per verify step (--spec-acceptance shows a given acceptance rate).")
        return lines

    def aggregate_lines(self) -> list[str]:
        """The aggregate answer in one line: the fewest GPUs that reach the target, and whether one GPU does."""
        reached = [o for o in self.options if o.reached]
        if not reached:
            return [f"In aggregate: no hardware and format here reaches {self.target:,.0f} tok/s with up to "
                    f"{TP_SIZES[-1]} GPUs."]
        first = reached[0]
        d = first.deployment
        line = (f"In aggregate: {d.gpus} × {d.hardware.name} in {normalize_dtype(d.weight_dtype)} reach it at batch "
                f"{first.batch:,} ({first.per_request_tok_s:,.1f} tok/s per request)")
        if d.gpus > 1:  # one GPU is tried first on every row: none reached it with one
            line += "; no single GPU does, at any batch that fits"
        return [line + "."]

    def context_lines(self) -> list[str]:
        """The published per-user speeds of specialised silicon, one line each (context, not a model)."""
        if not self.specialised:
            return []
        lines = ["For context, per-user speeds published for chips that keep the weights on chip (not modelled "
                 "here; sources in --json):"]
        for f in self.specialised:
            spec = ", with speculative decoding" if f.speculative else ""
            lines.append(f"  {f.provider} {f.hardware.split(' (')[0]}: {f.model} {f.per_user_tok_s:,.0f} tok/s "
                         f"({f.weights}{spec})")
        return lines

    def to_json(self) -> dict[str, Any]:
        best, one = self.best_per_request, self.best_single_gpu
        return {"target_tok_s": self.target, "model": self.model.name, "input_tokens": self.input_tokens,
                "output_tokens": self.output_tokens, "context_tokens": self.context_tokens,
                "lengths": self.lengths.to_json() if self.lengths else None,
                "per_request": {"bandwidth_needed_gbs": self.per_request_bandwidth_gbs,
                                "reached": bool(best and best.batch1_tok_s >= self.target),
                                "fastest": best.to_json() if best else None,
                                "single_gpu_reached": bool(one and one.reached),
                                "fastest_single_gpu": one.to_json() if one else None,
                                "speculative_tokens_per_step_needed": self.tokens_per_step_needed},
                "aggregate": [o.to_json() for o in self.options],
                "specialised_per_user": [f.to_json() for f in self.specialised]}


def _smallest_batch(d: Deployment, target: float, mid: float, eff: Efficiency, most: int) -> tuple[bool, int]:
    def aggregate(b: int) -> float:
        return b / decode_step_s(d, b, round(b * mid), eff)

    if aggregate(most) < target:
        return False, most
    low, high = 1, most
    while low < high:
        half = (low + high) // 2
        if aggregate(half) >= target:
            high = half
        else:
            low = half + 1
    return True, low


def _option(model: ModelSpec, hw: HardwareSpec, dtype: str, kv_dtype: str | None, target: float, room: float,
            mid: float, eff: Efficiency, utilization: float, free_share: float | None = None) -> TargetOption | None:
    """The first TP size of ``hw`` × ``dtype`` whose smallest batch reaches ``target`` (else the one of most
    throughput), its sequences each holding ``room`` tokens reserved and ``mid`` cached on average; one device
    alone where the hardware's link is unknown (as `_fastest_single_request`)."""
    best: TargetOption | None = None
    if kv_format_problem(kv_dtype or model.default_kv(dtype), hw):
        return None  # it cannot hold that cache (an NVFP4 one off Blackwell)
    for tp in TP_SIZES:
        if model.tp_problem(tp):
            continue  # the model's heads do not split over that many GPUs
        d = Deployment(model, hw, dtype, kv_dtype or model.default_kv(dtype), tp=tp)
        if not communication(d, 1).counted:
            continue  # several devices whose link is unknown: their communication would be left out
        most = d.kv_sequences(round(room), d.kv_memory_share(utilization, free_share))
        if most < 1:
            continue
        reached, batch = _smallest_batch(d, target, mid, eff, most)
        step = decode_step_s(d, batch, round(batch * mid), eff)
        option = TargetOption(d, reached, batch, batch / step, 1 / step,
                              1 / decode_step_s(d, 1, round(mid), eff), most)
        if reached:
            return option
        if best is None or option.aggregate_tok_s > best.aggregate_tok_s:
            best = option
    return best


def _fastest_single_request(model: ModelSpec, hardware: list[HardwareSpec], formats: list[str], kv_dtype: str | None,
                            room: float, context: float, eff: Efficiency,
                            utilization: float, target: float, free_share: float | None = None,
                            tp_sizes: tuple[int, ...] = TP_SIZES) -> TargetOption | None:
    """The fastest batch-1 stream over ``hardware`` × ``formats`` × ``tp_sizes`` whose cache fits one sequence of
    ``room`` tokens, ``context`` tokens cached on average; not over several GPUs whose link is unknown (their
    communication would be left out: a speed not earned)."""
    mid = round(context)
    best: TargetOption | None = None
    for hw in hardware:
        if not hw.memory_gb:
            continue
        for fmt in formats:
            if kv_format_problem(kv_dtype or model.default_kv(fmt), hw):
                continue
            for tp in tp_sizes:
                if model.tp_problem(tp):
                    continue
                d = Deployment(model, hw, fmt, kv_dtype or model.default_kv(fmt), tp=tp)
                if not communication(d, 1).counted:
                    continue
                most = d.kv_sequences(round(room), d.kv_memory_share(utilization, free_share))
                speed = 1 / decode_step_s(d, 1, mid, eff)
                if most >= 1 and (best is None or speed > best.batch1_tok_s):
                    best = TargetOption(d, speed >= target, 1, speed, speed, speed, most)
    return best


def reach_target(model: ModelSpec, target: float, hardware: list[HardwareSpec], dtypes: list[str] | None = None,
                 kv_dtype: str | None = None, input_tokens: int = 1000, output_tokens: int = 1000,
                 efficiency: Efficiency | None = None, gpu_memory_utilization: float = 0.9, *,
                 kv_free_fraction: float | None = None, lengths: RequestLengths | None = None) -> TargetAnswer:
    """Which hardware × weight format × GPUs × batch reach ``target`` tok/s, per request and in aggregate.
    ``kv_dtype`` None: each format's default (`ModelSpec.default_kv`); ``kv_free_fraction``: each deployment's KV
    cache takes that share of the memory its weights leave, instead of ``gpu_memory_utilization`` of the whole;
    ``lengths``: the requests' own lengths, for ``input_tokens``, ``output_tokens``, each step's cached tokens and
    each sequence's reserved room."""
    if target <= 0:
        raise ConfigError(f"--target must be positive (got {target})")
    eff = efficiency or Efficiency()
    formats = [normalize_dtype(t) for t in (dtypes or TARGET_DTYPES)]
    if lengths is not None:
        input_tokens, output_tokens = lengths.input_tokens, lengths.output_tokens
    mid = lengths.decode_context if lengths else input_tokens + output_tokens / 2
    room = lengths.room if lengths else input_tokens + output_tokens
    needed = {}
    for fmt in formats:
        kv = kv_dtype or model.default_kv(fmt)
        holding = [hw for hw in hardware if not kv_format_problem(kv, hw)]
        if hardware and not holding:
            raise ConfigError(f"--kv-dtype {kv}: {kv_format_problem(kv, hardware[0])}; none of the hardware asked "
                              "holds it")
        d = Deployment(model, holding[0], fmt, kv) if holding else None
        if d is not None:
            per_token = weight_bytes_read(d, 1) + d.kv_bytes_per_token * mid + 2 * model.recurrent_bytes_per_sequence
            needed[fmt] = per_token * target / eff.decode_bandwidth / 1e9
    options = []
    for hw in hardware:
        if not hw.memory_gb:
            continue
        for fmt in formats:
            option = _option(model, hw, fmt, kv_dtype, target, room, mid, eff, gpu_memory_utilization,
                             kv_free_fraction)
            if option is not None:
                options.append(option)
    options.sort(key=lambda o: (not o.reached, o.deployment.gpus if o.reached else 0, o.batch if o.reached else 0,
                                -o.aggregate_tok_s))
    args = (model, hardware, formats, kv_dtype, room, mid, eff, gpu_memory_utilization, target, kv_free_fraction)
    best, one = _fastest_single_request(*args), _fastest_single_request(*args, tp_sizes=(1,))
    return TargetAnswer(target, model, input_tokens, output_tokens, eff, needed, best, options, one,
                        published_per_user(), lengths)
