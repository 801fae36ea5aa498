"""The peak FLOP/s of a model whose routed experts have a format of their own (gpt-oss: experts in mxfp4,
attention and the rest in bf16).

The experts' matmuls run at the peak of the experts' format where the hardware lists one (a B200's fp4
column for mxfp4 experts), the rest at the weights' format's peak. With M the parameters a token is
multiplied with (`ModelSpec.matmul_params`) and M_e the routed experts' share of them (the k experts a token
reaches: expert parameters × k / E), a token's matmuls take

    (M − M_e) / F + M_e / F_e          seconds per 2 FLOPs,

so the one peak the roofline divides by is their matmul-weighted harmonic blend

    F_blend = M / ((M − M_e) / F + M_e / F_e).

The attention's FLOPs over the cache are divided by the blend too (they run in the 16-bit format, so the
bound is optimistic by their share: a few per cent of a step at the usual contexts). Where the hardware has no
peak for the experts' format (fp4 on an H100), or the experts share the weights' format, F_e = F and the
blend is F itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tokometer.perf.quant import weight_dtype

if TYPE_CHECKING:  # a leaf below the roofline: it takes the deployment's parts, not the deployment
    from tokometer.perf.hardwarespec import ComputePeak, HardwareSpec
    from tokometer.perf.model import ModelSpec

__all__ = ["blended_flops", "expert_compute_peak"]


def expert_compute_peak(m: ModelSpec, dtype: str, hardware: HardwareSpec, compute_dtype: str) -> ComputePeak | None:
    """The peak ``m``'s routed experts multiply at on ``hardware`` when it runs in ``dtype`` (multiplied in
    ``compute_dtype``); None: dense, no compute figure, or the experts multiply in ``compute_dtype`` too."""
    if not m.is_moe:
        return None
    compute = hardware.multiplies_in(weight_dtype(m.expert_format(dtype)))
    if compute == compute_dtype:
        return None
    return hardware.compute_peak(compute)


def blended_flops(m: ModelSpec, dtype: str, hardware: HardwareSpec, compute_dtype: str, flops: float) -> float:
    """``flops`` (the weights' format's peak) blended with the experts' own peak, and with the 16-bit peak for the
    modules the checkpoint keeps in 16 bits (``ModelSpec.kept_params``, every token's; ``kept_expert_params``, k / E
    of them a token's) when it runs in its own format: M / ((M − M_e − M_16) / F + M_e / F_e + M_16 / F_16)."""
    peak = expert_compute_peak(m, dtype, hardware, compute_dtype)
    expert_flops = peak.flops if peak else flops
    sixteen = hardware.compute_peak(hardware.multiplies_in(weight_dtype("bf16")))
    share = m.experts_per_token / m.experts if m.is_moe else 0.0  # of the routed experts' parameters, a token's
    kept_experts = min(m.kept_expert_params, m.expert_params) if m.is_native(dtype) and sixteen else 0.0
    kept = m.kept_params + kept_experts * share if m.is_native(dtype) and sixteen else 0.0
    if expert_flops == flops and not kept:
        return flops
    total = m.matmul_params
    kept = min(kept, total)
    experts = min((m.expert_params - kept_experts) * share, total - kept)
    kept_time = kept / sixteen.flops if kept and sixteen else 0.0
    return total / ((total - experts - kept) / flops + experts / expert_flops + kept_time)
