"""The roofline arithmetic, pinned to textbook cases worked by hand in the comments."""

from __future__ import annotations

import math
from typing import Any

import pytest

from tokometer.perf import Deployment, Efficiency, decode_step_s, prefill_s, resolve_hardware, resolve_model
from tokometer.perf.collective import communication_s
from tokometer.perf.roofline import (
    BOUND,
    compute_bound_batch,
    decode_flops,
    decode_limiter,
    mixed_step_s,
    pipeline_microbatch,
    pipeline_share,
    prefill_flops,
    weight_bytes_read,
)
from tokometer.util.errors import ConfigError

GIB = 2**30
H100_BW = 3350e9  # B/s
H100_BF16 = 989e12  # FLOP/s
LLAMA_8B = 8.03e9
LLAMA_VOCAB_X_HIDDEN = 128256 * 4096  # 525,336,576: the input table (untied) and, again, the LM head
# The activations one token's matmuls read and write, per layer: QKV in (4,096) and out (4,096 + 2 × 1,024), the
# output projection in (4,096) and out (4,096), the MLP in and out (2 × 4,096) and its width: the layer's matmul
# parameters (7,504,663,424 − 525,336,576) / 32 = 218,103,964 less the attention's 41,943,040, over 4,096 =
# 43,008.04 (3 × 14,336 + norms). 69,632.04 a layer × 32 = 2,228,225.2 elements × 2 B = 4.456 MB a token.
LLAMA_8B_ACTIVATION_BYTES = 2 * 32 * (2 * 4096 + 2 * 4096 + 2 * 1024 + 2 * 4096
                                      + ((LLAMA_8B - 2 * LLAMA_VOCAB_X_HIDDEN) / 32 - 41_943_040) / 4096)


def llama_h100(**kw: Any) -> Deployment:
    return Deployment(resolve_model("llama-3.1-8b"), resolve_hardware("H100-SXM"), **kw)


def test_llama_8b_bf16_on_h100_at_batch_1() -> None:
    d = llama_h100()
    # weights: 8.03 B params × 2 B = 16.06 GB
    assert d.weight_bytes == pytest.approx(16.06e9, rel=1e-12)
    # KV per token: 2 (K, V) × 32 layers × 8 KV heads × 128 head dim × 2 B = 131,072 B = 128 KiB
    assert d.kv_bytes_per_token == 131_072 == 128 * 1024
    assert d.model.activation_elements_per_token * 2 == pytest.approx(LLAMA_8B_ACTIVATION_BYTES, rel=1e-12)
    assert pytest.approx(4.456e6, rel=1e-3) == LLAMA_8B_ACTIVATION_BYTES
    # decode bound, empty cache: (16.06e9 + 4.456e6) B / 3.35e12 B/s = 4.795 ms -> 208.5 tok/s
    step = decode_step_s(d, 1, 0)
    assert step == pytest.approx((16.06e9 + LLAMA_8B_ACTIVATION_BYTES) / H100_BW, rel=1e-12)
    assert 1 / step == pytest.approx(208.54, abs=0.01)
    # with 1,500 tokens cached: (16.06e9 + 4.456e6 + 1,500 × 131,072) / 3.35e12 = 4.854 ms -> 206.0 tok/s
    assert decode_step_s(d, 1, 1500) == pytest.approx(
        (16.06e9 + LLAMA_8B_ACTIVATION_BYTES + 1500 * 131_072) / H100_BW, rel=1e-12)
    # the expected figure at 82.5 % of bandwidth (decode is bandwidth bound here) and 70 µs for each of 32 layers
    assert decode_step_s(d, 1, 0, Efficiency()) == pytest.approx(
        (16.06e9 + LLAMA_8B_ACTIVATION_BYTES) / (0.825 * H100_BW) + 32 * 70e-6, rel=1e-12)


