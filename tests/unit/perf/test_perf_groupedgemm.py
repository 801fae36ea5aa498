"""The routed experts' grouped GEMM: each expert's tokens padded to the tile (`tokometer.perf.groupedgemm`), and
the share of the dense efficiency it reaches by the experts' width (`Efficiency.expert_share`)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from tokometer.perf import Deployment, Efficiency, resolve_hardware, resolve_model
from tokometer.perf.groupedgemm import EXACT_UP_TO, EXPERT_TILE_ROWS, padded_expert_rows
from tokometer.perf.roofline import BOUND, decode_step_s, expert_extra_flops


def _binomial_tiles(tokens: int, p: float, tile: int) -> float:
    """E[⌈m / tile⌉] for m ~ Binomial(tokens, p), summed over every m: the definition, term by term."""
    def pmf(m: int) -> float:
        log = (math.lgamma(tokens + 1) - math.lgamma(m + 1) - math.lgamma(tokens - m + 1)
               + m * math.log(p) + (tokens - m) * math.log(1 - p))
        return math.exp(log)

    return sum(pmf(m) * math.ceil(m / tile) for m in range(tokens + 1))


@pytest.mark.parametrize(("tokens", "experts", "k", "tile"), [(10, 8, 2, 4), (64, 128, 4, 16), (300, 16, 1, 32),
                                                              (40, 128, 8, 128)])
def test_the_padded_rows_are_the_binomial_expectation(tokens: int, experts: int, k: int, tile: int) -> None:
    expected = experts * tile * _binomial_tiles(tokens, k / experts, tile)
    assert padded_expert_rows(tokens, experts, k, tile) == pytest.approx(max(tokens * k, expected), rel=1e-9)


def test_a_small_batch_pays_a_whole_tile_for_every_touched_expert() -> None:
    # gpt-oss-120b at batch 8: 32 routings over 128 experts touch 128 × (1 − (1 − 4/128)^8) = 28.4 of them, each
    # a whole 64-row tile (the tile chosen on the fit split): 1,818 rows computed for 32 tokens' worth
    touched = 128 * (1 - (1 - 4 / 128) ** 8)
    assert padded_expert_rows(8, 128, 4) == pytest.approx(touched * EXPERT_TILE_ROWS, rel=1e-9)
    assert EXPERT_TILE_ROWS == 64


def test_a_large_batch_pays_about_half_a_tile_per_expert() -> None:
    # Mixtral at 4,096 tokens: 1,024 per expert, the last tile half full on average (the normal limit)
    assert EXACT_UP_TO < 4096 * 2 / 8
    assert padded_expert_rows(4096, 8, 2) == pytest.approx(8 * 64 * (1024 / 64 + 0.5))
    # and where the exact sum hands over to the limit the two agree within a per cent
    tokens = int(EXACT_UP_TO * 16)  # 200 tokens an expert for k / E = 1 / 16
    exact = 128 * 64 * _binomial_tiles(tokens, 1 / 16, 64)
    assert padded_expert_rows(tokens, 128, 8) == pytest.approx(exact, rel=0.01)


def test_no_tokens_no_rows_and_never_fewer_than_the_routings() -> None:
    assert padded_expert_rows(0, 128, 8) == 0.0
    assert padded_expert_rows(5, 0, 8) == 0.0
    assert padded_expert_rows(3, 2, 2) == 2 * 64  # every token reaches both experts: one tile each
    for tokens in (1, 7, 100, 1000, 20_000):
        assert padded_expert_rows(tokens, 128, 8) >= tokens * 8


def test_the_experts_share_of_the_dense_efficiency_grows_with_their_width() -> None:
    typical = Efficiency()
    assert typical.expert_half_width == 3072
    qwen = resolve_model("qwen3-30b-a3b")
    assert resolve_model("mixtral-8x7b").routed_expert_width == 14_336
    assert qwen.routed_expert_width == 768  # its moe_intermediate_size
    assert resolve_model("llama-4-maverick").routed_expert_width == 8192  # experts in every other layer
    assert resolve_model("deepseek-v3").routed_expert_width == 2048  # not its dense layers' 18,432
    # without a stated width, the experts' parameters over layers × 3 × hidden (an undercount where only some
    # layers have experts: Maverick's would be 4,090)
    unstated = replace(resolve_model("llama-4-maverick"), expert_width=0)
    assert unstated.routed_expert_width == pytest.approx(unstated.expert_params / 128 / 48 / (3 * 5120))
    assert typical.expert_share(768) == pytest.approx(768 / 3840)  # 20 %
    assert typical.expert_share(14_336) == pytest.approx(14_336 / 17_408)  # 82 %
    assert Efficiency(expert_half_width=0).expert_share(768) == 1.0 and BOUND.expert_share(768) == 1.0
    # the extra FLOPs: the padded rows at that share, less the dense count
    d = Deployment(qwen, resolve_hardware("B200"), "nvfp4", "fp8")
    per_expert = qwen.expert_params / 128
    extra = 2 * per_expert * (padded_expert_rows(512, 128, 8) / typical.expert_share(qwen.routed_expert_width)
                              - 8 * 512)
    assert expert_extra_flops(d, 512, typical) == pytest.approx(extra)
    assert expert_extra_flops(d, 512, BOUND) == 0  # the bound has no kernel's padding
    assert expert_extra_flops(Deployment(resolve_model("llama-3.1-8b"), resolve_hardware("B200")), 512, typical) == 0
    # so a compute-bound step of narrow experts is slower than its dense count says
    assert decode_step_s(d, 4096, 0, typical) > decode_step_s(d, 4096, 0, Efficiency(expert_half_width=0))


def test_the_share_is_taken_at_the_experts_whole_width_however_they_are_split() -> None:
    """Each expert split over the TP GPUs (the default without --ep: TensorRT-LLM's release-0.17 engines, vLLM,
    SGLang) gives each GPU fewer tiles of the same depth, not narrower ones: its grouped GEMM is counted at the
    expert's whole width, as with whole experts on each GPU (--ep). Counted at 1/TP of it until 2026-12-06, DeepSeek
    R1 split over 8 H200s at 8-64 users came out 3.4-4.5 × slower than published (the fit split's InferenceX rows)."""
    typical, mixtral, h100 = Efficiency(), resolve_model("mixtral-8x7b"), resolve_hardware("H100-SXM")
    one = Deployment(mixtral, h100, "fp8", "fp8")
    split = Deployment(mixtral, h100, "fp8", "fp8", tp=8)
    whole = Deployment(mixtral, h100, "fp8", "fp8", tp=8, expert_parallel=True)
    assert (one.expert_gemm_width, split.expert_gemm_width, whole.expert_gemm_width) == (14_336, 14_336, 14_336)
    assert typical.expert_share(split.expert_gemm_width) == pytest.approx(14_336 / 17_408)  # 82 %, not 37 %
    per_expert = mixtral.expert_params / 8
    for d in (one, split, whole):
        extra = 2 * per_expert * (padded_expert_rows(2048, 8, 2) / typical.expert_share(d.expert_gemm_width)
                                  - 2 * 2048)
        assert expert_extra_flops(d, 2048, typical) == pytest.approx(extra)
    assert expert_extra_flops(split, 2048, typical) == expert_extra_flops(whole, 2048, typical)
    # DeepSeek R1 over 8 H200s at 64 users, each expert split: its 256 experts of 2,048 at 40 % of the dense
    # efficiency (2,048 / 5,120), not 7.7 % (256 / 3,328), so the padded tiles of a decode step cost 5.2 × less
    r1 = Deployment(resolve_model("deepseek-r1"), resolve_hardware("H200-SXM"), "fp8", "bf16", tp=8)
    assert typical.expert_share(r1.expert_gemm_width) == pytest.approx(0.4)
    # the explanation says which width it took
    from tokometer.perf import estimate
    from tokometer.perf.explain import explain

    text = explain(estimate(split, [64], 1000, 1000, typical))
    assert "14,336 / (14,336 + 3,072) = 82%" in text and "each split over the 8 GPUs" in text
