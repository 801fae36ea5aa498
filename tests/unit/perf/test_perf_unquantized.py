"""The modules a ModelOpt checkpoint keeps in 16 bits (`tokometer.perf.unquantized`): its ``exclude_modules``
patterns matched against the modules the config implies, counted in the weights' bytes and in the matmuls' peak;
lists in the shapes NVIDIA's exports write (per layer, by wildcard, under a multimodal model's root), and hostile
ones said as not matched, never a traceback or a long wait."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from tokometer.perf import estimate, hardware_table
from tokometer.perf.explain import weights_arithmetic
from tokometer.perf.loaders import model_from_config, resolve_model
from tokometer.perf.roofline import Deployment
from tokometer.perf.unquantized import MAX_LAYERS, MAX_PATTERNS, NotMatched, kept_modules

DEEPSEEK = {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "hidden_size": 7168,
            "num_attention_heads": 128, "num_key_value_heads": 128, "num_hidden_layers": 61, "q_lora_rank": 1536,
            "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128,
            "n_routed_experts": 256, "n_shared_experts": 1, "moe_intermediate_size": 2048,
            "intermediate_size": 18432, "first_k_dense_replace": 3, "num_experts_per_tok": 8, "vocab_size": 129280,
            "torch_dtype": "bfloat16", "max_position_embeddings": 163840}
"""DeepSeek R1's config.json (deepseek-ai/DeepSeek-R1), as NVIDIA's FP4 exports ship it."""
# one layer's attention projections, by the config's shapes: q_a, q_b, kv_a, kv_b, o
Q_A, Q_B, KV_A, KV_B, O_PROJ = 7168 * 1536, 1536 * 128 * 192, 7168 * 576, 512 * 128 * 256, 128 * 128 * 7168
LLAMA = {"architectures": ["LlamaForCausalLM"], "hidden_size": 8192, "num_attention_heads": 64,
         "num_key_value_heads": 8, "num_hidden_layers": 80, "intermediate_size": 28672, "vocab_size": 128256,
         "max_position_embeddings": 131072, "torch_dtype": "bfloat16"}
SCOUT_TEXT: dict[str, Any] = {
    "model_type": "llama4_text", "hidden_size": 5120, "num_attention_heads": 40, "num_key_value_heads": 8,
    "head_dim": 128, "num_hidden_layers": 48, "intermediate_size": 8192, "intermediate_size_mlp": 16384,
    "num_local_experts": 16, "num_experts_per_tok": 1, "interleave_moe_layer_step": 1, "vocab_size": 202048,
    "max_position_embeddings": 10485760}
SCOUT = {"architectures": ["Llama4ForConditionalGeneration"], "model_type": "llama4", "torch_dtype": "bfloat16",
         "text_config": SCOUT_TEXT}


def _sidecar(exclude: Any, algo: str = "NVFP4") -> dict[str, Any]:
    """The ``hf_quant_config.json`` ModelOpt writes, with ``exclude`` as its ``exclude_modules``."""
    return {"producer": {"name": "modelopt", "version": "0.35.0"},
            "quantization": {"quant_algo": algo, "kv_cache_quant_algo": "FP8", "group_size": 16,
                             "exclude_modules": exclude}}


def test_deepseek_r1_fp4_keeps_its_attention_in_16_bits_layer_by_layer() -> None:
    exclude = ["lm_head", *(f"model.layers.{i}.self_attn*" for i in range(61))]
    model = model_from_config(DEEPSEEK, "r1", quant_sidecar=_sidecar(exclude))
    attention = 61 * (Q_A + Q_B + KV_A + KV_B + O_PROJ)
    assert model.kept_params == attention and model.kept_expert_params == 0
    assert "exclude_modules: 11.41 B params in 16 bits, attention in 61 of 61 layers" in model.source
    plain = model_from_config(DEEPSEEK, "r1", quant_sidecar=_sidecar(["lm_head"]))
    assert plain.kept_params == 0 and "exclude_modules" not in plain.source
    # the kept parameters cost 2 B instead of 4.5 bits: in the rest's bytes, the experts' unchanged
    rest, experts = model.weight_bytes_split("nvfp4")
    plain_rest, plain_experts = plain.weight_bytes_split("nvfp4")
    assert experts == plain_experts
    assert math.isclose(rest - plain_rest, attention * (2 - 4.5 / 8))
    # in another format than the checkpoint's own nothing is kept
    assert model.weight_bytes_split("fp8") == plain.weight_bytes_split("fp8")


def test_the_v2_export_quantises_o_proj_and_keeps_the_rest_of_the_attention() -> None:
    exclude = ["lm_head", *(f"model.layers.{i}.self_attn.{p}" for i in range(61)
                            for p in ("q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj"))]
    kept = kept_modules(DEEPSEEK, exclude)
    assert kept.params == 61 * (Q_A + Q_B + KV_A + KV_B) and kept.where == "attention in 61 of 61 layers"


def test_wildcards_reach_the_dense_layers_the_shared_experts_and_the_routed_ones() -> None:
    kept = kept_modules(DEEPSEEK, ["*self_attn*", "model.layers.[0-2].mlp.*", "*shared_experts*"])
    dense, shared = 3 * 7168 * 18432, 3 * 7168 * 2048
    assert kept.params == 61 * (Q_A + Q_B + KV_A + KV_B + O_PROJ) + 3 * dense + 58 * shared
    assert kept.where == ("attention in 61 of 61 layers, dense MLP in 3 of 61 layers, "
                          "shared expert in 58 of 61 layers")
    experts = kept_modules(DEEPSEEK, ["model.layers.3.mlp.experts.*"])
    assert experts.params == 0 and experts.expert_params == 256 * 3 * 7168 * 2048
    model = model_from_config(DEEPSEEK, "r1", quant_sidecar=_sidecar(["*mlp.experts*"]))
    assert model.kept_expert_params == 58 * 256 * 3 * 7168 * 2048
    assert math.isclose(model.weight_bytes_split("nvfp4")[1], model.expert_params * 2)


def test_a_multimodal_models_root_and_llama_4s_names() -> None:
    exclude = ["lm_head", "language_model.model.layers.*.feed_forward.shared_expert*", "vision_model*",
               "multi_modal_projector*"]
    kept = kept_modules({**SCOUT, **SCOUT_TEXT}, exclude)
    assert kept.params == 48 * 3 * 5120 * 8192 and kept.where == "shared expert in 48 of 48 layers"
    model = model_from_config(SCOUT, "scout", quant_sidecar=_sidecar(exclude))
    assert model.kept_params == kept.params


def test_a_dense_model_and_a_quantization_config_ignore_list(tmp_path: Path) -> None:
    quant = {"quant_method": "modelopt", "quant_algo": "FP8", "ignore": ["lm_head", "model.layers.0.*",
                                                                          "model.layers.79.*"]}
    model = model_from_config({**LLAMA, "quantization_config": quant}, "70b")
    layer = 8192 * 8192 * 2 + 2 * 8192 * 1024 + 3 * 8192 * 28672
    assert model.kept_params == 2 * layer
    assert "attention in 2 of 80 layers, dense MLP in 2 of 80 layers" in model.source
    # the files' size, where known, is the exact size: the kept modules then only move bytes between the parts
    (tmp_path / "config.json").write_text(json.dumps({**LLAMA, "quantization_config": quant}))
    (tmp_path / "model.safetensors").write_bytes(b"\0" * 8192)
    assert resolve_model(str(tmp_path)).weight_bytes_for("fp8") == 8192


def test_kept_modules_multiply_at_the_16_bit_peak_and_the_arithmetic_says_so() -> None:
    b200 = hardware_table()["B200"]
    exclude = [f"model.layers.{i}.self_attn*" for i in range(61)]
    model = model_from_config(DEEPSEEK, "r1", quant_sidecar=_sidecar(exclude))
    plain = model_from_config(DEEPSEEK, "r1", quant_sidecar=_sidecar([]))
    d = Deployment(model, b200, "nvfp4", "fp8", tp=8, expert_parallel=True, attention_dp=True)
    fp4, bf16 = b200.compute_peak("fp4"), b200.compute_peak("bf16")
    assert fp4 is not None and bf16 is not None
    total, kept = model.matmul_params, model.kept_params
    assert d.compute_flops is not None
    assert math.isclose(d.compute_flops, total / ((total - kept) / fp4.flops + kept / bf16.flops))
    assert Deployment(plain, b200, "nvfp4", "fp8", tp=8).compute_flops == fp4.flops
    # with attention data parallel every GPU holds the kept attention whole
    d_plain = Deployment(plain, b200, "nvfp4", "fp8", tp=8, expert_parallel=True, attention_dp=True)
    assert math.isclose(d.weight_bytes_per_gpu - d_plain.weight_bytes_per_gpu, kept * (2 - 4.5 / 8))
    assert "those the checkpoint keeps" in weights_arithmetic(d)


@pytest.mark.parametrize(("exclude", "said"), [
    ("lm_head", "exclude_modules is a JSON str, not a list"),
    ({"lm_head": 1}, "exclude_modules is a JSON dict, not a list"),
    (["lm_head", 7], "an entry that is not a pattern of 1 to 256 characters"),
    ([""], "an entry that is not a pattern of 1 to 256 characters"),
    (["x" * 257], "an entry that is not a pattern of 1 to 256 characters"),
    ([f"p{i}" for i in range(MAX_PATTERNS + 1)], f"lists {MAX_PATTERNS + 1:,} patterns"),
    ([f"*{i}" + "*a" * 100 for i in range(300)], "hold more than 32,768 characters together"),
    ([f"*{i}*a*a*a*a*a*a*a*z" for i in range(600)], "take more than 500,000 tries to match"),
])
def test_a_list_not_matched_is_said_and_sized_in_the_declared_format(exclude: Any, said: str) -> None:
    with pytest.raises(NotMatched, match=said):
        kept_modules(DEEPSEEK, exclude)
    model = model_from_config(DEEPSEEK, "r1", quant_sidecar=_sidecar(exclude))
    assert model.native_dtype == "nvfp4" and model.kept_params == 0
    assert said.split(" (")[0] in model.source
    assert "the modules its exclude_modules names are sized in nvfp4" in model.source


@pytest.mark.parametrize(("cfg", "said"), [
    ({**DEEPSEEK, "num_hidden_layers": MAX_LAYERS + 1}, f"a model of {MAX_LAYERS + 1} layers is not matched"),
    ({**LLAMA, "layer_types": ["linear_attention"] * 80}, "a model with other layers than attention and MLP"),
    ({**LLAMA, "hybrid_override_pattern": "M-M*"}, "a model with other layers than attention and MLP"),
])
def test_a_model_not_matched_is_said(cfg: dict[str, Any], said: str) -> None:
    with pytest.raises(NotMatched, match=said):
        kept_modules(cfg, ["*self_attn*"])


@pytest.mark.parametrize(("exclude", "unmatched"), [
    (["lm_head", "transformer.h.*.attn*"], "transformer.h.*.attn*"),  # a model that names its layers otherwise
    (["lm_head", "backbone.blocks.*.mixer.in_proj", "*mixer.out_proj"], "backbone.blocks.*.mixer.in_proj"),
    (["lm_head", "backbone.blocks.*.mixer.in_proj", "*mlp.up*"], ""),  # some matched: not told apart
    (["lm_head"], ""),
    (["lm_head", "model.layers.*.mlp.gate"], ""),  # NVIDIA's Qwen3 and DeepSeek exports keep the router: matched
    (["lm_head", "model.vision_tower.encoder.layers.*", "multi_modal_projector*"], ""),  # another part's
    (["lm_head", "model.layers.0.self_attn*"], ""),
])
def test_a_list_naming_layer_modules_that_match_none_here_is_said(exclude: list[str], unmatched: str) -> None:
    assert kept_modules(DEEPSEEK, exclude).unmatched == unmatched
    model = model_from_config(DEEPSEEK, "r1", quant_sidecar=_sidecar(exclude))
    said = f"its exclude_modules names modules ('{unmatched}', ...) that match none named here"
    assert (said in model.source and "they are sized in nvfp4" in model.source) == bool(unmatched)
    assert model.native_dtype == "nvfp4"


W4A16 = {"quant_method": "compressed-tensors", "format": "pack-quantized", "config_groups": {"group_0": {
    "targets": ["Linear"], "weights": {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128}}}}
"""A compressed-tensors W4A16 ``quantization_config`` as llm-compressor writes one."""


@pytest.mark.parametrize(("ignore", "layers"), [
    (["lm_head", "re:.*self_attn.*"], 80),
    (["lm_head", "re:^model\\.layers\\.0\\..*"], 1),  # the first layer's attention and MLP
    (["lm_head", "re:.*layers.7.self_attn.[qk]_proj"], None),  # a class: not read
    (["lm_head", "model.layers.3.self_attn.q_proj", "model.layers.3.self_attn.k_proj",
      "model.layers.3.self_attn.v_proj", "model.layers.3.self_attn.o_proj"], 1),  # exact names
])
def test_a_compressed_tensors_ignore_list(ignore: list[str], layers: int | None) -> None:
    model = model_from_config({**LLAMA, "quantization_config": {**W4A16, "ignore": ignore}}, "70b")
    assert model.native_dtype == "int4"
    attention = 8192 * 8192 * 2 + 2 * 8192 * 1024
    if layers is None:
        assert model.kept_params == 0
        assert "its ignore entry 're:.*layers.7.self_attn.[qk]_proj' is a regular expression beyond '.*', '.', " \
               "alternatives and literal text: the modules its ignore names are sized in int4" in model.source
    elif ignore[1].startswith("re:^"):
        assert model.kept_params == attention + 3 * 8192 * 28672 and "dense MLP in 1 of 80 layers" in model.source
    else:
        assert model.kept_params == layers * attention and "ignore: " in model.source
        assert f"attention in {layers} of 80 layers" in model.source


@pytest.mark.parametrize(("ignore", "said"), [
    (["re:(a|b|c|d|e|f|g|h)(a|b|c|d|e|f|g|h)"] * 17, "its ignore list expands to more than 1,024 patterns"),
    (["re:(a|b|c|d|e|f|g|h)(a|b|c|d|e|f|g|h)(a|b)"], "expands to more than 64 alternatives"),
    ([f"model.layers.{i}.mlp" for i in range(MAX_PATTERNS + 1)], f"ignore lists {MAX_PATTERNS + 1:,} patterns"),
])
def test_an_ignore_list_past_its_bounds_is_said(ignore: list[str], said: str) -> None:
    model = model_from_config({**LLAMA, "quantization_config": {**W4A16, "ignore": ignore}}, "70b")
    assert model.native_dtype == "int4" and model.kept_params == 0
    assert said in model.source and "the modules its ignore names are sized in int4" in model.source


KIMI_K2_THINKING: dict[str, Any] = {
    "architectures": ["DeepseekV3ForCausalLM"], "model_type": "kimi_k2", "hidden_size": 7168, "num_hidden_layers": 61,
    "num_attention_heads": 64, "num_key_value_heads": 64, "q_lora_rank": 1536, "kv_lora_rank": 512,
    "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128, "n_routed_experts": 384,
    "n_shared_experts": 1, "moe_intermediate_size": 2048, "intermediate_size": 18432, "first_k_dense_replace": 1,
    "num_experts_per_tok": 8, "vocab_size": 163840, "max_position_embeddings": 262144, "torch_dtype": "bfloat16",
    "quantization_config": {
        "quant_method": "compressed-tensors", "format": "pack-quantized", "kv_cache_scheme": None,
        "config_groups": {"group_0": {"targets": ["Linear"], "input_activations": None, "weights": {
            "num_bits": 4, "type": "int", "strategy": "group", "group_size": 32, "symmetric": True,
            "dynamic": False}}},
        "ignore": ["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*", "re:.*mlp\\.(gate|up|gate_up|down)_proj.*"]}}
"""Kimi K2 Thinking's config.json as released: int4 routed experts in groups of 32, the rest kept in bf16 by
regular expressions, one of them with alternatives."""


def test_kimi_k2_thinking_keeps_its_attention_shared_experts_and_dense_layer_in_16_bits() -> None:
    model = model_from_config(KIMI_K2_THINKING, "kimi-k2-thinking")
    attention = 7168 * 1536 + 1536 * 64 * 192 + 7168 * 576 + 512 * 64 * 256 + 64 * 128 * 7168
    shared, dense = 3 * 7168 * 2048, 3 * 7168 * 18432
    assert model.native_dtype == "int4" and model.bits_for("int4") == 4 + 16 / 32
    assert model.kept_params == 61 * attention + 60 * shared + dense and model.kept_expert_params == 0
    assert "ignore: 9.21 B params in 16 bits, attention in 61 of 61 layers, dense MLP in 1 of 61 layers, shared " \
        "expert in 60 of 61 layers" in model.source


MINIMAX_M2: dict[str, Any] = {
    "architectures": ["MiniMaxM2ForCausalLM"], "model_type": "minimax_m2", "hidden_size": 3072,
    "num_hidden_layers": 62, "num_attention_heads": 48, "num_key_value_heads": 8, "head_dim": 128,
    "intermediate_size": 1536, "num_local_experts": 256, "num_experts_per_tok": 8, "vocab_size": 200064,
    "max_position_embeddings": 196608, "torch_dtype": "bfloat16",
    "quantization_config": {"quant_method": "fp8", "fmt": "float8_e4m3fn", "activation_scheme": "dynamic",
                            "weight_block_size": [128, 128],
                            "modules_to_not_convert": ["gate", "e_score_correction_bias", "lm_head"]}}
"""MiniMax-M2's config.json as released (its experts block_sparse_moe.experts.N.w1, its router
block_sparse_moe.gate)."""


def test_modules_to_not_convert_are_matched_as_vllm_matches_them() -> None:
    """vLLM's fp8 and fbgemm_fp8 take the keys as whole module names (a name under a layer's experts leaves that
    layer's experts all unquantised), its AWQ as parts of names, its GPTQ not at all."""
    fp8 = {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}
    attention = 8192 * 8192 * 2 + 2 * 8192 * 1024
    partial = model_from_config({**LLAMA, "quantization_config": {**fp8, "modules_to_not_convert": [
        "lm_head", "self_attn", "model.layers.0.self_attn.q_proj", "model.layers.1.mlp.down_proj"]}}, "70b")
    assert partial.native_dtype == "fp8" and partial.kept_params == 8192 * 8192 + 8192 * 28672
    assert "modules_to_not_convert: " in partial.source
    layer_experts = model_from_config({**DEEPSEEK, "quantization_config": {**fp8, "modules_to_not_convert": [
        "model.layers.5.mlp.experts.17.down_proj"]}}, "r1")
    assert layer_experts.kept_expert_params == 256 * 3 * 7168 * 2048  # the whole layer's experts
    awq = {"quant_method": "awq", "bits": 4, "group_size": 128}
    parts = model_from_config({**LLAMA, "quantization_config": {**awq, "modules_to_not_convert": ["self_attn"]}}, "70b")
    assert parts.kept_params == 80 * attention and "attention in 80 of 80 layers" in parts.source
    # AWQ's usual ["visual"] names no module of the language model; a key of [ * ? stays literal
    assert model_from_config({**LLAMA, "quantization_config": {**awq, "modules_to_not_convert": [
        "visual", "[*?"]}}, "70b").kept_params == 0
    # AWQ's parts of names reach the experts through their layer's fused module, "model.layers.N.mlp.experts"
    experts = model_from_config({**DEEPSEEK, "quantization_config": {**awq, "modules_to_not_convert": ["experts"]}},
                                "r1")
    assert experts.kept_expert_params == pytest.approx(58 * 256 * 3 * 7168 * 2048)  # every MoE layer's
    gptq = {"quant_method": "gptq", "bits": 4, "group_size": 128, "modules_to_not_convert": ["self_attn"]}
    assert model_from_config({**LLAMA, "quantization_config": gptq}, "70b").kept_params == 0