def test_kv_capacity_matches_the_vllm_planner() -> None:
    # 80 GiB × 0.9 = 77,309,411,328 B − 16,060,000,000 B weights − 2 GiB reserve = 59,101,927,680 B
    # / 131,072 B per token = 450,911 tokens (tests/unit/engines/test_engines_vllm.py has the same number)
    assert llama_h100().kv_capacity_tokens() == 450_911
    assert llama_h100().kv_budget_bytes() == 59_101_927_680 and llama_h100().usable_memory_bytes() == 77_309_411_328
    assert llama_h100().kv_capacity_tokens(0.5) == (int(80 * GIB * 0.5) - 16_060_000_000 - 2 * GIB) // 131_072


def test_decode_turns_compute_bound_at_the_ridge() -> None:
    d = llama_h100()
    # a token is multiplied with 8.03e9 − 525,336,576 (the input table is a lookup) = 7,504,663,424 params
    assert d.model.matmul_params == LLAMA_8B - LLAMA_VOCAB_X_HIDDEN
    # compute time per sequence = 2 × 7,504,663,424 / 989e12 = 15.18 µs; weight read = 4.794 ms, and each
    # sequence's activations 4.456 MB / 3.35e12 = 1.33 µs more -> compute bound from batch
    # ⌈4.794 ms / (15.18 − 1.33) µs⌉ = ⌈346.2⌉ = 347 (short contexts)
    ridge = (16.06e9 / H100_BW) / (2 * (LLAMA_8B - LLAMA_VOCAB_X_HIDDEN) / H100_BF16
                                   - LLAMA_8B_ACTIVATION_BYTES / H100_BW)
    assert compute_bound_batch(d, 0) == math.ceil(ridge) == 347
    assert decode_step_s(d, 400, 0) == pytest.approx(2 * d.model.matmul_params * 400 / H100_BF16, rel=1e-12)
    # with 1,500 tokens cached per sequence each one's KV read (196.6 MB: 58.7 µs) outweighs its FLOPs
    # (2 × 7.50e9 + 524,288 × 1,500 = 15.8 GFLOP: 16.0 µs), so decode never turns compute bound
    assert compute_bound_batch(d, 1500) is None


def test_prefill_is_compute_bound_with_the_weight_read_as_floor() -> None:
    d = llama_h100()
    # attention: 2 × 32 layers × 32 heads × (128 + 128) = 524,288 FLOPs per (query, key) pair
    assert d.model.attention_flops_per_pair == 524_288
    # 1,000 tokens: 2 × (7,504,663,424 − 525,336,576) × 1,000 + 2 × 525,336,576 (LM head, last token only)
    #   + 524,288 × 1,000 × 1,001 / 2 = 14,222,110,513,152 FLOPs / 989e12 = 14.38 ms
    assert prefill_flops(d.model, 1000) == 14_222_110_513_152
    assert prefill_s(d, 1000) == pytest.approx(14_222_110_513_152 / H100_BF16, rel=1e-12)
    assert prefill_s(d, 1000, 0, Efficiency()) == pytest.approx(14_222_110_513_152 / (0.6 * H100_BF16)
                                                                + 32 * 70e-6, rel=1e-12)
    # one token: the weight (and activation) read dominates: (16.06e9 + 4.456e6 + 131,072) / 3.35e12
    assert prefill_s(d, 1) == pytest.approx((16.06e9 + LLAMA_8B_ACTIVATION_BYTES + 131_072) / H100_BW, rel=1e-12)
    # 100 tokens after 900 cached: pairs = 100 × 900 + 100 × 101 / 2 = 95,050
    assert prefill_flops(d.model, 100, 900) == 2 * (d.model.matmul_params - LLAMA_VOCAB_X_HIDDEN) * 100 + (
        2 * LLAMA_VOCAB_X_HIDDEN + 524_288 * 95_050)
    # two prompts of 50 at once: two LM-head runs, pairs 2 × 50 × 51 / 2
    assert prefill_flops(d.model, 100, 0, sequences=2) == 2 * (d.model.matmul_params - LLAMA_VOCAB_X_HIDDEN) * 100 + (
        4 * LLAMA_VOCAB_X_HIDDEN + 524_288 * 2550)
    assert decode_flops(d.model, 2, 10) == 4 * d.model.matmul_params + 524_288 * 10


