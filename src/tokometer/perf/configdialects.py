"""What a ``config.json`` says in its family's own way: other names for its shapes (read as the Hugging Face names
the loaders use), how many matrices one of its MLPs has, whether its output layer is its embedding, and whether
its model is one the estimate models at all.

transformers gives several config classes an ``attribute_map`` (GPT-2's ``n_embd`` is its ``hidden_size``,
MPT's and DBRX's ``d_model`` too), custom-code models (ChatGLM) name their shapes their own way, and MPT and
DBRX keep part of them in nested ``attn_config`` / ``ffn_config`` objects. `standard_names` sets each standard
key a config lacks from the first of its other names present (`ALIASES`), and says which it read; a standard
key the config has is never overwritten. A multi-query flag (Falcon's and StarCoder's ``multi_query``,
ChatGLM's ``multi_query_attention`` with its group count) gives the KV heads, and MPT's ``expansion_ratio``
its MLP width; Qwen 1's ``intermediate_size`` is its two gated halves together, halved here.

`not_modelled`: why a config's model is not one the estimate models (an encoder-decoder, an encoder alone, a
recurrent model without attention), said before a missing attention field would be.

`tied_embeddings`: whether the output layer is the embedding, where the config does not say (`TIED_TYPES`).

`mlp_matrices`: a gated MLP (SwiGLU, GeGLU: gate, up, down) has three matrices of hidden × width, the plain one of
GPT-2, GPT-NeoX, Falcon, OPT, Bloom, MPT, StarCoder2, Phi-2 and Nemotron (GELU or squared ReLU: up, down) two.
The activation alone does not tell them apart (Gemma's gated MLP runs GELU), so the family (``model_type``)
decides, then a squared-ReLU activation; any other config is taken as gated, as Llama and most models of 2024
on are.
"""

from __future__ import annotations

from typing import Any

from tokometer.util.shown import value_shown

__all__ = ["ALIASES", "ENCODER_TYPES", "PLAIN_MLP_TYPES", "RECURRENT_TYPES", "TIED_TYPES", "mlp_matrices",
           "not_modelled", "standard_names", "tied_embeddings"]

ALIASES: dict[str, tuple[str, ...]] = {
    "hidden_size": ("n_embd", "d_model", "n_embed"),
    "num_hidden_layers": ("n_layer", "n_layers", "num_layers"),
    "num_attention_heads": ("n_head", "n_heads"),
    "num_key_value_heads": ("num_kv_heads", "n_head_kv", "attn_config.kv_n_heads"),
    "max_position_embeddings": ("n_positions", "max_seq_len", "seq_length", "n_ctx"),
    "intermediate_size": ("n_inner", "ffn_dim", "ffn_hidden_size", "ffn_config.ffn_hidden_size"),
    "vocab_size": ("padded_vocab_size",),
    "head_dim": ("kv_channels",),
    "num_local_experts": ("ffn_config.moe_num_experts",),
    "num_experts_per_tok": ("ffn_config.moe_top_k",),
}
"""Each standard key's other names, first found first (``a.b``: key ``b`` of the nested object ``a``), from
transformers' ``attribute_map`` of GPT-2, GPT-J, GPTBigCode, Falcon, Bloom, MPT and DBRX, their own config
fields (OPT's ``ffn_dim``, Falcon's ``num_kv_heads``, DBRX's ``ffn_config``) and ChatGLM's."""

PLAIN_MLP_TYPES = frozenset({
    "bloom", "codegen", "falcon", "gpt2", "gpt_bigcode", "gpt_neo", "gpt_neox", "gptj", "mpt", "nemotron", "opt",
    "persimmon", "phi", "starcoder2"})
"""``model_type``s whose MLP is up, activation, down (transformers' modelling code for each)."""
TIED_TYPES = frozenset({"bloom", "falcon", "gpt2", "gpt_bigcode", "mpt", "opt"})
"""``model_type``s whose output layer is their embedding where the config does not say (``tie_word_embeddings``
left at transformers' default, true), with Gemma's (``gemma``, ``gemma2``, ``gemma3``, ...); the rest's config
classes default to untied, as Llama's."""
ENCODER_TYPES = frozenset({
    "albert", "bert", "camembert", "deberta", "deberta-v2", "distilbert", "electra", "modernbert", "mpnet",
    "nomic_bert", "roberta", "xlm-roberta"})
"""``model_type``s of encoders (BERT and its kin: embedding and classification models that do not generate)."""
RECURRENT_TYPES = frozenset({
    "falcon_mamba", "mamba", "mamba2", "recurrent_gemma", "rwkv", "rwkv5", "rwkv6", "rwkv7", "xlstm"})
"""``model_type``s of recurrent models whose layers are not attention, or not only (Mamba, Mamba2 alone, RWKV,
xLSTM, RecurrentGemma's Griffin blocks): the estimate reads Mamba2 and Gated DeltaNet layers only beside
attention, in the hybrids `tokometer.perf.hybrid` names."""
_BOTH_HALVES_TYPES = frozenset({"qwen"})
"""``model_type``s whose ``intermediate_size`` is the gate's and the up projection's widths together (Qwen 1's
MLP: ``w1`` and ``w2`` of ``intermediate_size // 2`` each)."""
_PLAIN_ACTS = frozenset({"relu2", "relu_squared", "squared_relu"})
_NESTED = ("attn_config", "ffn_config")


