"""Configs of families that name their shapes their own way (`tokometer.perf.configdialects`): each read as the
standard names, its parameter count against the published one, and the names it read said in its source line.

The configs are the published ``config.json`` files' shape fields (weights and tokenizers left out); the counts
are the model cards' (or the safetensors' size over two bytes a parameter): GPT-2 124 M, GPT-J 6.05 B, Falcon-7B
6.92 B (13.8 GB of bf16 files), Falcon-40B 41.8 B, MPT-7B 6.65 B, OPT-6.7B 6.66 B, BLOOM-7b1 7.07 B, StarCoder2-15B
15.96 B, ChatGLM3-6B 6.24 B, Qwen-7B 7.72 B, DBRX 132 B with 36 B active.
"""

from __future__ import annotations

from typing import Any

import pytest

from tokometer.perf.configdialects import mlp_matrices, standard_names, tied_embeddings
from tokometer.perf.loaders import model_from_config
from tokometer.util.errors import ConfigError

GPT2 = {"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12, "n_positions": 1024, "n_inner": None,
        "vocab_size": 50257, "activation_function": "gelu_new"}
GPTJ = {"model_type": "gptj", "n_embd": 4096, "n_layer": 28, "n_head": 16, "n_positions": 2048, "rotary_dim": 64,
        "vocab_size": 50400, "tie_word_embeddings": False}
FALCON_7B = {"model_type": "falcon", "hidden_size": 4544, "n_head": 71, "n_layer": 32, "multi_query": True,
             "parallel_attn": True, "vocab_size": 65024}
FALCON_40B = {"model_type": "falcon", "hidden_size": 8192, "num_attention_heads": 128, "num_hidden_layers": 60,
              "num_kv_heads": 8, "new_decoder_architecture": True, "multi_query": True, "vocab_size": 65024}
MPT_7B = {"model_type": "mpt", "d_model": 4096, "n_heads": 32, "n_layers": 32, "expansion_ratio": 4,
          "max_seq_len": 2048, "vocab_size": 50432, "attn_config": {"attn_type": "multihead_attention"}}
OPT = {"model_type": "opt", "hidden_size": 4096, "ffn_dim": 16384, "num_attention_heads": 32,
       "num_hidden_layers": 32, "max_position_embeddings": 2048, "vocab_size": 50272}
BLOOM = {"model_type": "bloom", "hidden_size": 4096, "n_layer": 30, "n_head": 32, "vocab_size": 250880}
STARCODER2 = {"model_type": "starcoder2", "hidden_size": 6144, "intermediate_size": 24576, "num_hidden_layers": 40,
              "num_attention_heads": 48, "num_key_value_heads": 4, "vocab_size": 49152,
              "hidden_act": "gelu_pytorch_tanh", "max_position_embeddings": 16384, "tie_word_embeddings": False}
CHATGLM3 = {"model_type": "chatglm", "hidden_size": 4096, "num_layers": 28, "num_attention_heads": 32,
            "multi_query_attention": True, "multi_query_group_num": 2, "kv_channels": 128,
            "ffn_hidden_size": 13696, "padded_vocab_size": 65024, "seq_length": 8192}
QWEN1 = {"model_type": "qwen", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
         "intermediate_size": 22016, "kv_channels": 128, "seq_length": 8192, "vocab_size": 151936}
DBRX = {"model_type": "dbrx", "d_model": 6144, "n_heads": 48, "n_layers": 40, "max_seq_len": 32768,
        "vocab_size": 100352, "attn_config": {"kv_n_heads": 8, "clip_qkv": 8},
        "ffn_config": {"ffn_hidden_size": 10752, "moe_num_experts": 16, "moe_top_k": 4}}


@pytest.mark.parametrize(("cfg", "params", "kv_heads", "context"), [
    (GPT2, 124e6, 12, 1024), (GPTJ, 6.05e9, 16, 2048), (FALCON_7B, 6.92e9, 1, 4096), (FALCON_40B, 41.8e9, 8, 4096),
    (MPT_7B, 6.65e9, 32, 2048), (OPT, 6.66e9, 32, 2048), (BLOOM, 7.07e9, 32, 4096),
    (STARCODER2, 15.96e9, 4, 16384), (CHATGLM3, 6.24e9, 2, 8192), (QWEN1, 7.72e9, 32, 8192),
], ids=["gpt2", "gpt-j", "falcon-7b", "falcon-40b", "mpt-7b", "opt-6.7b", "bloom-7b1", "starcoder2-15b", "chatglm3",
        "qwen-7b"])
