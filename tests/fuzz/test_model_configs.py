"""Fuzzing a model's ``config.json`` as `estimate` reads it (`tokometer.perf.loaders.model_from_config`).

Documented behaviour: a config gives a `ModelSpec` whose derived figures (parameters, KV bytes a token, a
sequence's cache, a decode step's time) are finite and not negative, or one `ConfigError` (never another
exception). The configs are real shapes (a dense GQA model, Qwen3-Next's linear attention, Nemotron 3 Nano's
Mamba2 blocks, Granite 4.0-H's Mamba2 layers, DeepSeek V3.2's sparse MLA, gpt-oss's windows and mxfp4 experts, and
families of other names: DBRX's nested ``attn_config`` / ``ffn_config``, MPT's, Falcon's and ChatGLM's) with
fields replaced by hostile values, and whole configs or their nested ``text_config`` of the wrong type.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tokometer.perf.hardware import resolve_hardware
from tokometer.perf.loaders import model_from_config
from tokometer.perf.roofline import Deployment, decode_step_s
from tokometer.util.errors import ConfigError

DENSE = {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
         "num_hidden_layers": 32, "intermediate_size": 14336, "vocab_size": 128256, "max_position_embeddings": 131072}
NEXT = {"model_type": "qwen3_next", "hidden_size": 2048, "num_attention_heads": 16, "num_key_value_heads": 2,
        "head_dim": 256, "num_hidden_layers": 48, "full_attention_interval": 4, "linear_num_key_heads": 16,
        "linear_num_value_heads": 32, "linear_key_head_dim": 128, "linear_value_head_dim": 128,
        "linear_conv_kernel_dim": 4, "num_experts": 512, "num_experts_per_tok": 10, "moe_intermediate_size": 512,
        "shared_expert_intermediate_size": 512, "vocab_size": 151936}
NANO = {"model_type": "nemotron_h", "hidden_size": 2688, "num_attention_heads": 32, "num_key_value_heads": 2,
        "head_dim": 128, "num_hidden_layers": 8, "hybrid_override_pattern": "ME*EME-E", "mamba_num_heads": 64,
        "mamba_head_dim": 64, "ssm_state_size": 128, "n_groups": 8, "conv_kernel": 4, "n_routed_experts": 128,
        "num_experts_per_tok": 6, "moe_intermediate_size": 1856, "moe_shared_expert_intermediate_size": 3712,
        "intermediate_size": 1856, "vocab_size": 131072, "mamba_ssm_cache_dtype": "float32"}
SPARSE = {"model_type": "deepseek_v32", "hidden_size": 7168, "num_attention_heads": 128, "num_hidden_layers": 61,
          "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128, "q_lora_rank": 1536,
          "n_routed_experts": 256, "num_experts_per_tok": 8, "moe_intermediate_size": 2048, "n_shared_experts": 1,
          "first_k_dense_replace": 3, "intermediate_size": 18432, "vocab_size": 129280, "index_topk": 2048,
          "index_n_heads": 64, "index_head_dim": 128, "quantization_config": {"quant_method": "fp8"}}
WINDOWS = {"model_type": "gpt_oss", "hidden_size": 2880, "num_attention_heads": 64, "num_key_value_heads": 8,
           "head_dim": 64, "num_hidden_layers": 4, "layer_types": ["sliding_attention", "full_attention"] * 2,
           "sliding_window": 128, "num_local_experts": 32, "experts_per_token": 4, "intermediate_size": 2880,
           "vocab_size": 201088, "quantization_config": {"quant_method": "mxfp4"}}
GRANITE = {"model_type": "granitemoehybrid", "hidden_size": 4096, "num_hidden_layers": 4, "num_attention_heads": 32,
           "num_key_value_heads": 8, "num_local_experts": 72, "num_experts_per_tok": 10,
           "shared_intermediate_size": 1536, "intermediate_size": 768, "mamba_d_state": 128, "mamba_expand": 2,
           "mamba_n_heads": 128, "mamba_n_groups": 1, "vocab_size": 100352,
           "layer_types": ["mamba", "mamba", "attention", "mamba"]}
DBRX = {"model_type": "dbrx", "d_model": 6144, "n_heads": 48, "n_layers": 4, "max_seq_len": 32768, "vocab_size": 100352,
        "attn_config": {"kv_n_heads": 8, "clip_qkv": 8}, "ffn_config": {"ffn_hidden_size": 10752,
                                                                        "moe_num_experts": 16, "moe_top_k": 4}}
MPT = {"model_type": "mpt", "d_model": 4096, "n_heads": 32, "n_layers": 4, "expansion_ratio": 4, "max_seq_len": 2048,
       "vocab_size": 50432, "attn_config": {"attn_type": "multihead_attention"}}
FALCON = {"model_type": "falcon", "hidden_size": 4544, "n_head": 71, "n_layer": 4, "multi_query": True,
          "new_decoder_architecture": False, "vocab_size": 65024}
CHATGLM = {"model_type": "chatglm", "hidden_size": 4096, "num_layers": 4, "num_attention_heads": 32,
           "multi_query_attention": True, "multi_query_group_num": 2, "kv_channels": 128, "ffn_hidden_size": 13696,
           "padded_vocab_size": 65024, "seq_length": 8192}
PHI3 = {"model_type": "phi3", "hidden_size": 3072, "num_attention_heads": 32, "num_key_value_heads": 32,
        "num_hidden_layers": 4, "intermediate_size": 8192, "vocab_size": 32064, "max_position_embeddings": 4096}
BASES = [DENSE, NEXT, NANO, SPARSE, WINDOWS, GRANITE, DBRX, MPT, FALCON, CHATGLM]
KEYS = sorted({key for base in BASES for key in base}
              | {"text_config", "llm_config", "torch_dtype", "tie_word_embeddings", "is_encoder_decoder", "n_embd"})
_VALUES: list[Any] = [
    None, 0, -1, 1, 2, 3, 10**30, -(10**30), 1e300, -1e-300, 0.5, True, False, "", "x", "nan", "inf", "1e999",
    "float32", [], [1], ["mamba"], ["linear_attention"], {}, {"a": 1}, {"quant_method": 7}, "M*", "MXE", "*" * 8,
    [None] * 48,
    {"kv_n_heads": -1}, {"kv_n_heads": 10**30}, {"attn_type": "multiquery_attention"}, {"attn_type": []},
    {"moe_num_experts": 1, "moe_top_k": 2}, {"moe_num_experts": 10**30, "moe_top_k": True}, {"ffn_hidden_size": "x"}]
hostile = st.sampled_from(_VALUES) | st.integers(-(2**70), 2**70)
H100 = resolve_hardware("H100")


def _check(cfg: Any) -> None:
    try:
        model = model_from_config(cfg, "fuzzed")
    except ConfigError as exc:
        assert str(exc)
        return
    figures = [model.params, model.active, model.recurrent_bytes_per_sequence]
    for dtype in ("bf16", "fp8"):
        try:
            d = Deployment(model, H100, dtype, dtype)
        except ConfigError:
            continue
        figures += [d.weight_bytes, d.kv_bytes_per_token, d.kv_bytes_per_sequence(1000), decode_step_s(d, 8, 8000)]
    assert all(math.isfinite(x) and x >= 0 for x in figures), figures


@given(st.sampled_from(BASES), st.dictionaries(st.sampled_from(KEYS), hostile, min_size=1, max_size=4))
def test_a_config_with_hostile_fields_gives_a_model_or_one_error(base: dict[str, Any], changes: dict[str, Any]) -> None:
    _check({**base, **changes})


@given(st.sampled_from([None, [], "config", 7, [DENSE]]), st.sampled_from(BASES))
def test_a_config_or_its_nested_part_of_the_wrong_type_is_one_error(wrong: Any, base: dict[str, Any]) -> None:
    _check(wrong)
    _check({**base, "text_config": wrong})
    _check({**base, "quantization_config": wrong})


_json = st.recursive(st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=8)
_quant_value = st.sampled_from(["fp8", "awq", "gptq_marlin", "mxfp4", "modelopt", "modelopt_fp4", "compressed-tensors",
                                "FP8", "NVFP4", "MIXED_PRECISION", "W4A8_AWQ", "INT8", "float", "int", 4, 8, 16, 32,
                                "\x1b[2J", "\u202e"]) | _json
_targets = st.lists(st.sampled_from(["Linear", "linear", "re:.*mlp.experts.*", "re:.*self_attn.*", "LlamaAttention",
                                     "RoutedExperts", "lm_head", "re:(", "re:[a-z]+", "re:.*(mlp|self_attn)\\.q_proj",
                                     "model.layers.0.self_attn.q_proj", "\x1b[2J", "x" * 300]) | st.text(max_size=8),
                    max_size=4)
_group = st.fixed_dictionaries({}, optional={"weights": st.fixed_dictionaries({}, optional={
    "num_bits": _quant_value, "type": _quant_value, "group_size": _quant_value}), "input_activations": _quant_value,
    "targets": _targets | _quant_value})
_excluded = st.lists(st.sampled_from(["lm_head", "*", "*self_attn*", "model.layers.0.*", "*experts*", "[", "[!",
                                      "*mlp*", "\x1b[2J", "\u202e", "?" * 300, "re:.*self_attn.*", "re:(a|b)",
                                      "re:\x1b[2J\u202e", "transformer.h.0.*", "*query_key_value*", "*qkv_proj",
                                      "*gate_up_proj*", "transformer.blocks.*.ffn*"]) | st.text(max_size=8),
                     max_size=5) | _json
_quant = st.fixed_dictionaries({}, optional={
    "quant_method": _quant_value, "quant_algo": _quant_value, "kv_cache_quant_algo": _quant_value, "bits": _quant_value,
    "config_groups": st.dictionaries(st.text(max_size=4), _group, max_size=3) | _json,
    "quantized_layers": st.dictionaries(st.sampled_from(["a.experts", "b.q_proj", "c"]),
                                        st.fixed_dictionaries({}, optional={"quant_algo": _quant_value}) | _json,
                                        max_size=3) | _json,
    "kv_cache_scheme": st.fixed_dictionaries({}, optional={
        "num_bits": _quant_value, "type": _quant_value, "dynamic": _quant_value | st.booleans(),
        "symmetric": _quant_value | st.booleans(), "strategy": _quant_value}) | _json,
    "exclude_modules": _excluded, "ignore": _excluded, "modules_to_not_convert": _excluded})


@given(st.sampled_from([DENSE, WINDOWS, SPARSE, FALCON, CHATGLM, MPT, PHI3]), _quant, _quant | _json)
def test_any_quantisation_config_gives_a_model_in_a_format_it_models(base: dict[str, Any], quant: dict[str, Any],
                                                                     sidecar: Any) -> None:
    """A checkpoint's quantisation config or sidecar of any shape gives a model (a format read, or said as not read)
    whose own format and default KV format a deployment takes."""
    shapes = (({**base, "quantization_config": quant}, None), (base, {"quantization": sidecar}), (base, sidecar))
    for cfg, side in shapes:
        model = model_from_config(cfg, "fuzzed", quant_sidecar=side)
        kv = model.default_kv(model.native_dtype)
        if kv == "nvfp4":  # a declared NVFP4 cache: an H100 has no fp4 tensor cores, and says what to give instead
            with pytest.raises(ConfigError, match="--kv-dtype fp8"):
                Deployment(model, H100, model.native_dtype, kv)
            kv = "fp8"
        d = Deployment(model, H100, model.native_dtype, kv)
        assert math.isfinite(d.weight_bytes) and d.kv_bytes_per_token > 0
        assert "\x1b" not in model.source and "\u202e" not in model.source