@pytest.mark.parametrize("method", ["fp8", "awq"])
def test_minimax_m2s_router_key_keeps_no_expert(method: str) -> None:
    """MiniMax-M2 keeps its router ("gate") unquantised; its experts are w1, w2, w3, so even as a part of names
    (AWQ's rule) the key reaches no expert: the checkpoint's 229 B parameters stay in its format."""
    quant = {**MINIMAX_M2["quantization_config"], "quant_method": method, "bits": 4}
    model = model_from_config({**MINIMAX_M2, "quantization_config": quant}, "minimax-m2")
    assert model.native_dtype == method and model.kept_params == model.kept_expert_params == 0
    assert "16 bits" not in model.source and "match none" not in model.source


def test_the_json_gives_the_kept_parameters_in_the_checkpoints_own_format(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(DEEPSEEK))
    (tmp_path / "hf_quant_config.json").write_text(json.dumps(_sidecar(["lm_head", "*self_attn*"])))
    b200 = hardware_table()["B200"]
    own = estimate(Deployment(resolve_model(str(tmp_path)), b200, "nvfp4", "fp8", tp=8), [1], 1000, 1000).to_json()
    assert own["model"]["kept_16_bit_params"] == 61 * (Q_A + Q_B + KV_A + KV_B + O_PROJ)
    other = estimate(Deployment(resolve_model(str(tmp_path)), b200, "fp8", "fp8", tp=8), [1], 1000, 1000).to_json()
    assert other["model"]["kept_16_bit_params"] == 0
