"""compressed-tensors ``config_groups`` of several formats, each module's scheme resolved as vLLM resolves it
(`tokometer.perf.schemetargets`): the routed experts in one format and every other linear module in another are
read as the experts' format beside the rest's (`tokometer.perf.checkpointquant`); any other mix is said and sized
in ``torch_dtype``; a hostile target is refused within bounds, never a traceback."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tokometer.cli.estimate import command as estimate
from tokometer.perf.checkpointquant import checkpoint_format
from tokometer.perf.loaders import model_from_config
from tokometer.perf.schemetargets import module_groups, scheme_targets
from tokometer.perf.unquantized import MAX_PATTERN_CHARS, MAX_PATTERNS, MAX_WORK

QWEN3_MOE = {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "hidden_size": 2048,
             "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128, "num_hidden_layers": 48,
             "moe_intermediate_size": 768, "num_experts": 128, "num_experts_per_tok": 8, "vocab_size": 151936,
             "max_position_embeddings": 40960, "torch_dtype": "bfloat16"}
"""Qwen3-30B-A3B's shapes: 48 MoE layers, no shared expert."""
LLAMA = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
         "num_key_value_heads": 8, "num_hidden_layers": 32, "intermediate_size": 14336, "vocab_size": 128256,
         "max_position_embeddings": 131072, "torch_dtype": "bfloat16"}
MIXTRAL = {**LLAMA, "architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "num_local_experts": 8,
           "num_experts_per_tok": 2}
NVFP4 = {"weights": {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16, "symmetric": True},
         "input_activations": {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16,
                               "dynamic": "local"}}
FP8 = {"weights": {"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": True, "dynamic": False},
       "input_activations": {"num_bits": 8, "type": "float", "strategy": "token", "dynamic": True}}
EXPERTS = ["re:.*mlp.experts.*"]


def _int4(size: int, symmetric: bool = True) -> dict[str, Any]:
    return {"weights": {"num_bits": 4, "type": "int", "strategy": "group", "group_size": size,
                        "symmetric": symmetric}}


def _ct(*groups: tuple[list[Any] | Any, dict[str, Any]], **fields: Any) -> dict[str, Any]:
    """A compressed-tensors ``quantization_config`` of ``groups`` (targets, scheme), in order."""
    return {"quant_method": "compressed-tensors", "format": "mixed-precision", "ignore": ["lm_head", "re:.*mlp.gate$"],
            "config_groups": {f"group_{i}": {"targets": targets, **scheme} for i, (targets, scheme) in
                              enumerate(groups)}, **fields}


EXPERTS_NVFP4 = _ct((EXPERTS, NVFP4), (["Linear"], FP8))
"""llm-compressor's mixed recipe: the routed experts in NVFP4, attention and the rest in FP8."""


@pytest.mark.parametrize("quant", [EXPERTS_NVFP4, _ct((["Linear"], FP8), (EXPERTS, NVFP4))])
def test_nvfp4_experts_beside_fp8_linear_layers_in_either_order(quant: dict[str, Any]) -> None:
    """A name target comes before the class name ``Linear`` whichever group is written first."""
    fmt = checkpoint_format({**QWEN3_MOE, "quantization_config": quant}, moe=True)
    assert (fmt.weights, fmt.experts, fmt.unread) == ("fp8", "nvfp4", False)
    assert fmt.note == "compressed-tensors fp8, the experts nvfp4"
    assert fmt.exclude == ["lm_head", "*mlp?gate"] and fmt.exclude_field == "ignore"


