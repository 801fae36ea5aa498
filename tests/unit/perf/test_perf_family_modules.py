"""The modules a checkpoint keeps in 16 bits in the families that name their layers their own way
(`tokometer.perf.modulenames`): lists written as those families' checkpoints write them, matched against each
family's own names, each module sized from its released config's shapes as its modelling code makes it.

The configs are the published ``config.json`` files' shape fields: GPT-2, StarCoder (gpt_bigcode), GPT-J-6B,
GPT-NeoX-20B, Falcon-7B and 40B, BLOOM-7b1, OPT-6.7B, MPT-7B, StarCoder2-15B, Phi-2, Minitron-8B (Nemotron-4's
shapes pruned), ChatGLM3-6B, Qwen-7B, Phi-4 (``phi3``) and GLM-4-9B-0414 (``glm4``). Each module's size below is
worked out by hand from those shapes (in × out features), not read from the code.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import pytest

from tokometer.perf.checkpointquant import checkpoint_format
from tokometer.perf.configdialects import standard_names
from tokometer.perf.loaders import model_from_config
from tokometer.perf.schemetargets import module_groups, scheme_targets
from tokometer.perf.unquantized import NotMatched, kept_modules, linear_modules

from .test_perf_config_dialects import (
    BLOOM,
    CHATGLM3,
    DBRX,
    FALCON_7B,
    FALCON_40B,
    GPT2,
    GPTJ,
    MPT_7B,
    OPT,
    QWEN1,
    STARCODER2,
)

STARCODER = {"model_type": "gpt_bigcode", "n_embd": 6144, "n_head": 48, "n_layer": 40, "n_inner": 24576,
             "multi_query": True, "n_positions": 8192, "vocab_size": 49152}
GPT_NEOX_20B = {"model_type": "gpt_neox", "hidden_size": 6144, "intermediate_size": 24576,
                "num_attention_heads": 64, "num_hidden_layers": 44, "vocab_size": 50432,
                "max_position_embeddings": 2048, "tie_word_embeddings": False}
PHI2 = {"model_type": "phi", "hidden_size": 2560, "intermediate_size": 10240, "num_attention_heads": 32,
        "num_key_value_heads": None, "num_hidden_layers": 32, "vocab_size": 51200, "hidden_act": "gelu_new",
        "max_position_embeddings": 2048, "tie_word_embeddings": False}
MINITRON_8B = {"model_type": "nemotron", "hidden_size": 4096, "intermediate_size": 16384, "num_attention_heads": 48,
               "num_key_value_heads": 8, "head_dim": 128, "num_hidden_layers": 32, "vocab_size": 256000,
               "hidden_act": "relu2", "max_position_embeddings": 4096, "tie_word_embeddings": False}

PHI4 = {"model_type": "phi3", "hidden_size": 5120, "intermediate_size": 17920, "num_attention_heads": 40,
        "num_key_value_heads": 10, "num_hidden_layers": 40, "vocab_size": 100352, "hidden_act": "silu",
        "max_position_embeddings": 16384, "tie_word_embeddings": False}
GLM4_9B = {"model_type": "glm4", "hidden_size": 4096, "intermediate_size": 13696, "num_attention_heads": 32,
           "num_key_value_heads": 2, "head_dim": 128, "num_hidden_layers": 40, "vocab_size": 151552,
           "hidden_act": "silu", "max_position_embeddings": 32768, "tie_word_embeddings": False}


class Family(NamedTuple):
    cfg: dict[str, Any]
    root: str
    attention: dict[str, int]
    """Each attention projection's name below a layer and its in × out features."""
    mlp: dict[str, int]
    """Each MLP matrix's name below a layer and its in × out features."""
    attention_pattern: str
    """One layer's attention, as the family's list would write it (layer 1)."""
    mlp_pattern: str
    """One layer's MLP, so (layer 0)."""