def test_tensor_and_pipeline_parallel() -> None:
    tp2 = llama_h100(tp=2)
    assert tp2.weight_bytes_per_gpu == pytest.approx(8.03e9)
    assert tp2.kv_bytes_per_token_per_gpu == 65_536  # 4 of the 8 KV heads on each GPU
    # half the bytes a GPU, and 2 × 32 all-reduces of one token's 4096 bf16 activations (8 KiB) over NVLink: the
    # custom all-reduce's measured 8.8 µs at 4 KiB and 8.7 at 32 KiB over 2 GPUs, 8.77 µs at 8 KiB (log-log)
    assert decode_step_s(tp2, 1, 0) == pytest.approx(decode_step_s(llama_h100(), 1, 0) / 2 + 64 * 8.767e-6, rel=1e-4)
    tp16 = llama_h100(tp=16)
    assert tp16.kv_bytes_per_token_per_gpu == 2 * 32 * 1 * 128 * 2  # fewer KV heads than GPUs: replicated
    pp2 = llama_h100(pp=2)
    assert pp2.weight_bytes_per_gpu == pytest.approx(8.03e9)
    assert pp2.kv_bytes_per_token_per_gpu == 65_536  # 16 of the 32 layers on each stage
    assert decode_step_s(pp2, 1, 1000) == decode_step_s(llama_h100(), 1, 1000)  # latency not reduced
    # with sequences to spare the engine keeps 2 microbatches in flight, one on each stage: a token's step is the
    # whole model's at half the batch (and half its cached tokens), and both microbatches advance in it
    assert pipeline_microbatch(pp2, 64) == 32 and pipeline_microbatch(pp2, 1) == 1 and pipeline_microbatch(pp2, 3) == 2
    assert decode_step_s(pp2, 64, 64_000) == decode_step_s(llama_h100(), 32, 32_000)
    # (one prompt's 512 tokens: each microbatch's share is half of that prompt, not a prompt of 256)
    assert mixed_step_s(pp2, 64, 64_000, 512) == mixed_step_s(llama_h100(), 32, 32_000, 256, sequences=0.5)
    assert decode_step_s(llama_h100(pp=4), 64, 64_000) == decode_step_s(llama_h100(), 16, 16_000)
    assert pipeline_microbatch(tp2, 64) == 64  # no pipeline: the batch itself
    # the microbatch's share of the step's cached and prompt tokens: ⌈3 / 2⌉ = 2 of 3; all of it without pipelining
    assert pipeline_share(pp2, 64) == 0.5 and pipeline_share(pp2, 3) == 2 / 3 and pipeline_share(pp2, 1) == 1
    assert pipeline_share(tp2, 64) == 1
    with pytest.raises(ConfigError, match="at least 1"):
        llama_h100(tp=0)


def test_quantised_weights() -> None:
    embeddings = 2 * LLAMA_VOCAB_X_HIDDEN  # untied: input table + LM head stay in 16 bits
    fp8 = llama_h100(weight_dtype="fp8")
    assert fp8.weight_bytes == pytest.approx((LLAMA_8B - embeddings) * 1 + embeddings * 2)  # 9.08 GB
    assert fp8.compute_flops == 1979e12  # W8A8 runs on the fp8 tensor cores
    awq = llama_h100(weight_dtype="AWQ")
    assert awq.weight_bytes == pytest.approx((LLAMA_8B - embeddings) * 4.15625 / 8 + embeddings * 2)  # 5.73 GB
    assert awq.compute_flops == 989e12  # weight-only: dequantised to 16 bits
    gguf = llama_h100(weight_dtype="q4_k_m")
    assert gguf.weight_bytes == pytest.approx(LLAMA_8B * 4.89 / 8)  # whole-file average bits per weight
    assert llama_h100(kv_dtype="fp8").kv_bytes_per_token == 65_536
    with pytest.raises(ConfigError, match="unknown weight dtype"):
        llama_h100(weight_dtype="int3")
    with pytest.raises(ConfigError, match="unknown KV-cache dtype"):
        llama_h100(kv_dtype="int2")