def test_a_mixed_moe_checkpoint_is_its_experts_format_beside_the_rest_end_to_end(tmp_path: Path) -> None:
    cfg = {**QWEN3_MOE, "quantization_config": {**EXPERTS_NVFP4, "kv_cache_scheme": {
        "num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": False, "symmetric": True}}}
    model = model_from_config(cfg, "qwen3-mixed")
    assert (model.native_dtype, model.expert_dtype, model.native_kv_dtype) == ("fp8", "nvfp4", "fp8")
    assert "(compressed-tensors fp8, the experts nvfp4, KV cache fp8 (kv_cache_scheme))" in model.source
    rest, experts = model.weight_bytes_split("fp8")
    assert experts == pytest.approx(model.expert_params * 4.5 / 8)
    embeddings = model.embedding_params
    assert rest == pytest.approx(model.params - model.expert_params - embeddings + 2 * embeddings)
    config = tmp_path / "config.json"
    config.write_text(json.dumps(cfg))
    result = CliRunner(env={"COLUMNS": "200"}).invoke(estimate, ["--model", str(config), "--hardware", "B200"])
    assert result.exit_code == 0 and result.exception is None, result.output
    assert result.output.splitlines()[0] == f"{tmp_path} fp8, experts nvfp4 (KV fp8) on 1 × B200"
    assert "experts in nvfp4" in result.output and "the experts nvfp4" in result.output


def test_int4_experts_take_their_own_groups_and_the_rest_its_own() -> None:
    experts_int4 = _ct((EXPERTS, _int4(32, symmetric=False)), (["Linear"], FP8))
    fmt = checkpoint_format({**QWEN3_MOE, "quantization_config": experts_int4}, moe=True)
    assert (fmt.weights, fmt.experts, fmt.bits, fmt.expert_bits) == ("fp8", "int4", 0.0, 4 + 20 / 32)
    assert fmt.note == "compressed-tensors fp8, the experts int4, groups of 32 with zero points (4.625 bits)"
    model = model_from_config({**QWEN3_MOE, "quantization_config": experts_int4}, "x")
    assert model.weight_bytes_split("fp8")[1] == pytest.approx(model.expert_params * 4.625 / 8)
    assert model.weight_bytes_split("int4")[1] == pytest.approx(model.expert_params * 4.125 / 8)  # not its own
    rest_int4 = _ct((["Linear"], _int4(64)), (EXPERTS, NVFP4))
    fmt = checkpoint_format({**QWEN3_MOE, "quantization_config": rest_int4}, moe=True)
    assert (fmt.weights, fmt.experts, fmt.bits, fmt.expert_bits) == ("int4", "nvfp4", 4 + 16 / 64, 0.0)
    assert fmt.note == "compressed-tensors int4, groups of 64 (4.250 bits), the experts nvfp4"
    both = _ct((EXPERTS, _int4(32)), (["Linear"], _int4(128)))  # one format, groups of two sizes
    fmt = checkpoint_format({**QWEN3_MOE, "quantization_config": both}, moe=True)
    assert (fmt.weights, fmt.experts, fmt.bits) == ("int4", "", 0.0)
    assert "its schemes' groups differ: groups of 128 taken" in fmt.note


def test_experts_alone_in_a_group_leave_the_rest_in_torch_dtype() -> None:
    """A recipe that quantises the routed experts only, as gpt-oss's mxfp4 does."""
    quant = _ct((EXPERTS, NVFP4))
    fmt = checkpoint_format({**QWEN3_MOE, "quantization_config": quant}, moe=True)
    assert (fmt.weights, fmt.experts) == ("", "nvfp4")
    assert fmt.note == "compressed-tensors: the rest in torch_dtype, the experts nvfp4"
    model = model_from_config({**QWEN3_MOE, "quantization_config": quant}, "x")
    assert (model.native_dtype, model.expert_dtype) == ("bf16", "nvfp4")


def test_mixtrals_experts_are_matched_by_their_own_names() -> None:
    quant = _ct((["re:.*block_sparse_moe.experts.*"], NVFP4), (["Linear"], FP8))
    fmt = checkpoint_format({**MIXTRAL, "quantization_config": quant}, moe=True)
    assert (fmt.weights, fmt.experts) == ("fp8", "nvfp4")


