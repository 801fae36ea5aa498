"""The models of 2025 (and older ones benchmark suites run) in the built-in table, mixed weight formats, and
what a mixture of experts reads a step.

Each model's config below is the subset of its ``config.json`` on the Hugging Face Hub that the parameter count
needs; the published totals are from the sources named in each case.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tokometer.cli.estimate import command as estimate
from tokometer.perf.catalog import BUILTIN_MODELS
from tokometer.perf.collective import communication_s
from tokometer.perf.hardware import resolve_hardware
from tokometer.perf.loaders import model_from_config, resolve_model
from tokometer.perf.roofline import Deployment, decode_step_s, prefill_s, weight_bytes_read
from tokometer.util.errors import ConfigError
from tokometer.util.units import GIB

_GPT_OSS = {"model_type": "gpt_oss", "hidden_size": 2880, "num_attention_heads": 64, "num_key_value_heads": 8,
            "head_dim": 64, "vocab_size": 201088, "intermediate_size": 2880, "num_experts_per_tok": 4,
            "experts_per_token": 4, "sliding_window": 128, "max_position_embeddings": 131072,
            "tie_word_embeddings": False, "torch_dtype": "bfloat16",
            "quantization_config": {"quant_method": "mxfp4",
                                    "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router",
                                                               "model.embed_tokens", "lm_head"]}}
_QWEN3 = {"vocab_size": 151936, "head_dim": 128, "max_position_embeddings": 40960, "tie_word_embeddings": False,
          "torch_dtype": "bfloat16"}
_LLAMA4 = {"model_type": "llama4_text", "hidden_size": 5120, "num_attention_heads": 40, "num_key_value_heads": 8,
           "head_dim": 128, "num_hidden_layers": 48, "vocab_size": 202048, "intermediate_size": 8192,
           "intermediate_size_mlp": 16384, "num_experts_per_tok": 1, "torch_dtype": "bfloat16",
           "attention_chunk_size": 8192}
_DEEPSEEK_V3 = {"model_type": "deepseek_v3", "hidden_size": 7168, "num_attention_heads": 128,
                "num_key_value_heads": 128, "num_hidden_layers": 61, "vocab_size": 129280, "intermediate_size": 18432,
                "moe_intermediate_size": 2048, "n_routed_experts": 256, "n_shared_experts": 1,
                "num_experts_per_tok": 8, "first_k_dense_replace": 3, "q_lora_rank": 1536, "kv_lora_rank": 512,
                "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128, "max_position_embeddings": 163840,
                "quantization_config": {"quant_method": "fp8"}}

_GLM45 = {"model_type": "glm4_moe", "hidden_size": 5120, "num_attention_heads": 96, "num_key_value_heads": 8,
          "head_dim": 128, "num_hidden_layers": 92, "vocab_size": 151552, "intermediate_size": 12288,
          "moe_intermediate_size": 1536, "n_routed_experts": 160, "n_shared_experts": 1, "num_experts_per_tok": 8,
          "first_k_dense_replace": 3, "max_position_embeddings": 202752, "tie_word_embeddings": False,
          "torch_dtype": "bfloat16", "attention_bias": True, "partial_rotary_factor": 0.5,
          "num_nextn_predict_layers": 1}
_LLAMA2 = {"model_type": "llama", "vocab_size": 32000, "max_position_embeddings": 4096, "tie_word_embeddings": False,
           "torch_dtype": "float16"}

CONFIGS: dict[str, dict[str, Any]] = {
    "gpt-oss-120b": {**_GPT_OSS, "num_hidden_layers": 36, "num_local_experts": 128,
                     "layer_types": ["sliding_attention", "full_attention"] * 18},
    "gpt-oss-20b": {**_GPT_OSS, "num_hidden_layers": 24, "num_local_experts": 32,
                    "layer_types": ["sliding_attention", "full_attention"] * 12},
    "qwen3-8b": {**_QWEN3, "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
                 "num_hidden_layers": 36, "intermediate_size": 12288},
    "qwen3-32b": {**_QWEN3, "hidden_size": 5120, "num_attention_heads": 64, "num_key_value_heads": 8,
                  "num_hidden_layers": 64, "intermediate_size": 25600},
    "qwen3-30b-a3b": {**_QWEN3, "model_type": "qwen3_moe", "hidden_size": 2048, "num_attention_heads": 32,
                      "num_key_value_heads": 4, "num_hidden_layers": 48, "intermediate_size": 6144,
                      "moe_intermediate_size": 768, "num_experts": 128, "num_experts_per_tok": 8},
    "qwen3-235b-a22b": {**_QWEN3, "model_type": "qwen3_moe", "hidden_size": 4096, "num_attention_heads": 64,
                        "num_key_value_heads": 4, "num_hidden_layers": 94, "intermediate_size": 12288,
                        "moe_intermediate_size": 1536, "num_experts": 128, "num_experts_per_tok": 8},
    "llama-4-scout": {**_LLAMA4, "num_local_experts": 16, "interleave_moe_layer_step": 1,
                      "max_position_embeddings": 10485760},
    "llama-4-maverick": {**_LLAMA4, "num_local_experts": 128, "interleave_moe_layer_step": 2,
                         "max_position_embeddings": 1048576},
    "deepseek-v3.1": _DEEPSEEK_V3,
    "deepseek-v3.2": {**_DEEPSEEK_V3, "index_topk": 2048, "index_n_heads": 64, "index_head_dim": 128},
    "kimi-k2": {**_DEEPSEEK_V3, "num_attention_heads": 64, "num_key_value_heads": 64, "vocab_size": 163840,
                "n_routed_experts": 384, "first_k_dense_replace": 1, "max_position_embeddings": 131072},
    "llama-2-7b": {**_LLAMA2, "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 32,
                   "num_hidden_layers": 32, "intermediate_size": 11008},
    "llama-2-13b": {**_LLAMA2, "hidden_size": 5120, "num_attention_heads": 40, "num_key_value_heads": 40,
                    "num_hidden_layers": 40, "intermediate_size": 13824},
    "llama-2-70b": {**_LLAMA2, "hidden_size": 8192, "num_attention_heads": 64, "num_key_value_heads": 8,
                    "num_hidden_layers": 80, "intermediate_size": 28672},
    "mixtral-8x22b": {"model_type": "mixtral", "hidden_size": 6144, "num_attention_heads": 48,
                      "num_key_value_heads": 8, "num_hidden_layers": 56, "intermediate_size": 16384,
                      "num_local_experts": 8, "num_experts_per_tok": 2, "vocab_size": 32768,
                      "max_position_embeddings": 65536, "torch_dtype": "bfloat16"},
    "mistral-large-2": {"model_type": "mistral", "hidden_size": 12288, "num_attention_heads": 96,
                        "num_key_value_heads": 8, "head_dim": 128, "num_hidden_layers": 88,
                        "intermediate_size": 28672, "vocab_size": 32768, "max_position_embeddings": 131072,
                        "torch_dtype": "bfloat16"},
    "qwen2.5-32b": {"model_type": "qwen2", "hidden_size": 5120, "num_attention_heads": 40, "num_key_value_heads": 8,
                    "num_hidden_layers": 64, "intermediate_size": 27648, "vocab_size": 152064,
                    "max_position_embeddings": 32768, "tie_word_embeddings": False, "torch_dtype": "bfloat16"},
    "qwen3-14b": {**_QWEN3, "hidden_size": 5120, "num_attention_heads": 40, "num_key_value_heads": 8,
                  "num_hidden_layers": 40, "intermediate_size": 17408},
    "glm-4.6": _GLM45,
    "glm-4.5": {**_GLM45, "max_position_embeddings": 131072},
    "glm-4.5-air": {**_GLM45, "hidden_size": 4096, "num_hidden_layers": 46, "intermediate_size": 10944,
                    "moe_intermediate_size": 1408, "n_routed_experts": 128, "first_k_dense_replace": 1,
                    "max_position_embeddings": 131072},
    "minimax-m2": {"model_type": "minimax_m2", "hidden_size": 3072, "num_attention_heads": 48,
                   "num_key_value_heads": 8, "head_dim": 128, "num_hidden_layers": 62, "vocab_size": 200064,
                   "intermediate_size": 1536, "num_local_experts": 256, "num_experts_per_tok": 8,
                   "max_position_embeddings": 196608, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
                   "quantization_config": {"quant_method": "fp8", "fmt": "float8_e4m3fn",
                                           "weight_block_size": [128, 128], "activation_scheme": "dynamic"}},
    "qwen3-coder-480b-a35b": {**_QWEN3, "model_type": "qwen3_moe", "hidden_size": 6144, "num_attention_heads": 96,
                              "num_key_value_heads": 8, "num_hidden_layers": 62, "intermediate_size": 8192,
                              "moe_intermediate_size": 2560, "num_experts": 160, "num_experts_per_tok": 8,
                              "max_position_embeddings": 262144},
}

# (published total, published active, the vocabulary tables the active figure leaves out (0: none; 1: the input
# embedding table; 2: it and the LM head), source)
PUBLISHED: dict[str, tuple[float, float, int, str]] = {
    "gpt-oss-120b": (116.83e9, 5.13e9, 1, "gpt-oss model card (arXiv 2508.10925), table 1"),
    "gpt-oss-20b": (20.91e9, 3.61e9, 1, "gpt-oss model card (arXiv 2508.10925), table 1"),
    "qwen3-8b": (8.2e9, 8.2e9, 0, "Qwen/Qwen3-8B model card: 8.2 B (6.95 B without embeddings)"),
    "qwen3-32b": (32.8e9, 32.8e9, 0, "Qwen/Qwen3-32B model card: 32.8 B (31.2 B without embeddings)"),
    "qwen3-30b-a3b": (30.5e9, 3.3e9, 0, "Qwen/Qwen3-30B-A3B model card: 30.5 B total, 3.3 B activated"),
    "qwen3-235b-a22b": (235e9, 22e9, 0, "Qwen/Qwen3-235B-A22B model card: 235 B total, 22 B activated"),
    "llama-4-scout": (109e9, 17e9, 0, "Llama 4 model card: 109 B total, 17 B active"),
    "llama-4-maverick": (400e9, 17e9, 0, "Llama 4 model card: 400 B total, 17 B active"),
    "deepseek-v3.1": (671e9, 37e9, 0, "DeepSeek-V3 report (arXiv 2412.19437): 671 B total, 37 B activated"),
    "deepseek-v3.2": (671e9, 37e9, 0, "DeepSeek-V3.2 model card: the V3 architecture"),
    "kimi-k2": (1.04e12, 32e9, 0, "Kimi K2 report (arXiv 2507.20534): 1.04 T total, 32 B activated"),
    "llama-2-7b": (6.74e9, 6.74e9, 0, "the Hub's safetensors metadata of meta-llama/Llama-2-7b-chat-hf"),
    "llama-2-13b": (13.02e9, 13.02e9, 0, "the Hub's safetensors metadata of meta-llama/Llama-2-13b-chat-hf"),
    "llama-2-70b": (68.98e9, 68.98e9, 0, "the Hub's safetensors metadata of meta-llama/Llama-2-70b-chat-hf"),
    "mixtral-8x22b": (141e9, 39e9, 0, "Mistral AI's Mixtral 8x22B announcement: 141 B total, 39 B active"),
    "mistral-large-2": (123e9, 123e9, 0, "mistralai/Mistral-Large-Instruct-2407 model card: 123 B"),
    "qwen2.5-32b": (32.5e9, 32.5e9, 0, "Qwen/Qwen2.5-32B-Instruct model card: 32.5 B (31.0 B without embeddings)"),
    "qwen3-14b": (14.8e9, 14.8e9, 0, "Qwen/Qwen3-14B model card: 14.8 B (13.2 B without embeddings)"),
    "glm-4.6": (355e9, 32e9, 2, "GLM-4.5 model card (zai-org/GLM-4.5): 355 B total, 32 B active; GLM-4.6 alike"),
    "glm-4.5": (355e9, 32e9, 2, "GLM-4.5 model card (zai-org/GLM-4.5): 355 B total, 32 B active"),
    "glm-4.5-air": (106e9, 12e9, 2, "GLM-4.5 model card (zai-org/GLM-4.5): 106 B total, 12 B active"),
    "minimax-m2": (230e9, 10e9, 2, "MiniMax-M2 model card (transformers' minimax_m2 docs): 230 B total, 10 B active"),
    "qwen3-coder-480b-a35b": (480e9, 35e9, 0, "Qwen/Qwen3-Coder-480B-A35B-Instruct model card: 480 B, 35 B active"),
}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_each_models_shapes_give_its_published_parameter_counts(name: str) -> None:
    total, active, tables_left_out, _source = PUBLISHED[name]
    counted = model_from_config(CONFIGS[name], name)
    assert counted.params == pytest.approx(total, rel=0.02)
    counted_active = counted.active - tables_left_out * counted.vocab * counted.hidden
    # Kimi K2's "32 B" and MiniMax-M2's "10 B" are rounded: their shapes give 32.9 B (2.7 % above) and 9.80 B
    assert counted_active == pytest.approx(active, rel=0.03 if name in ("kimi-k2", "minimax-m2") else 0.02)
    row = BUILTIN_MODELS[name]
    shape = ("layers", "hidden", "heads", "kv_heads", "head_dim", "vocab", "max_context", "experts",
             "experts_per_token", "kv_lora_rank", "qk_rope_head_dim", "sliding_window", "sliding_layers",
             "expert_dtype", "routed_expert_width", "sparse_topk", "indexer_heads", "indexer_head_dim",
             "indexer_layer_count")  # the width: moe_intermediate_size, else intermediate_size
    assert {k: getattr(row, k) for k in shape} == {k: getattr(counted, k) for k in shape}
    assert row.params == pytest.approx(counted.params, rel=0.02)
    assert row.active == pytest.approx(counted.active, rel=0.03)
    assert row.source.startswith(("config.json of", "text_config of"))


def test_mla_caches_the_latent_and_the_rope_key() -> None:
    # Per token, per layer: kv_lora_rank + qk_rope_head_dim = 512 + 64 elements, not 2 × 128 heads × 192:
    # 61 × 576 × 2 B = 70,272 B in bf16, the 70.272 KB of "Insights into DeepSeek-V3" (ISCA 2025), table 1
    h200 = resolve_hardware("H200")
    for name in ("deepseek-v3", "deepseek-v3.1", "deepseek-v3.2"):
        d = Deployment(BUILTIN_MODELS[name], h200, "fp8", "bf16", tp=8)
        indexer = 61 * 132 if name == "deepseek-v3.2" else 0  # V3.2's sparse-attention keys (its own test)
        assert d.kv_bytes_per_token - indexer == 61 * (512 + 64) * 2 == 70_272
        assert d.kv_bytes_per_token_per_gpu == 70_272 + indexer  # the latent is replicated on every TP rank
    kimi = Deployment(BUILTIN_MODELS["kimi-k2"], h200, "fp8", "fp8", tp=8)
    assert kimi.kv_bytes_per_token == 61 * 576


def test_mla_decodes_absorbed_and_prefills_expanded() -> None:
    # Decoding, every head scores the 512 + 64 latent and RoPE key and sums the 512 latents of each cached token
    # (the queries multiplied into the latent space, as DeepSeek's inference code's "absorb" mode, FlashMLA and the
    # engines run it): 2 × 128 × (2 × 512 + 64) FLOPs a layer-pair; a prompt expands keys and values, 2 × 128 ×
    # (192 + 128). So a decode step's attention is bound by its FLOPs, 483 a byte of the fp8 latent it reads.
    r1 = BUILTIN_MODELS["deepseek-r1"]
    assert r1.decode_attention_flops_per_layer_pair == 278_528
    assert r1.attention_flops_per_layer_pair == 81_920
    assert r1.attention_flops(4, 4 * 1500) == pytest.approx(278_528 * 61 * 6000)
    assert r1.prefill_attention_flops(1, 100) == pytest.approx(81_920 * 61 * 100 * 101 / 2)
    llama = BUILTIN_MODELS["llama-3.1-8b"]  # without latent attention the two are one
    assert llama.decode_attention_flops_per_layer_pair == llama.attention_flops_per_layer_pair


def test_distinct_experts_grow_from_k_to_all_of_them() -> None:
    m = BUILTIN_MODELS["gpt-oss-120b"]  # E = 128, k = 4
    assert m.expected_experts(1) == pytest.approx(4)
    assert m.expected_experts(64) == pytest.approx(128 * (1 - (1 - 4 / 128) ** 64))  # 111: 87 %
    assert m.expected_experts(100_000) == pytest.approx(128)
    counts = [m.expected_experts(b) for b in (1, 2, 8, 32, 256)]
    assert counts == sorted(counts) and counts[1] < 2 * 4  # two tokens often share an expert
    assert BUILTIN_MODELS["llama-4-maverick"].expected_experts(1) == pytest.approx(1)
    assert BUILTIN_MODELS["llama-3.1-8b"].expected_experts(8) == 0


def test_bytes_a_step_reads_are_the_rest_plus_the_touched_experts() -> None:
    d = Deployment(BUILTIN_MODELS["qwen3-30b-a3b"], resolve_hardware("H100-SXM"), "bf16", "bf16")
    rest, experts = d.other_weight_bytes, d.expert_weight_bytes
    assert rest + experts == d.weight_bytes
    # batch 1: the active parameters (8 of 128 experts) — not at batch 64, when 98.5 % of the weights are read
    assert weight_bytes_read(d, 1) == pytest.approx(rest + experts * 8 / 128)
    assert weight_bytes_read(d, 1) == pytest.approx(2 * 3.3e9, rel=0.02)
    assert weight_bytes_read(d, 64) == pytest.approx(rest + experts * (1 - (1 - 8 / 128) ** 64))
    assert weight_bytes_read(d, 64) > 0.98 * d.weight_bytes
    # a prefill of a 1,000-token prompt reads every expert; a decode step of 64 costs ~9× one of 1
    assert weight_bytes_read(d, 1000) == pytest.approx(d.weight_bytes)
    assert prefill_s(d, 1000) >= d.weight_bytes / d.hardware.bandwidth
    assert decode_step_s(d, 64, 0) > 8 * decode_step_s(d, 1, 0)


def test_experts_split_over_the_gpus() -> None:
    m = BUILTIN_MODELS["qwen3-235b-a22b"]
    one = Deployment(m, resolve_hardware("H200"), "fp8", "fp8", tp=1)
    eight = Deployment(m, resolve_hardware("H200"), "fp8", "fp8", tp=8)
    assert eight.weight_bytes_per_gpu == pytest.approx(one.weight_bytes / 8)
    for batch in (1, 16, 256):  # uniform routing: each GPU reads its 1/8 of the touched experts on average
        assert weight_bytes_read(eight, batch) / 8 == pytest.approx(weight_bytes_read(one, batch) / 8)
        # the work splits eight ways; the all-reduces over NVLink come on top
        assert decode_step_s(eight, batch, 0) == pytest.approx(decode_step_s(one, batch, 0) / 8
                                                               + communication_s(eight, batch))


def test_gpt_oss_ships_mxfp4_experts_and_bf16_attention() -> None:
    m = BUILTIN_MODELS["gpt-oss-120b"]
    assert (m.native_dtype, m.expert_dtype, m.expert_format("bf16")) == ("bf16", "mxfp4", "mxfp4")
    rest, experts = m.weight_bytes_split("bf16")
    assert experts == pytest.approx(m.expert_params * 4.25 / 8)  # 4 bits + one 8-bit scale per 32
    assert rest == pytest.approx((m.params - m.expert_params) * 2)
    # its checkpoint: 60.8 GiB (gpt-oss model card, table 1); 65.3 GB on the Hub
    assert m.weight_bytes_for("bf16") / GIB == pytest.approx(60.8, rel=0.02)
    assert BUILTIN_MODELS["gpt-oss-20b"].weight_bytes_for("bf16") / GIB == pytest.approx(12.8, rel=0.02)
    d = Deployment(m, resolve_hardware("H100-SXM"), "bf16", "bf16")
    assert d.kv_capacity_tokens() > 0  # fits one 80 GB GPU, as published
    # another format quantises the experts with the rest (fp8: everything linear in 8 bits)
    assert m.expert_format("fp8") == "fp8"
    assert m.weight_bytes_for("fp8") == pytest.approx((m.params - m.embedding_params) + m.embedding_params * 2)


def test_short_sliding_windows_leave_the_cache_per_token() -> None:
    m = BUILTIN_MODELS["gpt-oss-120b"]
    assert m.kv_layers == 18  # the 18 full-attention layers; the 128-token windows stay bounded
    assert m.kv_elements_per_token == 2 * 18 * 8 * 64  # 36,864 B a token in bf16
    loaded = model_from_config(CONFIGS["gpt-oss-120b"], "gpt-oss-120b")
    assert (loaded.sliding_window, loaded.sliding_layers, loaded.expert_dtype) == (128, 18, "mxfp4")
    # any window, short or long: Gemma 3's 512-token windows keep at most 512 tokens of a sequence too
    gemma = model_from_config({"model_type": "gemma3_text", "hidden_size": 640, "num_attention_heads": 4,
                               "num_key_value_heads": 1, "head_dim": 256, "num_hidden_layers": 18,
                               "vocab_size": 262144, "intermediate_size": 2048, "sliding_window": 512,
                               "layer_types": ["sliding_attention"] * 5 + ["full_attention"]
                               + ["sliding_attention"] * 5 + ["full_attention"] + ["sliding_attention"] * 6},
                              "gemma")
    assert gemma.kv_layers == 2 and gemma.kv_elements_per_token == 2 * 2 * 256
    assert gemma.cached_layer_tokens(10_000) == 2 * 10_000 + 16 * 512


def test_whole_experts_per_gpu_wait_for_the_busiest_gpu() -> None:
    m, h100 = BUILTIN_MODELS["gpt-oss-120b"], resolve_hardware("H100-SXM")
    split = Deployment(m, h100, tp=8)
    whole = Deployment(m, h100, tp=8, expert_parallel=True)
    assert whole.weight_bytes_per_gpu == split.weight_bytes_per_gpu
    # batch 1: 4 touched experts, 0.5 a GPU on average; the busiest of 8 GPUs (16 experts each) holds more
    assert 1.0 < m.busiest_gpu_experts(1, 8) <= 4.0
    assert m.busiest_gpu_experts(1, 8) > m.expected_experts(1) / 8
    # what each GPU reads differs (10.4 GB on the busiest against 6.2), what it sends does not: after the
    # attention's all-reduce every GPU holds every token, and the experts' sums are all-reduced either way
    assert communication_s(whole, 1) == communication_s(split, 1) > 0
    assert (decode_step_s(whole, 1, 0) - communication_s(whole, 1)
            > 1.6 * (decode_step_s(split, 1, 0) - communication_s(split, 1)))
    # a large batch touches every expert on every GPU: the two agree
    assert m.busiest_gpu_experts(4096, 8) == pytest.approx(16)
    assert weight_bytes_read(whole, 4096) == pytest.approx(weight_bytes_read(split, 4096))
    for batch in (1, 4, 16, 64):  # never below the average, never above a GPU's experts
        assert m.expected_experts(batch) / 8 <= m.busiest_gpu_experts(batch, 8) <= 16
    assert m.busiest_gpu_experts(7, 1) == pytest.approx(m.expected_experts(7))  # one GPU: no imbalance
    with pytest.raises(ConfigError, match="not a mixture of experts"):
        Deployment(BUILTIN_MODELS["llama-3.1-8b"], h100, expert_parallel=True)
    with pytest.raises(ConfigError, match="8 experts do not split evenly over --tp 16"):
        Deployment(BUILTIN_MODELS["mixtral-8x7b"], h100, tp=16, expert_parallel=True)


def test_cli_ep_flag(tmp_path: Path) -> None:
    out = tmp_path / "e.json"
    runner = CliRunner(env={"COLUMNS": "200"})
    done = runner.invoke(estimate, ["-m", "gpt-oss-120b", "-H", "H100-SXM", "--tp", "8", "--ep", "-b", "1",
                                    "--json", str(out)])
    assert done.exit_code == 0, done.output
    assert "bf16, experts mxfp4" in done.output and "TP 8, EP 8" in done.output
    payload = json.loads(out.read_text())["estimate"]
    assert payload["expert_parallel"] is True and payload["weight_bytes"] == pytest.approx(65.19e9, rel=0.001)
    experts = payload["experts"]
    assert (experts["routed"], experts["per_token"], experts["format"]) == (128, 4, "mxfp4")
    assert experts["expected_touched_per_layer"]["1"] == pytest.approx(4)
    assert experts["weight_bytes"] + experts["other_weight_bytes"] == pytest.approx(payload["weight_bytes"])
    refused = runner.invoke(estimate, ["-m", "llama-3.1-8b", "-H", "H100-SXM", "--ep"])
    assert isinstance(refused.exception, ConfigError)  # the entry point makes it one line and exit status 2
    assert "not a mixture of experts" in str(refused.exception)


@pytest.mark.parametrize(("name", "row"), [
    ("meta-llama/Llama-2-70b-chat-hf", "llama-2-70b"), ("llama2-70b", "llama-2-70b"),
    ("deepseek-ai/DeepSeek-R1-Distill-Llama-70B", "llama-3.3-70b"),
    ("deepseek-ai/DeepSeek-R1-Distill-Qwen-32B", "qwen2.5-32b"),
    ("nvidia/Llama-3.1-Nemotron-70B-Instruct-HF", "llama-3.1-70b"),
    ("mistralai/Mistral-Large-Instruct-2407", "mistral-large-2"), ("Mixtral-8x22B-v0.1", "mixtral-8x22b"),
])
def test_benchmark_suites_names_and_distilled_models_take_their_base_row(name: str, row: str) -> None:
    # MLPerf's Llama 2 70B and vendor tables' distilled or tuned models: the base model's shapes, offline
    assert resolve_model(name) is BUILTIN_MODELS[row]
