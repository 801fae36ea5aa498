"""Sparse attention (DeepSeek Sparse Attention: DeepSeek V3.2, GLM-5): the whole cache kept, an indexer scoring every
cached token from its own fp8 keys, the attention over the top 2,048 (`tokometer.perf.model`).

The shapes are V3.2's config.json (index_topk 2048, index_n_heads 64, index_head_dim 128) and GLM-5's published
indexer schedule; every expected number below is worked by hand from them.
"""

from __future__ import annotations

import pytest

from tokometer.perf.catalog import BUILTIN_MODELS
from tokometer.perf.hardware import resolve_hardware
from tokometer.perf.loaders import model_from_config
from tokometer.perf.roofline import Deployment, decode_step_s, prefill_flops_split
from tokometer.util.errors import ConfigError

V32 = BUILTIN_MODELS["deepseek-v3.2"]
V31 = BUILTIN_MODELS["deepseek-v3.1"]
_V3 = {"model_type": "deepseek_v32", "hidden_size": 7168, "num_attention_heads": 128, "num_key_value_heads": 128,
       "num_hidden_layers": 61, "vocab_size": 129280, "intermediate_size": 18432, "moe_intermediate_size": 2048,
       "n_routed_experts": 256, "n_shared_experts": 1, "num_experts_per_tok": 8, "first_k_dense_replace": 3,
       "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128,
       "max_position_embeddings": 163840, "quantization_config": {"quant_method": "fp8"},
       "index_topk": 2048, "index_n_heads": 64, "index_head_dim": 128}


def h200(model=V32, kv: str = "bf16", tp: int = 8) -> Deployment:
    return Deployment(model, resolve_hardware("H200"), "fp8", kv, tp=tp)


def test_the_config_and_the_table_row_agree_and_v3_1_stays_dense() -> None:
    read = model_from_config(_V3, "deepseek-ai/DeepSeek-V3.2")
    fields = ("sparse_topk", "indexer_heads", "indexer_head_dim", "indexer_layer_count")
    assert {f: getattr(read, f) for f in fields} == {f: getattr(V32, f) for f in fields} == {
        "sparse_topk": 2048, "indexer_heads": 64, "indexer_head_dim": 128, "indexer_layer_count": 61}
    assert V31.sparse_topk == V31.indexer_layer_count == 0 and V31.indexer_bytes_per_token == 0


def test_the_cache_keeps_every_token_with_the_indexer_keys_beside_the_latent() -> None:
    # a token, all 61 layers: latent (512 + 64) × 2 B (bf16) and the indexer's 128 fp8 + a 4-byte scale
    assert h200(V31).kv_bytes_per_token == 61 * 576 * 2 == 70_272
    assert h200().kv_bytes_per_token == 70_272 + 61 * 132 == 78_324
    assert h200(kv="fp8").kv_bytes_per_token == 61 * 576 + 61 * 132  # the indexer is fp8 whatever the cache
    # nothing leaves the cache: a sequence of 100,000 tokens holds all of them, whole on every TP rank
    assert h200().kv_bytes_per_sequence(100_000) == pytest.approx(100_000 * 78_324)
    assert h200().kv_bytes_per_sequence_per_gpu(100_000) == pytest.approx(100_000 * 78_324)


def test_a_decode_step_reads_the_top_k_of_the_latent_and_every_indexer_key() -> None:
    d, dense = h200(), h200(V31)
    # 1 sequence at 131,072 cached: 61 × 2,048 latent tokens + 61 × 131,072 indexer keys
    assert d.kv_read_bytes(1, 131_072) == pytest.approx(61 * 2048 * 1152 + 61 * 131_072 * 132)
    assert dense.kv_read_bytes(1, 131_072) == pytest.approx(61 * 131_072 * 1152)
    assert dense.kv_read_bytes(1, 131_072) / d.kv_read_bytes(1, 131_072) == pytest.approx(7.68, abs=0.01)
    # up to 2,048 tokens a sequence the indexer only adds: its keys on top of the whole latent
    assert d.kv_read_bytes(4, 4 * 1000) == pytest.approx(dense.kv_read_bytes(4, 4000) + 61 * 4000 * 132)
    # 8 sequences of 10,000: each reads its own top 2,048
    assert d.kv_read_bytes(8, 80_000) == pytest.approx(61 * 8 * 2048 * 1152 + 61 * 80_000 * 132)


def test_the_attention_flops_count_the_top_k_pairs_and_the_indexer_scores_every_one() -> None:
    pair, scored = V32.attention_flops_per_layer_pair, V32.indexer_flops_per_layer_pair
    assert scored == 2 * 64 * 128
    decoding = V32.decode_attention_flops_per_layer_pair  # the latent attention absorbed: 2 × 128 × (2 × 512 + 64)
    assert decoding == 2 * 128 * (2 * 512 + 64)
    assert V32.attention_flops(1, 131_072) == pytest.approx(decoding * 61 * 2048 + scored * 61 * 131_072)
    # a 4,096-token prompt: the i-th token attends to min(i, 2,048) keys; the indexer scores all i
    capped = 2048 * 2049 / 2 + 2048 * 2048
    assert V32.attended_pairs(1, 4096) == pytest.approx(61 * capped)
    assert V32.indexer_pairs(1, 4096) == pytest.approx(61 * 4096 * 4097 / 2)
    assert prefill_flops_split(V32, 4096)[1] == pytest.approx(pair * 61 * capped + scored * 61 * 4096 * 4097 / 2)
    # a chunk of 1,000 after 5,000 cached: every new token past the top-k
    assert V32.attended_pairs(1, 1000, 5000) == pytest.approx(61 * 1000 * 2048)


def test_long_contexts_decode_faster_than_dense_mla_and_short_ones_pay_the_indexer() -> None:
    long_sparse, long_dense = decode_step_s(h200(), 32, 32 * 100_000), decode_step_s(h200(V31), 32, 32 * 100_000)
    assert long_sparse < long_dense / 2
    assert decode_step_s(h200(), 32, 32 * 1000) > decode_step_s(h200(V31), 32, 32 * 1000)


def test_glm5_shares_an_indexer_over_its_layers_and_a_bad_field_is_a_config_error() -> None:
    kinds = ["full" if i < 3 or (i - 2) % 4 == 0 else "shared" for i in range(78)]
    glm = model_from_config({**_V3, "num_hidden_layers": 78, "index_n_heads": 32, "indexer_types": kinds}, "glm-5")
    assert glm.indexer_layer_count == kinds.count("full") == 21
    every_fourth = model_from_config({**_V3, "num_hidden_layers": 78, "index_topk_freq": 4}, "glm-5")
    assert every_fourth.indexer_layer_count == 20  # ⌈78 / 4⌉
    with pytest.raises(ConfigError, match=r"cannot use \(index_n_heads must not be negative"):
        model_from_config({**_V3, "index_n_heads": -1}, "bad")
    with pytest.raises(ConfigError, match=r"cannot use \(index_topk_freq must be a whole number"):
        model_from_config({**_V3, "index_topk_freq": "often"}, "bad")
