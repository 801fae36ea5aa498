"""The batch limit trtllm-bench chooses when told none (`tokometer.perf.trtllmbench`), worked by hand from its rule."""

from __future__ import annotations

import math

import pytest

from tokometer.perf.hardware import resolve_hardware
from tokometer.perf.loaders import resolve_model
from tokometer.perf.published import figure_from_row, published_figures
from tokometer.perf.roofline import Deployment
from tokometer.perf.trtllmbench import UNTUNED_MAX_BATCH, tuned_max_batch
from tokometer.util.units import GIB


def _deployment(model: str, hardware: str, dtype: str, kv: str, tp: int = 1, **kw: bool) -> Deployment:
    return Deployment(resolve_model(model), resolve_hardware(hardware), dtype, kv, tp=tp, **kw)


def test_deepseek_r1_over_eight_h200s_counts_its_128_heads_of_56() -> None:
    # The harness's KV a token: 2 × 61 layers × 128 KV heads × (7168 / 128) × 1 B (fp8) = 874,496 B, not the
    # 35,136 B of the latent the engine keeps; the engine 671 B elements × 1 B; 8 × 141 GiB of memory.
    d = _deployment("deepseek-r1", "H200-SXM", "fp8", "fp8", tp=8, expert_parallel=True, attention_dp=True)
    requests = (8 * 141 - 671e9 / GIB) * 0.9 / (874_496 / GIB * 2000)
    assert 256 <= requests < 384  # 278: rounded up to a multiple of 128
    assert tuned_max_batch(d, 1000, 1000) == 384


def test_short_shapes_reach_the_cap_of_4096_and_long_ones_round_to_32() -> None:
    d = _deployment("llama-3.1-8b", "H200-SXM", "fp8", "fp8")
    assert tuned_max_batch(d, 128, 128) == 4096
    # 20,000 → 2,000: 2 × 32 × 8 × 128 B = 64 KiB a token; (141 − 8.03 B / GiB) × 0.9 / (64 KiB × 22,000) = 88.6
    requests = (141 - 8.03e9 / GIB) * 0.9 / (65_536 / GIB * 22_000)
    assert tuned_max_batch(d, 20_000, 2000) == 32 * math.ceil(requests / 32) == 96


def test_a_4_bit_checkpoint_counts_its_packed_elements() -> None:
    # Llama 3.3 70B in NVFP4: (70.55 B − 2.10 B embeddings) × (1/2 + 1/16) + 2.10 B elements, × 0.5 B each
    m = resolve_model("llama-3.3-70b")
    elements = (m.params - m.embedding_params) * (0.5 + 1 / 16) + m.embedding_params
    requests = (180 - elements * 0.5 / GIB) * 0.9 / (2 * 80 * 8 * 128 / GIB * 2000)
    assert 384 < requests < 512
    assert tuned_max_batch(_deployment("llama-3.3-70b", "B200", "nvfp4", "fp8"), 1000, 1000) == 512
    # an NVFP4 cache: the harness counts its element at half a byte (its BYTES_PER_ELEM for NVFP4)
    requests = (180 - elements * 0.5 / GIB) * 0.9 / (80 * 8 * 128 / GIB * 2000)
    assert 768 < requests < 1024
    assert tuned_max_batch(_deployment("llama-3.3-70b", "B200", "nvfp4", "nvfp4"), 1000, 1000) == 1024


def test_pipeline_stages_divide_the_count_and_small_ones_round_up_to_64() -> None:
    one = _deployment("llama-3.3-70b", "RTX-PRO-6000", "nvfp4", "fp8")
    two = Deployment(one.model, one.hardware, "nvfp4", "fp8", pp=2)
    assert tuned_max_batch(one, 32_768, 1024) == 64  # 8.4 requests: the floor of 64
    assert tuned_max_batch(two, 1000, 1000) <= tuned_max_batch(one, 1000, 1000) * 2


def test_a_format_the_heuristic_does_not_tune_gets_the_llm_api_default() -> None:
    # gpt-oss ships its experts in MXFP4, a format calc_engine_setting does not tune: max_batch_size 2,048
    d = _deployment("gpt-oss-120b", "H200-SXM", "bf16", "bf16")
    assert tuned_max_batch(d, 1000, 1000) == UNTUNED_MAX_BATCH == 2048


def test_the_perf_overview_rows_take_the_harness_and_their_dataset() -> None:
    rows = [f for f in published_figures() if f.harness == "trtllm-bench"]
    assert len(rows) == 394 and all("PyTorch backend" in f.engine for f in rows)
    assert all(f.requests in (1000, 1500, 3000, 30000) for f in rows)
    # DeepSeek R1 over four B200s, attention data parallel: 384 a rank, 1,536 in all, under the dataset's 3,000
    r1 = next(f for f in rows if f.model == "deepseek-r1" and f.hardware == "B200" and f.input_tokens == 1000)
    assert r1.batch_cap() == 384
    # the dataset caps a rank at its share: 1,000 requests over four ranks
    long = next(f for f in rows if f.model == "deepseek-r1" and f.hardware == "B200" and f.output_tokens == 32768)
    assert long.batch_cap() == min(tuned_max_batch(long.deployment(), 1024, 32768), 250)


def test_an_unknown_harness_is_refused() -> None:
    row = {"model": "llama-3.1-8b", "hardware": "H100-SXM", "tp": "1", "weight_dtype": "fp8", "kv_dtype": "fp8",
           "input_tokens": "128", "output_tokens": "128", "output_tok_s": "1000", "engine": "x", "source": "y",
           "note": "", "split": "held-out", "harness": "genai-perf"}
    with pytest.raises(ValueError, match="harness 'genai-perf' is not known"):
        figure_from_row(row)