def test_a_family_of_its_own_names_is_read_at_its_published_size(cfg: dict[str, Any], params: float,
                                                                 kv_heads: int, context: int) -> None:
    spec = model_from_config(cfg, str(cfg["model_type"]))
    assert spec.params == pytest.approx(params, rel=0.015)
    assert spec.kv_heads == kv_heads and spec.max_context == context


def test_dbrx_nested_shapes_give_its_experts_and_active_size() -> None:
    spec = model_from_config(DBRX, "dbrx")
    assert spec.params == pytest.approx(132e9, rel=0.01) and spec.active == pytest.approx(36e9, rel=0.02)
    assert (spec.experts, spec.experts_per_token, spec.kv_heads, spec.expert_width) == (16, 4, 8, 10752)
    assert "d_model as hidden_size" in spec.source and "ffn_config.moe_top_k as num_experts_per_tok" in spec.source


def test_a_standard_key_present_is_never_overwritten_by_another_name() -> None:
    cfg, read = standard_names({"hidden_size": 64, "n_embd": 999, "num_hidden_layers": 2, "n_layer": 7})
    assert (cfg["hidden_size"], cfg["num_hidden_layers"], read) == (64, 2, {})
    spec = model_from_config({**STARCODER2, "n_embd": 1}, "s")
    assert spec.hidden == 6144 and "read" not in spec.source


def test_the_mlp_matrices_follow_the_family_then_a_squared_relu() -> None:
    assert mlp_matrices({"model_type": "gpt_neox", "hidden_act": "gelu"}) == 2
    assert mlp_matrices({"model_type": "gemma3_text", "hidden_act": "gelu_pytorch_tanh"}) == 3  # gated GELU
    assert mlp_matrices({"model_type": "llama", "hidden_act": "silu"}) == 3
    assert mlp_matrices({"hidden_act": "relu2"}) == 2 and mlp_matrices({}) == 3
    assert mlp_matrices({}, default_act="relu2") == 2  # Nemotron-H's blocks


def test_tied_embeddings_follow_the_config_then_the_family() -> None:
    assert tied_embeddings({"model_type": "gpt2"}) and tied_embeddings({"model_type": "gemma2"})
    assert not tied_embeddings({"model_type": "gpt2", "tie_word_embeddings": False})
    assert not tied_embeddings({"model_type": "llama"}) and not tied_embeddings({})


@pytest.mark.parametrize(("cfg", "said"), [
    ({**GPT2, "n_embd": "768"}, "n_embd must be a whole number"),
    ({**GPT2, "n_layer": -1}, "n_layer must not be negative"),
    ({**GPT2, "n_layer": 2**30}, "n_layer must be from 1"),
    ({**DBRX, "ffn_config": [1]}, "its ffn_config is a JSON list, not an object"),
    ({**DBRX, "attn_config": "gqa"}, "its attn_config is a JSON str, not an object"),
    ({**DBRX, "ffn_config": {"ffn_hidden_size": 10752, "moe_num_experts": 16, "moe_top_k": 4.5}},
     "ffn_config.moe_top_k must be a whole number"),
    ({**MPT_7B, "expansion_ratio": "four"}, "expansion_ratio must be a number"),
    ({**MPT_7B, "expansion_ratio": 1e300}, "expansion_ratio must be a number"),
    ({"n_embd": 64, "n_head": 4}, "lacks a field the estimate needs: num_hidden_layers .or n_layer or n_layers"),
    ({"d_model": 512, "num_layers": 6, "num_heads": 8, "is_encoder_decoder": True}, "an encoder-decoder model"),
    ({**STARCODER2, "tie_word_embeddings": "false"}, "tie_word_embeddings must be true or false .got 'false'"),
    ({**FALCON_7B, "multi_query": 1}, "multi_query must be true or false .got 1"),
    ({"model_type": "bert", "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12},
     "an encoder .model_type bert"),
    ({"model_type": "mamba", "hidden_size": 2560, "num_hidden_layers": 64, "state_size": 16, "expand": 2},
     "a recurrent model .model_type mamba"),
    ({"model_type": "recurrent_gemma", "hidden_size": 2560, "num_hidden_layers": 26, "num_attention_heads": 10,
      "block_types": ["recurrent", "recurrent", "attention"]}, "a recurrent model .model_type recurrent_gemma"),
    ({"hidden_size": 2048, "num_hidden_layers": 24, "attention_hidden_size": 2048},
     "a recurrent model .a state size and no attention heads"),
])
def test_a_family_name_out_of_range_is_one_error_naming_it(cfg: dict[str, Any], said: str) -> None:
    with pytest.raises(ConfigError, match=said):
        model_from_config(cfg, "bad")
