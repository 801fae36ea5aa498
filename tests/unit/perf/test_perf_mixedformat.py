"""A mixture of experts whose experts have their own format multiplies them at that format's peak
(`tokometer.perf.mixedformat`): gpt-oss's mxfp4 experts on the fp4 units of a B200, the rest in bf16."""

from __future__ import annotations

import pytest

from tokometer.perf import Deployment, Efficiency
from tokometer.perf.catalog import BUILTIN_MODELS
from tokometer.perf.hardware import resolve_hardware
from tokometer.perf.mixedformat import expert_compute_peak
from tokometer.perf.roofline import decode_flops, decode_step_s, expert_extra_flops


def _d(model: str, hw: str, dtype: str | None = None) -> Deployment:
    m = BUILTIN_MODELS[model]
    return Deployment(m, resolve_hardware(hw), dtype or m.native_dtype)


def test_gpt_oss_120b_on_a_b200_by_hand() -> None:
    """M = 5.1309 B multiplied per token, of which the 4 of 128 experts' 114.70 B × 4 / 128 = 3.5845 B in
    mxfp4 at 9,000 TFLOP/s and 1.5464 B in bf16 at 2,250: 5.1309 / (1.5464 / 2250 + 3.5845 / 9000) = 4,726.5."""
    d = _d("gpt-oss-120b", "B200")
    assert d.weight_format == "bf16, experts mxfp4" and d.compute_dtype == "bf16"
    peak = expert_compute_peak(d.model, d.weight_dtype, d.hardware, d.compute_dtype)
    assert peak is not None and peak.dtype == "fp4" and peak.flops == 9000e12
    assert d.compute_flops == pytest.approx(4726.5e12, rel=1e-4)
    assert d.compute_peak is not None and d.compute_peak.flops == 2250e12  # the weights' own peak is unchanged


@pytest.mark.parametrize(("model", "hw", "dtype"), [
    ("gpt-oss-120b", "H100-SXM", None),  # no fp4 column: the experts are dequantised, bf16 for all
    ("llama-3.3-70b", "B200", "bf16"),  # dense
    ("qwen3-30b-a3b", "B200", "fp8"),  # experts in the weights' format
    ("gpt-oss-120b", "B200", "fp8"),  # not the native format: every part in fp8
])
def test_no_blend_without_an_experts_peak_of_their_own(model: str, hw: str, dtype: str | None) -> None:
    d = _d(model, hw, dtype)
    experts = expert_compute_peak(d.model, d.weight_dtype, d.hardware, d.compute_dtype)
    assert experts is None or d.compute_peak == experts
    assert d.compute_peak is not None and d.compute_flops == d.compute_peak.flops


def test_a_compute_bound_step_runs_its_experts_at_the_fp4_peak() -> None:
    d = _d("gpt-oss-120b", "B200")
    eff = Efficiency(expert_half_width=0.0)  # the grouped GEMM at the dense efficiency: only its tiles' padding left
    batch = 4096
    step = decode_step_s(d, batch, 0, eff)
    bf16_only = decode_flops(d.model, batch, 0) / (2250e12 * eff.decode_compute * d.compute_scale)
    assert step < bf16_only  # what the step took when every FLOP ran at the bf16 peak
    # the blended peak over the FLOPs with the experts' rows padded to the tile, and the fixed per-layer cost of
    # the step (36 layers)
    padded = decode_flops(d.model, batch, 0) + expert_extra_flops(d, batch, eff)
    assert padded > decode_flops(d.model, batch, 0)
    # (at the B200's sustained GEMM share over the fit GPUs': `Deployment.compute_scale`, 0.79)
    assert d.compute_scale == pytest.approx(0.549 / 0.693)
    assert step == pytest.approx(padded / (4726.5e12 * eff.decode_compute * d.compute_scale)
                                 + 36 * eff.layer_overhead_s, rel=1e-3)