FAMILIES = {
    "gpt2": Family(GPT2, "transformer.h", {"attn.c_attn": 768 * 2304, "attn.c_proj": 768 * 768},
                   {"mlp.c_fc": 768 * 3072, "mlp.c_proj": 3072 * 768},
                   "transformer.h.1.attn*", "transformer.h.0.mlp*"),
    "starcoder": Family(STARCODER, "transformer.h", {"attn.c_attn": 6144 * (6144 + 2 * 128),
                                                     "attn.c_proj": 6144 * 6144},
                        {"mlp.c_fc": 6144 * 24576, "mlp.c_proj": 24576 * 6144},
                        "transformer.h.1.attn.*", "transformer.h.0.mlp.*"),
    "gpt-j-6b": Family(GPTJ, "transformer.h", dict.fromkeys(("attn.q_proj", "attn.k_proj", "attn.v_proj",
                                                             "attn.out_proj"), 4096 * 4096),
                       {"mlp.fc_in": 4096 * 16384, "mlp.fc_out": 16384 * 4096},
                       "transformer.h.1.attn*", "transformer.h.0.mlp*"),
    "gpt-neox-20b": Family(GPT_NEOX_20B, "gpt_neox.layers", {"attention.query_key_value": 6144 * 18432,
                                                             "attention.dense": 6144 * 6144},
                           {"mlp.dense_h_to_4h": 6144 * 24576, "mlp.dense_4h_to_h": 24576 * 6144},
                           "gpt_neox.layers.1.attention.*", "gpt_neox.layers.0.mlp.*"),
    "falcon-7b": Family(FALCON_7B, "transformer.h", {"self_attention.query_key_value": 4544 * (4544 + 2 * 64),
                                                     "self_attention.dense": 4544 * 4544},
                        {"mlp.dense_h_to_4h": 4544 * 18176, "mlp.dense_4h_to_h": 18176 * 4544},
                        "transformer.h.1.self_attention*", "transformer.h.0.mlp*"),
    "falcon-40b": Family(FALCON_40B, "transformer.h", {"self_attention.query_key_value": 8192 * (8192 + 2 * 8 * 64),
                                                       "self_attention.dense": 8192 * 8192},
                         {"mlp.dense_h_to_4h": 8192 * 32768, "mlp.dense_4h_to_h": 32768 * 8192},
                         "transformer.h.1.self_attention*", "transformer.h.0.mlp*"),
    "bloom-7b1": Family(BLOOM, "transformer.h", {"self_attention.query_key_value": 4096 * 12288,
                                                 "self_attention.dense": 4096 * 4096},
                        {"mlp.dense_h_to_4h": 4096 * 16384, "mlp.dense_4h_to_h": 16384 * 4096},
                        "transformer.h.1.self_attention.*", "transformer.h.0.mlp.*"),
    "opt-6.7b": Family(OPT, "model.decoder.layers", dict.fromkeys(("self_attn.q_proj", "self_attn.k_proj",
                                                                   "self_attn.v_proj", "self_attn.out_proj"),
                                                                  4096 * 4096),
                       {"fc1": 4096 * 16384, "fc2": 16384 * 4096},
                       "model.decoder.layers.1.self_attn*", "model.decoder.layers.0.fc*"),
    "mpt-7b": Family(MPT_7B, "transformer.blocks", {"attn.Wqkv": 4096 * 12288, "attn.out_proj": 4096 * 4096},
                     {"ffn.up_proj": 4096 * 16384, "ffn.down_proj": 16384 * 4096},
                     "transformer.blocks.1.attn*", "transformer.blocks.0.ffn*"),
    "starcoder2-15b": Family(STARCODER2, "model.layers", {"self_attn.q_proj": 6144 * 6144,
                                                          "self_attn.k_proj": 6144 * 512,
                                                          "self_attn.v_proj": 6144 * 512,
                                                          "self_attn.o_proj": 6144 * 6144},
                             {"mlp.c_fc": 6144 * 24576, "mlp.c_proj": 24576 * 6144},
                             "model.layers.1.self_attn*", "model.layers.0.mlp.*"),
    "phi-2": Family(PHI2, "model.layers", dict.fromkeys(("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                                                         "self_attn.dense"), 2560 * 2560),
                    {"mlp.fc1": 2560 * 10240, "mlp.fc2": 10240 * 2560},
                    "model.layers.1.self_attn*", "model.layers.0.mlp*"),
    "minitron-8b": Family(MINITRON_8B, "model.layers", {"self_attn.q_proj": 4096 * 6144,
                                                        "self_attn.k_proj": 4096 * 1024,
                                                        "self_attn.v_proj": 4096 * 1024,
                                                        "self_attn.o_proj": 6144 * 4096},
                          {"mlp.up_proj": 4096 * 16384, "mlp.down_proj": 16384 * 4096},
                          "model.layers.1.self_attn*", "model.layers.0.mlp*"),
    "chatglm3-6b": Family(CHATGLM3, "transformer.encoder.layers", {"self_attention.query_key_value": 4096 * 4608,
                                                                   "self_attention.dense": 4096 * 4096},
                          {"mlp.dense_h_to_4h": 4096 * 27392, "mlp.dense_4h_to_h": 13696 * 4096},
                          "transformer.encoder.layers.1.self_attention*", "transformer.encoder.layers.0.mlp*"),
    "qwen-7b": Family(QWEN1, "transformer.h", {"attn.c_attn": 4096 * 12288, "attn.c_proj": 4096 * 4096},
                      {"mlp.w1": 4096 * 11008, "mlp.w2": 4096 * 11008, "mlp.c_proj": 11008 * 4096},
                      "transformer.h.1.attn.*", "transformer.h.0.mlp.*"),
    "phi-4": Family(PHI4, "model.layers", {"self_attn.qkv_proj": 5120 * (40 + 2 * 10) * 128,
                                           "self_attn.o_proj": 5120 * 5120},
                    {"mlp.gate_up_proj": 5120 * 2 * 17920, "mlp.down_proj": 17920 * 5120},
                    "model.layers.1.self_attn*", "model.layers.0.mlp.*"),
    "glm-4-9b": Family(GLM4_9B, "model.layers", {"self_attn.q_proj": 4096 * 4096, "self_attn.k_proj": 4096 * 256,
                                                 "self_attn.v_proj": 4096 * 256, "self_attn.o_proj": 4096 * 4096},
                       {"mlp.gate_up_proj": 4096 * 2 * 13696, "mlp.down_proj": 13696 * 4096},
                       "model.layers.1.self_attn.*", "model.layers.0.mlp*"),
}


def _layers(family: Family) -> int:
    return int(standard_names(family.cfg)[0]["num_hidden_layers"])


def _ignoring(cfg: dict[str, Any], ignore: list[str]) -> dict[str, Any]:
    """``cfg`` with a ModelOpt FP8 ``quantization_config`` that keeps ``ignore`` in 16 bits."""
    return {**cfg, "quantization_config": {"quant_method": "modelopt", "quant_algo": "FP8", "ignore": ignore}}


@pytest.mark.parametrize("name", FAMILIES)
def test_a_list_of_every_linear_module_keeps_exactly_the_layers_linear_parameters(name: str) -> None:
    family = FAMILIES[name]
    layers = _layers(family)
    every = ["lm_head", *(f"{family.root}.{i}.{module}" for i in range(layers)
                          for module in (*family.attention, *family.mlp))]
    model = model_from_config(_ignoring(family.cfg, every), name)
    by_hand = layers * (sum(family.attention.values()) + sum(family.mlp.values()))
    assert model.kept_params == by_hand
    assert model.kept_params == model.params - model.embedding_params  # what the parameter count gives the layers
    assert f"attention in {layers} of {layers} layers, dense MLP in {layers} of {layers} layers" in model.source
    assert model.native_dtype == "fp8" and "match none" not in model.source


@pytest.mark.parametrize("name", FAMILIES)
def test_one_layers_mlp_and_another_layers_attention_are_their_own_matrices(name: str) -> None:
    family = FAMILIES[name]
    cfg = standard_names(family.cfg)[0]
    mlp = kept_modules(cfg, [family.mlp_pattern])
    assert mlp.params == sum(family.mlp.values()) and mlp.unmatched == ""
    assert mlp.where == f"dense MLP in 1 of {_layers(family)} layers"
    attention = kept_modules(cfg, ["lm_head", family.attention_pattern])
    assert attention.params == sum(family.attention.values())
    assert attention.where == f"attention in 1 of {_layers(family)} layers"


def test_a_two_matrix_mlp_is_counted_as_two() -> None:
    """StarCoder2-15B's layer 0 MLP: c_fc and c_proj, 2 × 6144 × 24576, not three matrices."""
    kept = kept_modules(STARCODER2, ["model.layers.0.mlp*"])
    assert kept.params == 2 * 6144 * 24576 == 301_989_888


@pytest.mark.parametrize("name", FAMILIES)
def test_the_linear_modules_are_the_familys_names(name: str) -> None:
    family = FAMILIES[name]
    modules = list(linear_modules(standard_names(family.cfg)[0]))
    assert len(modules) == _layers(family) * (len(family.attention) + len(family.mlp))
    first = {kind: [] for kind in ("attention", "dense MLP")}  # type: dict[str, list[str]]
    for kind, names in modules:
        if names[0].startswith(f"{family.root}.0."):
            first[kind].extend(names)
    assert first == {"attention": [f"{family.root}.0.{m}" for m in family.attention],
                     "dense MLP": [f"{family.root}.0.{m}" for m in family.mlp]}


@pytest.mark.parametrize(("cfg", "llama_name", "shown"), [
    (STARCODER2, "model.layers.0.mlp.gate_proj", "model.layers.N.self_attn.q_proj, .mlp.c_fc, ..."),
    (STARCODER2, "model.layers.*.self_attn.qkv_proj", "model.layers.N.self_attn.q_proj, .mlp.c_fc, ..."),
    (GPT_NEOX_20B, "model.layers.0.mlp.gate_proj",
     "gpt_neox.layers.N.attention.query_key_value, .mlp.dense_h_to_4h, ..."),
    (GPT2, "model.layers.*.self_attn*", "transformer.h.N.attn.c_attn, .mlp.c_fc, ..."),
    (PHI2, "model.layers.*.self_attn.o_proj", "model.layers.N.self_attn.q_proj, .mlp.fc1, ..."),
    (MINITRON_8B, "model.layers.0.mlp.gate_proj", "model.layers.N.self_attn.q_proj, .mlp.up_proj, ..."),
    (PHI4, "model.layers.*.self_attn.q_proj", "model.layers.N.self_attn.qkv_proj, .mlp.gate_up_proj, ..."),
    (GLM4_9B, "model.layers.0.mlp.up_proj", "model.layers.N.self_attn.q_proj, .mlp.gate_up_proj, ..."),
])
def test_a_llama_name_on_a_family_of_its_own_names_matches_nothing_and_is_said(cfg: dict[str, Any], llama_name: str,
                                                                                shown: str) -> None:
    kept = kept_modules(standard_names(cfg)[0], ["lm_head", llama_name])
    assert kept.params == 0 and kept.unmatched == llama_name
    model = model_from_config(_ignoring(cfg, ["lm_head", llama_name]), "m")
    assert model.kept_params == 0
    assert f"its exclude_modules names modules ('{llama_name}', ...) that match none named here ({shown})" \
        in model.source


@pytest.mark.parametrize("pattern", [
    "transformer.h.*.attn.c_attn", "*mlp.c_fc", "*c_proj", "gpt_neox.layers.*.attention.query_key_value",
    "*query_key_value", "*dense_h_to_4h", "*.dense_4h_to_h", "transformer.blocks.*.attn.Wqkv", "*Wqkv",
    "model.decoder.layers.0.fc1", "*fc2", "*.fc_in", "transformer.h.3.ln_1", "transformer.blocks.0.norm_1",
    "*ffn.up_proj",
])
def test_another_familys_words_matching_nothing_are_said(pattern: str) -> None:
    llama = {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 4,
             "intermediate_size": 128}
    assert kept_modules(llama, ["lm_head", "transformer.wte", "model.embed_tokens", pattern]).unmatched == pattern


def test_a_model_type_not_in_the_table_keeps_every_llama_spelling() -> None:
    """DBRX (fused expert parameters, ``transformer.blocks.N.ffn.experts.mlp``) is not among the families named
    here: matched in Llama's spellings, and its own names said as matching nothing."""
    dbrx = standard_names(DBRX)[0]
    assert kept_modules(dbrx, ["model.layers.0.self_attn*"]).params == 6144 * 6144 * 2 + 2 * 6144 * 1024
    own = kept_modules(dbrx, ["transformer.blocks.*.norm_attn_norm.attn.Wqkv"])
    assert own.params == 0 and own.unmatched == "transformer.blocks.*.norm_attn_norm.attn.Wqkv"


def test_experts_in_a_family_of_its_own_names_are_not_matched() -> None:
    with pytest.raises(NotMatched, match="a mixture of experts of model_type gpt2 is not matched"):
        kept_modules({**standard_names(GPT2)[0], "num_local_experts": 8, "num_experts_per_tok": 2}, ["*mlp*"])


def test_compressed_tensors_targets_resolve_against_the_familys_names() -> None:
    cfg = {**STARCODER2, "num_hidden_layers": 2}
    kinds = module_groups(cfg, scheme_targets({"g": {"targets": ["re:.*mlp.c_fc"]}}))
    assert kinds == {"attention": {None}, "dense MLP": {"g", None}}
    exact = module_groups(standard_names({**GPT_NEOX_20B, "num_hidden_layers": 1})[0],
                          scheme_targets({"g": {"targets": ["gpt_neox.layers.0.attention.query_key_value",
                                                            "gpt_neox.layers.0.attention.dense"]}}))
    assert exact == {"attention": {"g"}, "dense MLP": {None}}


def test_compressed_tensors_targets_in_llama_names_on_starcoder2_are_said_with_its_own_names() -> None:
    fp8 = {"weights": {"num_bits": 8, "type": "float", "strategy": "channel"}}
    nvfp4 = {"weights": {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16}}
    quant = {"quant_method": "compressed-tensors", "format": "mixed-precision", "ignore": ["lm_head"],
             "config_groups": {"group_0": {"targets": ["re:.*mlp.gate_proj"], **nvfp4},
                               "group_1": {"targets": ["re:.*self_attn.*"], **fp8}}}
    fmt = checkpoint_format({**STARCODER2, "quantization_config": quant})
    assert not fmt.read
    assert "its targets match none of the modules named here (model.layers.N.self_attn.q_proj, .mlp.c_fc, ...)" \
        in fmt.note