@pytest.mark.parametrize(("cfg", "quant", "said"), [
    (LLAMA, _ct((["re:.*self_attn.*"], FP8), (["re:.*mlp.*"], NVFP4)),
     "compressed-tensors config_groups give attention fp8 and the dense MLP nvfp4: formats mixed beyond the "
     "experts' and the rest's"),
    (QWEN3_MOE, _ct((["re:.*mlp.experts.*down_proj"], _int4(128)), (EXPERTS, NVFP4), (["Linear"], FP8)),
     "give attention fp8 and the experts int4 or nvfp4 by module"),
    (QWEN3_MOE, _ct((["re:model.layers.0.mlp.experts.*"], FP8), (EXPERTS, NVFP4), (["Linear"], FP8)),
     "give attention fp8 and the experts fp8 or nvfp4 by module"),
    (QWEN3_MOE, _ct((["re:.*self_attn.*"], FP8)),
     "give attention fp8 and the experts in torch_dtype (no group)"),
    (LLAMA, _ct((["re:.*self_attn.*"], FP8), (["re:.*mlp.*"], {"weights": {"num_bits": 8, "type": "int"}})),
     "compressed-tensors config_groups of a format not read (group 'group_1')"),
])
def test_other_mixes_are_said_and_sized_in_torch_dtype(cfg: dict[str, Any], quant: dict[str, Any], said: str) -> None:
    fmt = checkpoint_format({**cfg, "quantization_config": {**quant, "kv_cache_scheme": {
        "num_bits": 8, "type": "float", "strategy": "tensor", "symmetric": True}}}, moe=cfg is not LLAMA)
    assert not fmt.read and fmt.unread and fmt.kv == "fp8"
    assert said in fmt.note and fmt.note.endswith(": sized in its torch_dtype; give --dtype for its format; KV cache "
                                                  "fp8, as it declares")
    model = model_from_config({**cfg, "quantization_config": quant}, "x")
    assert (model.native_dtype, model.expert_dtype) == ("bf16", "")


def test_a_target_written_twice_takes_its_last_groups_scheme() -> None:
    """vLLM's map of targets keeps a target's first place and its last group's scheme."""
    quant = _ct((["Linear"], FP8), (["Linear"], NVFP4))
    assert checkpoint_format({**LLAMA, "quantization_config": quant}).weights == "nvfp4"
    assert scheme_targets(quant["config_groups"]) == {"Linear": "group_1"}


def test_an_attention_group_alone_is_dropped_as_vllm_drops_it() -> None:
    """A group whose one target is an attention class quantises attention's activations (with the cache)."""
    quant = _ct((["LlamaAttention"], {"input_activations": {"num_bits": 8, "type": "float"}}), (["Linear"], FP8))
    assert checkpoint_format({**LLAMA, "quantization_config": quant}).weights == "fp8"
    alone = _ct((["LlamaAttention"], {"input_activations": {"num_bits": 8, "type": "float"}}))
    fmt = checkpoint_format({**LLAMA, "quantization_config": alone})
    assert (fmt.weights, fmt.unread) == ("", False) and "the weights in torch_dtype" in fmt.note


def test_targets_named_for_other_modules_leave_one_format_read_as_before() -> None:
    """Targets that match none of the modules named here are from a model that names them otherwise: the groups'
    one format is every module's; several formats are not read."""
    one = _ct((["re:transformer.h.*attn.*"], FP8), (["re:transformer.h.*mlp.*"], FP8))
    assert checkpoint_format({**LLAMA, "quantization_config": one}).weights == "fp8"
    two = _ct((["re:transformer.h.*attn.*"], FP8), (["re:transformer.h.*mlp.*"], NVFP4))
    fmt = checkpoint_format({**LLAMA, "quantization_config": two})
    assert not fmt.read and "config_groups of several formats (fp8 and nvfp4) where its targets match none of " \
        "the modules named here" in fmt.note