def _nested(cfg: dict[str, Any], name: str) -> dict[str, Any]:
    """The nested object ``name`` of ``cfg`` ({} where absent); ValueError where it is not an object."""
    inner = cfg.get(name)
    if inner is None:
        return {}
    if not isinstance(inner, dict):
        raise ValueError(f"its {name} is a JSON {type(inner).__name__}, not an object")
    return inner


def _lookup(cfg: dict[str, Any], name: str) -> Any:
    """``cfg[name]``, or for ``a.b`` the nested ``cfg[a][b]``; None where absent."""
    outer, _, inner = name.rpartition(".")
    return _nested(cfg, outer).get(inner) if outer else cfg.get(name)


def _kv_heads(cfg: dict[str, Any]) -> tuple[Any, str] | None:
    """The KV heads a multi-query flag gives, and the key that said so; None without one. MPT's plain
    multi-head attention (``attn_config.attn_type``) has as many KV heads as heads."""
    if cfg.get("multi_query_attention") is True and cfg.get("multi_query_group_num") is not None:
        return cfg["multi_query_group_num"], "multi_query_group_num"
    if cfg.get("multi_query") is True and cfg.get("new_decoder_architecture") is not True:
        return 1, "multi_query"
    kind = _nested(cfg, "attn_config").get("attn_type")
    if kind == "multihead_attention" and cfg.get("num_attention_heads") is not None:
        return cfg["num_attention_heads"], "attn_config.attn_type"
    if kind == "multiquery_attention":
        return 1, "attn_config.attn_type"
    return None


def standard_names(cfg: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """(``cfg`` with each standard key it lacks set from its first other name present (`ALIASES`), the other
    names read: standard key → the name it was read from). ValueError where a nested object is not one."""
    merged, read = dict(cfg), {}
    for name in _NESTED:
        _nested(merged, name)
    for key, others in ALIASES.items():
        if merged.get(key) is not None:
            continue
        if key == "num_key_value_heads" and (flag := _kv_heads(merged)) is not None:
            merged[key], read[key] = flag
            continue
        for other in others:
            value = _lookup(merged, other)
            if value is not None:
                merged[key], read[key] = value, other
                break
    width = merged.get("intermediate_size")
    if str(merged.get("model_type")).lower() in _BOTH_HALVES_TYPES and isinstance(width, int) and width > 0:
        merged["intermediate_size"], read["intermediate_size"] = width // 2, "intermediate_size / 2"
    if merged.get("intermediate_size") is None and merged.get("expansion_ratio") is not None:
        ratio = merged["expansion_ratio"]
        if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0 < ratio <= 1024:
            raise ValueError(f"expansion_ratio must be a number from 0 to 1,024 (got {value_shown(ratio)})")
        hidden = merged.get("hidden_size")
        if isinstance(hidden, int) and not isinstance(hidden, bool):
            merged["intermediate_size"], read["intermediate_size"] = round(ratio * hidden), "expansion_ratio"
    return merged, read


def mlp_matrices(cfg: dict[str, Any], default_act: str = "silu") -> int:
    """Matrices of one of the model's MLPs or experts, each hidden × width: 2 for a plain MLP (its family in
    `PLAIN_MLP_TYPES`, or a squared-ReLU activation: ``mlp_hidden_act``, else ``hidden_act``, else
    ``default_act``), 3 for a gated one (module docstring)."""
    kind = cfg.get("model_type")
    if isinstance(kind, str) and kind.lower() in PLAIN_MLP_TYPES:
        return 2
    act = cfg.get("mlp_hidden_act") or cfg.get("hidden_act") or default_act
    return 2 if isinstance(act, str) and act.lower() in _PLAIN_ACTS else 3


def tied_embeddings(cfg: dict[str, Any]) -> bool:
    """Whether the model's output layer is its embedding: ``tie_word_embeddings``, else its family's default
    (`TIED_TYPES`, Gemma's)."""
    if "tie_word_embeddings" in cfg:
        return bool(cfg["tie_word_embeddings"])
    kind = cfg.get("model_type")
    kind = kind.lower() if isinstance(kind, str) else ""
    return kind in TIED_TYPES or kind.startswith("gemma")


def not_modelled(cfg: dict[str, Any]) -> str | None:
    """Why the estimate does not model this config's model (None: it may): an encoder-decoder
    (``is_encoder_decoder``), an encoder alone (`ENCODER_TYPES`), a recurrent model (`RECURRENT_TYPES`, or a
    state size with no attention heads under any name)."""
    kind = cfg.get("model_type")
    kind = kind.lower() if isinstance(kind, str) else ""
    if cfg.get("is_encoder_decoder") is True:
        return ("it describes an encoder-decoder model (is_encoder_decoder: T5, BART, Whisper), which the estimate "
                "does not model: it reads decoder-only transformers")
    if kind in ENCODER_TYPES:
        return (f"it describes an encoder (model_type {kind}: it encodes text, it does not generate it), which the "
                "estimate does not model: it reads decoder-only transformers")
    heads = any(cfg.get(key) is not None for key in ("num_attention_heads", *ALIASES["num_attention_heads"]))
    state = any(cfg.get(key) is not None for key in ("state_size", "ssm_state_size", "attention_hidden_size"))
    if kind in RECURRENT_TYPES or (state and not heads):
        what = f"model_type {kind}" if kind else "a state size and no attention heads"
        return (f"it describes a recurrent model ({what}: Mamba, RWKV, xLSTM, Griffin), which the estimate does not "
                "model: it reads transformers, and Mamba2 or Gated DeltaNet layers only beside attention "
                "(Nemotron-H, Granite 4.0-H, Qwen3-Next)")
    return None