def test_mixture_of_experts_reads_the_experts_its_tokens_reach() -> None:
    d = Deployment(resolve_model("mixtral-8x7b"), resolve_hardware("H100"), tp=2)
    m = d.model
    # routed experts: (46.70e9 − 12.88e9) × 8 / (8 − 2) = 45.09e9; shared (attention, embeddings) 1.61e9
    assert m.expert_params == pytest.approx((46.70e9 - 12.88e9) * 8 / 6)
    share = m.expert_params / m.params
    # one token reaches 2 of 8 experts per layer: 1 − (1 − 2/8)^1 = 25 %
    assert weight_bytes_read(d, 1) == pytest.approx(d.weight_bytes * (1 - share + share * 0.25))
    assert weight_bytes_read(d, 1) == pytest.approx(2 * 12.88e9)  # = the active parameters
    # 16 tokens: 1 − 0.75^16 = 99.0 % of the experts
    assert weight_bytes_read(d, 16) == pytest.approx(d.weight_bytes * (1 - share + share * (1 - 0.75**16)))
    activations = m.activation_elements_per_token * 2 / 2  # 2 B each, half on each GPU
    assert decode_step_s(d, 1, 0) == pytest.approx((2 * 12.88e9 / 2 + activations) / H100_BW + communication_s(d, 1))


def test_multi_head_latent_attention_cache() -> None:
    d = Deployment(resolve_model("deepseek-v3"), resolve_hardware("H200"), "fp8", "bf16", tp=8)
    # 61 layers × (512 latent + 64 RoPE) × 2 B = 70,272 B per token, the same on every TP rank
    assert d.kv_bytes_per_token == 70_272
    assert d.kv_bytes_per_token_per_gpu == 70_272
    assert d.model.active == 37e9 and d.model.is_moe


def test_efficiency_must_be_a_fraction() -> None:
    with pytest.raises(ConfigError, match="decode_bandwidth"):
        Efficiency(decode_bandwidth=1.5)
    with pytest.raises(ConfigError, match="prefill_compute"):
        Efficiency(prefill_compute=0)


def test_the_attention_follows_the_matmuls_and_does_not_hide_under_them() -> None:
    d = llama_h100()
    # 400 sequences with 1,500 tokens cached each: the matmuls are compute bound (2 × 7.50e9 × 400 FLOPs:
    # 6.07 ms against the weights' 4.79 ms), and the attention then reads 600,000 × 131,072 B (23.5 ms)
    matmuls = 2 * d.model.matmul_params * 400 / H100_BF16
    assert matmuls > 16.06e9 / H100_BW
    assert decode_step_s(d, 400, 600_000) == pytest.approx(matmuls + 600_000 * 131_072 / H100_BW, rel=1e-12)
    # one kernel hiding the other (max of all reads and all FLOPs) would have said 23.5 + 4.79 ms
    assert decode_step_s(d, 400, 600_000) > (16.06e9 + 600_000 * 131_072) / H100_BW
    assert decode_limiter(d, 400, 0) == "compute" and decode_limiter(d, 400, 600_000) == "bandwidth"


def test_each_layer_costs_a_fixed_time_a_step_but_not_in_the_bound() -> None:
    d = llama_h100()
    typical, without = Efficiency(), Efficiency(layer_overhead_s=0.0)
    assert BOUND.layer_overhead_s == 0 and typical.layer_overhead_s == 70e-6
    for batch, context in ((1, 0), (64, 64_000), (512, 0)):
        assert decode_step_s(d, batch, context, typical) == pytest.approx(
            decode_step_s(d, batch, context, without) + 32 * 70e-6, rel=1e-12)
    assert prefill_s(d, 1000, 0, typical) == pytest.approx(prefill_s(d, 1000, 0, without) + 32 * 70e-6, rel=1e-12)
    with pytest.raises(ConfigError, match="layer_overhead_s"):
        Efficiency(layer_overhead_s=-1e-6)