def test_a_model_whose_modules_are_not_matched_keeps_one_format_and_says_several() -> None:
    hybrid = {**LLAMA, "layers_block_type": ["mamba", "attention"]}
    assert checkpoint_format({**hybrid, "quantization_config": _ct((["Linear"], FP8))}).weights == "fp8"
    fmt = checkpoint_format({**hybrid, "quantization_config": EXPERTS_NVFP4})
    assert not fmt.read and "where a model with other layers than attention and MLP is not matched" in fmt.note


@pytest.mark.parametrize(("targets", "said"), [
    ("Linear", "the targets of its group 'group_0' are not a list of module names"),
    (None, "are not a list of module names"),
    ([1], "are not a list of module names"),
    ([""], "are not a list of module names"),
    ([["re:.*"]], "are not a list of module names"),
    (["x" * (MAX_PATTERN_CHARS + 1)], f"of 1 to {MAX_PATTERN_CHARS} characters"),
    ([f"t{i}" for i in range(MAX_PATTERNS + 1)], f"its config_groups hold more than {MAX_PATTERNS:,} targets"),
    (["re:.*self_attn.[qk]_proj"], "its config_groups target 're:.*self_attn.[qk]_proj' is a regular expression "
                                   "beyond"),
    (["re:(a|b)(c|d)(e|f)(g|h)(i|j)(k|l)(m|n)"], "expands to more than 64 alternatives"),
    (["re:" + "(a|b)?" * 40], "its config_groups target 're:(a|b)?(a|b)"),
    (["re:(a+)+$"], "is a regular expression beyond"),
    ([f"re:{'(a|b|c|d)'}.*x{i}" for i in range(300)], f"expand to more than {MAX_PATTERNS:,} patterns"),
])
def test_hostile_targets_are_said_not_read_without_a_traceback(targets: Any, said: str) -> None:
    quant = _ct((targets, NVFP4), (["Linear"], FP8))
    start = time.perf_counter()
    fmt = checkpoint_format({**QWEN3_MOE, "quantization_config": quant}, moe=True)
    assert time.perf_counter() - start < 2
    assert not fmt.read and said in fmt.note and "config_groups of several formats (fp8 and nvfp4)" in fmt.note
    assert len(fmt.note) < 600


def test_matching_is_bounded_by_its_tries() -> None:
    targets = [f"re:.*zz{i}.*" for i in range(MAX_PATTERNS)]
    deep = {**QWEN3_MOE, "num_hidden_layers": 1024}
    start = time.perf_counter()
    with pytest.raises(ValueError, match=f"take more than {MAX_WORK:,} tries to match"):
        module_groups(deep, scheme_targets({"g": {"targets": targets}}))
    assert time.perf_counter() - start < 5


@pytest.mark.parametrize("groups", [[1], {"g": 1}, {"g": {"targets": {"a": 1}}}, {"g": {"targets": [None]}}])
def test_groups_of_the_wrong_type_are_not_read(groups: Any) -> None:
    fmt = checkpoint_format({**QWEN3_MOE, "quantization_config": {"quant_method": "compressed-tensors",
                                                                   "config_groups": groups}}, moe=True)
    assert not fmt.read and "config_groups of a format not read" in fmt.note


def test_each_kind_of_module_takes_the_groups_its_names_match() -> None:
    targets = scheme_targets(_ct((EXPERTS, NVFP4), (["re:.*self_attn.(q|k|v)_proj"], FP8),
                                 (["Linear"], FP8))["config_groups"])
    kinds = module_groups({**QWEN3_MOE, "num_hidden_layers": 2}, targets)
    assert kinds == {"attention": {"group_1", "group_2"}, "routed experts": {"group_0"}}
    dense = module_groups({**LLAMA, "num_hidden_layers": 2}, scheme_targets({"g": {"targets": ["re:.*mlp.*"]}}))
    assert dense == {"attention": {None}, "dense MLP": {"g"}}
