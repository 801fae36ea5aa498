"""Where a `ModelSpec` comes from: a built-in name, a Hugging Face ``config.json``, or a GGUF header.

``resolve_model(x)`` tries, in order: a ``.gguf`` file; a directory or file with ``config.json``;
the built-in table (by name, alias or Hub id, spelling-insensitive: ``Llama-3.1-8B-Instruct``,
``meta-llama/Llama-3.1-8B-Instruct`` and ``llama3.1:8b`` are one model); a Hub id fetched with
``huggingface_hub`` when it is installed and the Hub is reachable. Anything else is a ConfigError
that lists the closest built-in names.

Parameter counts from a config.json are computed from its shapes (attention, MLP or experts,
embeddings; norms and biases left out) unless safetensors files give the exact size. From a GGUF
they are exact: the sum of its tensors' elements, and the weight bytes are its tensor data.
"""

from __future__ import annotations

import difflib
import functools
import math
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from tokometer.perf.catalog import BUILTIN_MODELS, MODEL_ALIASES
from tokometer.perf.checkpointquant import CheckpointFormat, checkpoint_format
from tokometer.perf.configdialects import ALIASES, mlp_matrices, not_modelled, standard_names, tied_embeddings
from tokometer.perf.hybrid import (
    MAX_SIZE,
    BlockPattern,
    NotModelled,
    Recurrent,
    block_pattern,
    recurrent_layers,
)
from tokometer.perf.model import ModelSpec
from tokometer.perf.moelayout import moe_layout
from tokometer.perf.quant import normalize_dtype
from tokometer.perf.unquantized import KeptModules, NotMatched, kept_modules, names_shown
from tokometer.util.errors import ConfigError
from tokometer.util.gguf import TOKENIZER_ARRAYS, GGUFFile, quantization_of, read_gguf
from tokometer.util.hubreach import hub_reachable
from tokometer.util.jsonstream import JsonLimits, JsonStream
from tokometer.util.shown import FIELD_CHARS, quoted, value_shown

__all__ = ["model_from_config", "model_from_gguf", "resolve_model", "weights_on_disk"]

_NATIVE_BYTES = {"bf16": 2.0, "fp16": 2.0, "fp32": 4.0}


def _key(name: str) -> str:
    key = name.strip().lower().rsplit("/", 1)[-1]
    key = re.sub(r"-(instruct|it|chat|hf)(?=$|-)", "", key)
    return re.sub(r"[^a-z0-9.]", "", key)


@functools.cache
def _builtin_index() -> dict[str, str]:
    """Each built-in model's keys (its name, Hub id and aliases, `_key`) to its name: built once, as the tables
    are constants (a lookup by a long list of figures rebuilt it each time)."""
    index: dict[str, str] = {}
    for name, spec in BUILTIN_MODELS.items():
        index[_key(name)] = name
        index[_key(spec.hf_id)] = name
    for alias, name in MODEL_ALIASES.items():
        index[_key(alias)] = name
    return index


def _layer_params(cfg: dict[str, Any], hidden: int, heads: int, kv_heads: int, head_dim: int) -> float:
    if cfg.get("kv_lora_rank"):
        rope, nope = int(cfg.get("qk_rope_head_dim", 64)), int(cfg.get("qk_nope_head_dim", 128))
        v_dim, rank, q_rank = int(cfg.get("v_head_dim", 128)), int(cfg["kv_lora_rank"]), cfg.get("q_lora_rank")
        q = hidden * int(q_rank) + int(q_rank) * heads * (nope + rope) if q_rank else hidden * heads * (nope + rope)
        return float(q + hidden * (rank + rope) + rank * heads * (nope + v_dim) + heads * v_dim * hidden)
    gate = bool(cfg.get("attn_output_gate", str(cfg.get("model_type", "")).startswith(("qwen3_next", "qwen3_5"))))
    q = hidden * heads * head_dim * (2 if gate else 1)  # a gated attention's q projection also makes its gate
    return float(q + hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim)  # q (+ gate), o; k, v


def _sliding(cfg: dict[str, Any]) -> tuple[int, int]:
    """(window, layers with it), where the config says which layers have one: ``layer_types`` ("sliding_attention",
    Llama 4's "chunked_attention", against "full_attention"), Gemma 3's ``sliding_window_pattern`` (every n-th
    layer full), or Llama 4's ``attention_chunk_size`` with ``no_rope_layers`` (1: a chunked RoPE layer; three in
    four by default). A bare ``sliding_window`` says nothing (Qwen2's configs carry one they do not use)."""
    layers = int(cfg["num_hidden_layers"])
    chunk = int(cfg.get("attention_chunk_size") or 0)
    window = max(int(cfg.get("sliding_window") or 0), 0) or chunk
    kinds = cfg.get("layer_types")
    if window and isinstance(kinds, list):
        return window, sum(1 for kind in kinds if kind in ("sliding_attention", "chunked_attention"))
    pattern = int(cfg.get("sliding_window_pattern") or 0)
    if window and pattern > 1:
        return window, layers - layers // pattern
    if chunk:
        rope = cfg.get("no_rope_layers")
        return chunk, sum(1 for x in rope if x) if isinstance(rope, list) else layers - layers // 4
    return 0, 0


def _sparse(cfg: dict[str, Any]) -> tuple[int, int, int, int]:
    """A sparse attention's fields (DeepSeek V3.2's and GLM-5's ``index_topk``, ``index_n_heads``,
    ``index_head_dim``), and the layers that run their own indexer: GLM-5's ``indexer_types`` ("full" ones; the
    "shared" reuse one) or one in ``index_topk_freq``; every layer (0) otherwise. All 0 for dense attention."""
    topk = int(cfg.get("index_topk") or 0)
    if topk <= 0:
        return 0, 0, 0, 0
    layers = int(cfg["num_hidden_layers"])
    kinds = cfg.get("indexer_types")
    freq = int(cfg.get("index_topk_freq") or 1)
    own = (sum(1 for kind in kinds if kind == "full") if isinstance(kinds, list)
           else -(-layers // freq) if freq > 1 else 0)
    heads, dim = int(cfg.get("index_n_heads") or 0), int(cfg.get("index_head_dim") or 0)
    if heads < 0 or dim < 0 or own < 0:
        raise ValueError("index_n_heads, index_head_dim and the indexer layers must not be negative")
    return topk, heads, dim, own


def _params_from_config(cfg: dict[str, Any], hidden: int, heads: int, kv_heads: int, head_dim: int,
                        tied: bool, linear: int = 0, linear_params: float = 0.0) -> tuple[float, float, int, int]:
    """(params, active params, experts, experts per token) from a config's shapes (each MLP and expert of
    `mlp_matrices` matrices); ``linear`` of the layers are linear-attention ones of ``linear_params`` each in
    place of the attention's."""
    layers, vocab, matrices = int(cfg["num_hidden_layers"]), int(cfg.get("vocab_size", 32000)), mlp_matrices(cfg)
    inter = int(cfg.get("intermediate_size") or 4 * hidden)
    experts = int(cfg.get("num_local_experts") or cfg.get("n_routed_experts") or cfg.get("num_experts") or 0)
    per_token = int(cfg.get("num_experts_per_tok") or cfg.get("experts_per_token") or 0)
    attention = _layer_params(cfg, hidden, heads, kv_heads, head_dim) * (layers - linear) + linear_params * linear
    embeddings = float(vocab * hidden * (1 if tied else 2))
    if experts <= 1 or per_token <= 0:  # Granite 4.0-H's dense MLP is its shared one
        mlp = float(matrices * hidden * int(cfg.get("shared_intermediate_size") or inter) * layers)
        return attention + mlp + embeddings, attention + mlp + embeddings, 0, 0
    expert_size = float(matrices * hidden * int(cfg.get("moe_intermediate_size") or inter))
    moe, dense_width, shared_width = moe_layout(cfg, layers, inter)
    shared = float(matrices * hidden * shared_width)
    moe_layers = len(moe)
    dense_layers = layers - moe_layers
    dense = float(matrices * hidden * dense_width * dense_layers)
    total = attention + dense + moe_layers * (experts * expert_size + shared + hidden * experts) + embeddings
    active = attention + dense + moe_layers * (per_token * expert_size + shared + hidden * experts) + embeddings
    return total, active, experts, per_token


def _block_params(cfg: dict[str, Any], hidden: int, heads: int, kv_heads: int, head_dim: int, tied: bool,
                  blocks: BlockPattern, recurrent: Recurrent) -> tuple[float, float, int, int]:
    """(params, active params, experts, experts per token) of a model of single blocks (Nemotron-H: attention,
    Mamba2, MLP or experts, `tokometer.perf.hybrid`); its MLPs and experts of `mlp_matrices` matrices each."""
    matrices, vocab = mlp_matrices(cfg, default_act="relu2"), int(cfg.get("vocab_size", 32000))
    experts = int(cfg.get("n_routed_experts") or cfg.get("num_local_experts") or cfg.get("num_experts") or 0)
    per_token = int(cfg.get("num_experts_per_tok") or 0)
    fixed = (_layer_params(cfg, hidden, heads, kv_heads, head_dim) * blocks.attention
             + recurrent.params * blocks.mamba + blocks.mlp * matrices * hidden * int(cfg.get("intermediate_size") or 0)
             + float(vocab * hidden * (1 if tied else 2)))
    if not blocks.moe or experts <= 1 or per_token <= 0:
        return fixed, fixed, 0, 0
    expert = matrices * hidden * int(cfg.get("moe_intermediate_size") or cfg.get("intermediate_size") or 0)
    shared = matrices * hidden * int(cfg.get("moe_shared_expert_intermediate_size") or 0) * int(
        cfg.get("n_shared_experts") or 1)
    total = fixed + blocks.moe * (experts * expert + shared + hidden * experts)
    active = fixed + blocks.moe * (per_token * expert + shared + hidden * experts)
    return total, active, experts, per_token


def _merged(cfg: Any) -> tuple[dict[str, Any], dict[str, str]]:
    """The config with a multimodal one's language part (``text_config``, or ``llm_config``) over it and other
    families' names for its shapes read as the standard ones (`standard_names`), and those it read so."""
    if not isinstance(cfg, dict):
        raise ValueError(f"it is a JSON {type(cfg).__name__}, not an object")
    merged = dict(cfg)
    for key in ("text_config", "llm_config"):
        inner = cfg.get(key)
        if inner is not None and not isinstance(inner, dict):
            raise ValueError(f"its {key} is a JSON {type(inner).__name__}, not an object")
        merged.update(inner or {})
    merged, read = standard_names(merged)
    for key in _WHOLE_NUMBER_KEYS.intersection(merged):
        value, name = merged[key], read.get(key, key)
        if value is None:
            continue
        whole = _whole(value)
        if whole is None:
            raise ValueError(f"{name} must be a whole number (got {value_shown(value)})")
        if whole < 0 and key not in _NEGATIVE_MEANS_NONE:
            raise ValueError(f"{name} must not be negative (got {whole:,})")
        limit = _BOUNDS.get(key, MAX_SIZE)
        if limit is not None and whole > limit:  # before anything multiplies it: a width of 1e300 made counts
            raise ValueError(f"{name} must be at most {limit:,} (got {whole:,.6g})")  # past a float's range
    for key in _BOOLEAN_KEYS.intersection(merged):
        if merged[key] is not None and not isinstance(merged[key], bool):
            raise ValueError(f"{key} must be true or false (got {value_shown(merged[key])})")
    layers = merged.get("num_hidden_layers")
    if layers is not None and not 1 <= layers <= MAX_SIZE:  # before any reader counts layers one by one
        name = read.get("num_hidden_layers", "num_hidden_layers")
        raise ValueError(f"{name} must be from 1 to {MAX_SIZE:,} (got {layers:,.6g})")
    return merged, read


_MAX_CONTEXT = 1 << 31
_BOUNDS: dict[str, int | None] = {
    **dict.fromkeys(("attention_chunk_size", "index_topk", "max_position_embeddings", "max_seq_len", "sliding_window"),
                    _MAX_CONTEXT),
    "first_k_dense_replace": None, "num_hidden_layers": None}
"""The upper bound of a whole-number key where it is not `MAX_SIZE` (widths, heads, experts): tokens of a context
`_MAX_CONTEXT`; none for a threshold only compared (``first_k_dense_replace`` past the layers: every layer dense)
and for the layers, bounded from 1 just after with a message of their own."""
_BOOLEAN_KEYS = frozenset({"attn_output_gate", "is_encoder_decoder", "multi_query", "multi_query_attention",
                           "new_decoder_architecture", "tie_word_embeddings"})
"""The config's keys the loaders read as flags: each, where present and not null, must be a JSON true or false
(``"false"`` had read as true)."""
_NEGATIVE_MEANS_NONE = frozenset({"sliding_window"})
"""Whole-number keys where a negative value is the usual spelling of none (``sliding_window: -1``, no window)."""
_WHOLE_NUMBER_KEYS = frozenset({
    "attention_chunk_size", "experts_per_token", "first_k_dense_replace", "full_attention_interval", "head_dim",
    "hidden_size", "index_head_dim", "index_n_heads", "index_topk", "index_topk_freq", "interleave_moe_layer_step",
    "intermediate_size", "intermediate_size_mlp", "kv_lora_rank", "mamba_expand", "max_position_embeddings",
    "max_seq_len", "moe_intermediate_size", "moe_shared_expert_intermediate_size", "n_routed_experts",
    "n_shared_experts", "num_attention_heads", "num_experts", "num_experts_per_tok", "num_hidden_layers",
    "num_key_value_heads", "num_local_experts", "q_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim",
    "shared_expert_intermediate_size", "shared_intermediate_size", "sliding_window", "sliding_window_pattern",
    "v_head_dim", "vocab_size"})
"""The config's keys the loaders read as counts: each, where present and not null, must be a JSON whole number
(`_whole`), not negative and within its bound (`_BOUNDS`): ``true``, ``4096.5`` or ``"4096"`` is refused
by name rather than read as 1, 4096 or 4096, ``-3`` rather than counted from (a negative
``first_k_dense_replace`` made millions of layers), and ``1e300`` rather than multiplied."""


def _spec_from_config(cfg: dict[str, Any], name: str, source: str) -> ModelSpec:
    """The shapes and counts of a (merged) config as a ModelSpec: KeyError, TypeError or ValueError where a field
    is missing or unusable, `NotModelled` where its layers are of a kind the estimate does not model."""
    if (why := not_modelled(cfg)) is not None:
        raise NotModelled(why)
    hidden, heads = int(cfg["hidden_size"]), int(cfg["num_attention_heads"])
    if hidden < 1 or heads < 1 or int(cfg["num_hidden_layers"]) < 1:
        raise ValueError("hidden_size, num_attention_heads and num_hidden_layers must be at least 1")
    if cfg.get("kv_lora_rank"):
        head_dim = int(cfg.get("qk_nope_head_dim", 128)) + int(cfg.get("qk_rope_head_dim", 64))
    else:
        head_dim = int(cfg.get("head_dim") or hidden // heads)
    kv_heads = int(cfg.get("num_key_value_heads") or heads)
    tied = tied_embeddings(cfg)
    layers = int(cfg["num_hidden_layers"])
    blocks = block_pattern(cfg, layers)
    recurrent = recurrent_layers(cfg, hidden, layers, blocks)
    if blocks is None:
        params, active, experts, per_token = _params_from_config(cfg, hidden, heads, kv_heads, head_dim, tied,
                                                                 recurrent.layers, recurrent.params)
    else:
        params, active, experts, per_token = _block_params(cfg, hidden, heads, kv_heads, head_dim, tied, blocks,
                                                           recurrent)
    window, window_layers = _sliding(cfg)
    topk, indexer_heads, indexer_dim, indexer_layers = _sparse(cfg)
    return ModelSpec(
        name=name, params=params, layers=blocks.mixers if blocks else layers, hidden=hidden, heads=heads,
        kv_heads=kv_heads, head_dim=head_dim, vocab=int(cfg.get("vocab_size", 32000)),
        max_context=int(cfg.get("max_position_embeddings") or cfg.get("max_seq_len") or 4096),
        intermediate=int(cfg.get("intermediate_size") or 0), active_params=active if experts else None,
        experts=experts, experts_per_token=per_token, v_head_dim=int(cfg.get("v_head_dim") or 0),
        expert_width=int(cfg.get("moe_intermediate_size") or cfg.get("intermediate_size") or 0) if experts else 0,
        kv_lora_rank=int(cfg.get("kv_lora_rank") or 0), qk_rope_head_dim=int(cfg.get("qk_rope_head_dim") or 0),
        tied_embeddings=tied, hf_id=name, source=source,
        native_dtype=normalize_dtype(str(cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16")),
        sliding_window=window, sliding_layers=window_layers, chunked_windows=bool(cfg.get("attention_chunk_size")),
        sparse_topk=topk, indexer_heads=indexer_heads,
        indexer_head_dim=indexer_dim, indexer_layers=indexer_layers, recurrent_layers=recurrent.layers,
        recurrent_state_bytes=recurrent.state_bytes, recurrent_flops_per_token=recurrent.flops_per_token)


_SHAPES = {"layers": "num_hidden_layers", "hidden": "hidden_size", "heads": "num_attention_heads",
           "kv_heads": "num_key_value_heads", "head_dim": "head_dim"}
"""ModelSpec fields that must be at least 1, by the config key they come from."""
_COUNTS = {"vocab": "vocab_size", "intermediate": "intermediate_size", "experts": "the experts",
           "experts_per_token": "num_experts_per_tok", "v_head_dim": "v_head_dim", "kv_lora_rank": "kv_lora_rank",
           "qk_rope_head_dim": "qk_rope_head_dim", "sliding_window": "sliding_window",
           "sliding_layers": "the window layers", "sparse_topk": "index_topk", "indexer_heads": "index_n_heads",
           "indexer_head_dim": "index_head_dim", "indexer_layers": "the indexer layers",
           "expert_width": "moe_intermediate_size"}
"""ModelSpec fields that may be 0."""


def _check_shapes(spec: ModelSpec) -> None:
    """ValueError naming the first field out of range: every shape a whole number up to `MAX_SIZE` (the context
    up to `_MAX_CONTEXT`), the ones in `_SHAPES` at least 1, no more experts a token than experts, and the
    parameters a positive finite count with the active ones no more than all of them."""
    for field, key in (*_SHAPES.items(), *_COUNTS.items()):
        value, low = getattr(spec, field), 1 if field in _SHAPES else 0
        if not low <= value <= MAX_SIZE:
            raise ValueError(f"{key} must be from {low} to {MAX_SIZE:,} (got {value:,.6g})")
    if not 1 <= spec.max_context <= _MAX_CONTEXT:
        raise ValueError(f"max_position_embeddings must be from 1 to {_MAX_CONTEXT:,} (got {spec.max_context:,})")
    if spec.experts and spec.experts_per_token > spec.experts:
        raise ValueError(f"num_experts_per_tok ({spec.experts_per_token:,}) is more than the model's {spec.experts:,} "
                         "routed experts")
    if not (math.isfinite(spec.params) and 0 < spec.params <= _MAX_PARAMS and 0 < spec.active <= spec.params):
        raise ValueError(f"its shapes give {spec.params:,.6g} parameters, {spec.active:,.6g} of them active (at most "
                         f"{_MAX_PARAMS:,.0g})")


def _kept_modules(cfg: dict[str, Any], fmt: CheckpointFormat) -> tuple[KeptModules, str]:
    """The modules a checkpoint's list (``fmt.exclude``) keeps in 16 bits (`kept_modules`) and what its source line
    says of them: how many parameters and where; where the list is not read or not matched, why, and that they are
    sized in the declared format."""
    declared, field = fmt.weights or fmt.experts, fmt.exclude_field
    if fmt.exclude_problem:
        return KeptModules(), f"{fmt.exclude_problem}: the modules its {field} names are sized in {declared}"
    if fmt.exclude is None:
        return KeptModules(), ""
    try:
        kept = kept_modules(cfg, fmt.exclude, field, experts_by_layer=fmt.experts_by_layer)
    except NotMatched as exc:
        return KeptModules(), f"{exc}: the modules its {field} names are sized in {declared}"
    total = kept.params + kept.expert_params
    if kept.unmatched:
        return kept, (f"its {field} names modules ({quoted(kept.unmatched, FIELD_CHARS)}, ...) that match none named "
                      f"here ({names_shown(cfg)}): they are sized in {declared}")
    return kept, f"{field}: {total / 1e9:,.2f} B params in 16 bits, {kept.where}" if total else ""


def model_from_config(cfg: dict[str, Any], name: str, weight_bytes: float | None = None,
                      source: str = "config.json", quant_sidecar: Any = None) -> ModelSpec:
    """A ModelSpec from a Hugging Face ``config.json`` (a multimodal one's ``text_config`` or ``llm_config`` is
    used); anything missing, out of range or of a kind not modelled is a one-line ConfigError. Its formats are
    those its ``quantization_config`` (else ``quant_sidecar``, an ``hf_quant_config.json``) declares
    (`tokometer.perf.checkpointquant`); ``weight_bytes`` (the files' size) is its exact size in them."""
    try:
        cfg, read = _merged(cfg)
        spec = _spec_from_config(cfg, name, source)
        _check_shapes(spec)
    except NotModelled as exc:
        raise ConfigError(f"{name}: {exc}; estimate a built-in model or a transformer's config.json") from exc
    except KeyError as exc:
        key = str(exc.args[0])
        others = f" (or {' or '.join(ALIASES[key])})" if key in ALIASES else ""
        raise ConfigError(f"{name}: config.json lacks a field the estimate needs: {key}{others}") from exc
    except (TypeError, ValueError, ArithmeticError) as exc:
        raise ConfigError(f"{name}: config.json has a field the estimate cannot use ({exc})") from exc
    if read:
        names = ", ".join(f"{other} as {key}" for key, other in read.items())
        spec = replace(spec, source=f"{spec.source} (read {names})")
    fmt = checkpoint_format(cfg, quant_sidecar, spec.is_moe)
    kept, kept_note = _kept_modules(cfg, fmt) if fmt.read else (KeptModules(), "")
    note = "; ".join(filter(None, (fmt.note, kept_note)))
    if note:
        spec = replace(spec, source=f"{spec.source} ({note})")
    spec = replace(spec, native_kv_dtype=fmt.kv)
    if fmt.read:  # gpt-oss: experts in mxfp4, the rest in torch_dtype
        return replace(spec, native_dtype=fmt.weights or spec.native_dtype, expert_dtype=fmt.experts,
                       weight_bytes=weight_bytes, kept_params=kept.params, kept_expert_params=kept.expert_params,
                       native_bits=fmt.bits, native_expert_bits=fmt.expert_bits)
    if fmt.unread:  # a format not read: the files' size is not the torch_dtype's
        return spec
    if weight_bytes and spec.native_dtype in _NATIVE_BYTES:
        scale = weight_bytes / _NATIVE_BYTES[spec.native_dtype] / spec.params
        return replace(spec, params=spec.params * scale,
                       active_params=spec.active_params * scale if spec.active_params else None,
                       weight_bytes=weight_bytes, source=f"{spec.source} + safetensors sizes")
    return spec


_CONFIG_LIMITS = JsonLimits(file_bytes=16 << 20, tree_bytes=256 << 20, token_chars=1 << 20, line_bytes=16 << 20,
                           nesting=64, entries=1 << 20, refusal="not read as a model", what="model config")
"""What a model's ``config.json`` or safetensors index may hold: a config is a few KiB (one that lists every
quantised module, a few hundred), an index's weight map a few MiB."""


def _read_json(path: Path) -> Any:
    """The one JSON document in ``path``, read within `_CONFIG_LIMITS` (ConfigError naming it otherwise)."""
    return JsonStream(path, _CONFIG_LIMITS, ConfigError).document()


def weights_on_disk(directory: Path) -> float | None:
    """Bytes of the safetensors weights in ``directory`` (its index's total_size, else the files' sizes); an index
    that cannot be read or holds no positive finite total_size is passed over for the files' sizes."""
    index = directory / "model.safetensors.index.json"
    if index.is_file():
        try:
            meta = _read_json(index).get("metadata", {})
            total = float(meta.get("total_size") or 0)
        except (ConfigError, AttributeError, TypeError, ValueError):
            total = 0.0
        if math.isfinite(total) and total > 0:
            return total
    sizes = [p.stat().st_size for p in directory.glob("*.safetensors")]
    return float(sum(sizes)) if sizes else None


def _gguf_tensors(gguf: GGUFFile) -> tuple[float, float, int, bool]:
    """(params, routed-expert params, vocab, has a separate LM head) from the tensor table."""
    params = experts = 0.0
    vocab = 0
    lm_head = False
    for tensor in gguf.tensors:
        count = tensor.elements
        params += count
        if "_exps." in tensor.name:
            experts += count
        if tensor.name == "token_embd.weight" and len(tensor.shape) == 2:
            vocab = tensor.shape[1]
        lm_head = lm_head or tensor.name == "output.weight"
    return params, experts, vocab, lm_head


_MAX_PARAMS = 1e14
"""The most parameters a config's shapes may give (100 T; the largest released models have 1-2 T): past it a
field is out of range, and counts near a float's range overflow in what is computed from them."""


def _whole(value: Any) -> int | None:
    """``value`` as a whole number (an int, or a float with no fraction), else None; bools are not numbers."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return None


_GGUF_WINDOW_PATTERN = {"gemma2": 2, "gemma3": 6, "gemma3n": 5, "gemma-embedding": 6, "cohere2": 4, "olmo2": 4,
                        "gpt-oss": 2, "llama4": 4}
"""llama.cpp's pattern of window layers by architecture when a GGUF header has a sliding window but no
``attention.sliding_window_pattern``: every n-th layer attends to the whole context, the n − 1 before it
to the window (llama.cpp's ``load_swa_pattern`` defaults, build b11434). Architectures not named here
ignore a ``sliding_window`` key in llama.cpp, and so does the estimate."""
_GGUF_LLAMA4_CHUNK = 8192
"""Llama 4's attention chunk in llama.cpp, fixed whatever the header says (a window of 0 turns it off)."""


def _gguf_sliding(meta: dict[str, Any], arch: str, layers: int, window: int) -> tuple[int, int]:
    """(window, layers with it) from a GGUF header as llama.cpp reads it: ``{arch}.attention.sliding_window``
    (``window``; Llama 4 chunks 8,192 unless it is 0), and which layers have it from
    ``{arch}.attention.sliding_window_pattern`` (one flag per layer, or n: every n-th layer full, 0: all
    windowed) or the architecture's default (`_GGUF_WINDOW_PATTERN`). (0, 0) when none apply."""
    if arch == "llama4":
        window = 0 if f"{arch}.attention.sliding_window" in meta and window == 0 else _GGUF_LLAMA4_CHUNK
    if window <= 0 or arch not in _GGUF_WINDOW_PATTERN:
        return 0, 0
    pattern = meta.get(f"{arch}.attention.sliding_window_pattern")
    if isinstance(pattern, list):
        if len(pattern) != layers or not all(isinstance(flag, (bool, int)) for flag in pattern):
            raise ConfigError(f"the GGUF header's {arch}.attention.sliding_window_pattern has {len(pattern):,} "
                              f"entries; one flag per layer ({layers}) is needed")
        return window, sum(1 for flag in pattern if flag)
    every = _GGUF_WINDOW_PATTERN[arch] if pattern is None else _whole(pattern)
    if every is None or not 0 <= every <= MAX_SIZE:
        raise ConfigError(f"the GGUF header's {arch}.attention.sliding_window_pattern is {quoted(str(pattern))}; "
                          "a whole number (every n-th layer full) or one flag per layer is needed")
    return window, layers if every == 0 else layers // every * (every - 1) + min(layers % every, every - 1)


_GGUF_DELTANET = ("qwen3next", "qwen35", "qwen35moe")
"""llama.cpp's architectures with Gated DeltaNet layers (Qwen3-Next, Qwen3.5 dense and MoE)."""
_GGUF_STATE_BYTES = 4
"""Bytes of a recurrent state's element in llama.cpp (its recurrent memory keeps both states in f32)."""


def _gguf_deltanet(meta: dict[str, Any], arch: str, layers: int, get: Callable[..., int]) -> Recurrent:
    """The Gated DeltaNet layers of a llama.cpp header: ``{arch}.attention.recurrent_layers`` (one flag a layer) or,
    without it, all but every ``full_attention_interval``-th; their widths as llama.cpp's converter writes them
    (ssm.group_count = key heads, ssm.state_size = key dim, ssm.time_step_rank = value heads, ssm.inner_size =
    value heads × value dim, ssm.conv_kernel), the states in f32 (`_GGUF_STATE_BYTES`)."""
    flags = meta.get(f"{arch}.attention.recurrent_layers")
    if isinstance(flags, list):
        if len(flags) != layers or not all(isinstance(flag, (bool, int)) for flag in flags):
            raise ConfigError(f"the GGUF header's {arch}.attention.recurrent_layers has {len(flags):,} entries; one "
                              f"flag per layer ({layers}) is needed")
        linear = sum(1 for flag in flags if flag)
    else:
        interval = get("full_attention_interval", 4, 1)
        linear = layers - layers // interval
    if linear >= layers:
        raise ConfigError(f"the GGUF header makes all {layers} layers recurrent; a model without attention layers "
                          "is not modelled")
    groups, size = get("ssm.group_count", 0, 1), get("ssm.state_size", 0, 1)
    inner, kernel = get("ssm.inner_size", 0, 1), get("ssm.conv_kernel", 4, 1)
    get("ssm.time_step_rank", 0, 1)  # the value heads: present and in range, their width is in inner_size
    state = (size * inner + (kernel - 1) * (inner + 2 * groups * size)) * _GGUF_STATE_BYTES
    return Recurrent(linear, state, 6 * size * inner, 0.0)


def model_from_gguf(path: Path) -> ModelSpec:
    """A ModelSpec from a GGUF file's header: exact parameter count and weight bytes."""
    try:
        gguf = read_gguf(path, skip_arrays=TOKENIZER_ARRAYS)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read the GGUF header of {path}: {exc}") from exc
    meta, arch = gguf.metadata, gguf.architecture
    recurrent_keys = sorted(key[len(arch) + 1:] for key in meta
                            if key.startswith((f"{arch}.ssm.", f"{arch}.shortconv.")))
    if recurrent_keys and arch not in _GGUF_DELTANET:
        raise ConfigError(f"{path.name}: its {arch} layers keep a recurrent state ({', '.join(recurrent_keys[:4])} in "
                          "the GGUF header: state-space or convolution layers), which the estimate reads from a "
                          "config.json (Gated DeltaNet, Nemotron-H's Mamba2) but not from this header; give it the "
                          "model's config.json")
    params, expert_params, vocab, lm_head = _gguf_tensors(gguf)
    data_bytes = float(gguf.data_bytes or 0)

    def get(key: str, default: int, low: int = 0, high: int = MAX_SIZE) -> int:
        """``{arch}.{key}`` as a whole number in ``[low, high]`` (a per-layer list: its largest), else
        ConfigError naming the key: a crafted header must not become a division by zero or an overflow."""
        value = meta.get(f"{arch}.{key}", default)
        if isinstance(value, list):
            numbers = [n for n in map(_whole, value) if n is not None]
            number = max(numbers) if numbers and len(numbers) == len(value) else None
        else:
            number = _whole(value)
        if number is None or not low <= number <= high:
            raise ConfigError(f"{path}: the GGUF header's {arch}.{key} is {quoted(str(value))}; "
                              f"a whole number from {low} to {high:,} is needed")
        return number

    for key in ("embedding_length", "attention.head_count", "block_count"):
        if f"{arch}.{key}" not in meta:
            raise ConfigError(f"{path}: the GGUF header lacks {arch}.embedding_length/head_count/block_count")
    hidden, heads, layers = get("embedding_length", 0, 1), get("attention.head_count", 0, 1), get("block_count", 0, 1)
    experts = get("expert_count", 0)
    per_token = get("expert_used_count", 0, 0, max(experts, 0) if experts else MAX_SIZE)
    active = params - expert_params * (1 - per_token / experts) if experts and per_token else None
    quant = quantization_of(path, meta)
    rank = get("attention.kv_lora_rank", 0)
    try:
        window, window_layers = _gguf_sliding(meta, arch, layers, get("attention.sliding_window", 0, 0))
        recurrent = _gguf_deltanet(meta, arch, layers, get) if arch in _GGUF_DELTANET else Recurrent()
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    return ModelSpec(
        name=str(meta.get("general.name") or path.stem), params=params, layers=layers, hidden=hidden, heads=heads,
        kv_heads=get("attention.head_count_kv", heads, 0) or heads,
        head_dim=get("attention.key_length", 0) or max(1, hidden // heads), vocab=vocab,
        max_context=get("context_length", 4096, 0, _MAX_CONTEXT) or 4096,
        intermediate=get("feed_forward_length", 0),
        active_params=active, experts=experts, experts_per_token=per_token,
        v_head_dim=get("attention.value_length", 0), kv_lora_rank=rank,
        qk_rope_head_dim=get("rope.dimension_count", 0) if rank else 0,
        sliding_window=window, sliding_layers=window_layers, tied_embeddings=not lm_head, native_dtype=quant,
        recurrent_layers=recurrent.layers, recurrent_state_bytes=recurrent.state_bytes,
        recurrent_flops_per_token=recurrent.flops_per_token, weight_bytes=data_bytes, hf_id=str(path),
        source=f"GGUF header of {path.name} ({quant}, {data_bytes / 1e6:,.1f} MB of tensors)")


_QUANTISED_SUFFIX = re.compile(
    r"(?:[-_.]quantized)?[-_.](?P<tag>fp8(?:[-_](?:dynamic|static|block))?|nvfp4|fp4|mxfp4|awq|"
    r"gptq(?:[-_]int(?P<gptq_bits>[48]))?|int4|int8|w4a16|w8a8|w8a16)$", re.IGNORECASE)
"""A quantised checkpoint's name: its base model's, and the format it ships in as its last word (``-FP8``,
``-FP8-dynamic``, ``-FP4``, ``-NVFP4``, ``-AWQ``, ``-GPTQ-Int4``, Red Hat's ``-quantized.w4a16``, ...)."""


def _quantised_variant(name: str, index: dict[str, str]) -> ModelSpec | None:
    """A quantised checkpoint of a built-in model named by its base's name and its format (`_QUANTISED_SUFFIX`:
    ``nvidia/Llama-3.3-70B-Instruct-FP4``, ``Qwen/Qwen3-30B-A3B-FP8``): the base row in that format, its source
    saying so; None when the name has no such suffix or its base is not built in. Its config.json is not read
    here (it says which modules it keeps in 16 bits and its KV format): the source line says to give it."""
    if not re.fullmatch(r"[\w.-]+(?:/[\w.-]+)?", name.strip()):  # a model's name or Hub id, shown as given
        return None
    found = _QUANTISED_SUFFIX.search(name.strip())
    base = index.get(_key(name.strip()[:found.start()])) if found else None
    if found is None or base is None:
        return None
    tag = found.group("tag").lower()
    dtype = ("fp8" if tag.startswith("fp8") else "nvfp4" if tag in ("fp4", "nvfp4") else
             "int8" if tag in ("int8", "w8a8", "w8a16") or found.group("gptq_bits") == "8" else
             "gptq" if tag.startswith("gptq") else "int4" if tag in ("int4", "w4a16") else tag)
    row = BUILTIN_MODELS[base]
    said = (f"{row.source}; read as the {row.name} row in {dtype}, from the name's {found.group('tag')!r} (the "
            "checkpoint's config.json is not read: give its folder for the modules it keeps in 16 bits and its "
            "KV format)")
    return replace(row, name=name.strip(), native_dtype=dtype, expert_dtype="", native_bits=0.0,
                   native_expert_bits=0.0, weight_bytes=None, source=said)


def _from_hub(model: str) -> ModelSpec | None:
    try:
        from huggingface_hub import hf_hub_download
    except ImportError:
        return None
    cached = not hub_reachable()  # offline: the local cache alone, at once, not after huggingface_hub's retries
    try:
        path = hf_hub_download(model, "config.json", local_files_only=cached)
        cfg = _read_json(Path(path))
    except Exception:  # offline and not cached, gated, missing: the caller explains what to do instead
        return None
    quant = None
    if isinstance(cfg, dict) and "quantization_config" not in cfg:
        try:  # a ModelOpt export's formats, where its config.json declares none
            quant = _read_json(Path(hf_hub_download(model, "hf_quant_config.json", local_files_only=cached)))
        except Exception:  # most repositories have none
            quant = None
    return model_from_config(cfg, model, source="config.json from the Hugging Face Hub (params from its shapes)",
                             quant_sidecar=quant)


def _config_name(config: Path) -> str:
    """The name a config file's model goes by: a ``config.json``'s folder as given (``models/llama-3.1-8b``; in the
    current folder, that folder's own name, not ``.``), another file's path without ``.json``
    (``configs/llama-70b``), so that two files of one folder are told apart."""
    if config.name != "config.json":
        return str(config.with_suffix(""))
    parent = str(config.parent)
    return parent if parent not in ("", ".") else config.resolve().parent.name or "config"


def resolve_model(name_or_path: str) -> ModelSpec:
    """A model by built-in name, config.json (dir or file), ``.gguf`` path or Hub id; ConfigError if unknown."""
    path = Path(name_or_path).expanduser()
    if path.suffix.lower() == ".gguf":
        if not path.is_file():
            raise ConfigError(f"no GGUF file at {path}")
        return model_from_gguf(path)
    config = path / "config.json" if path.is_dir() else path
    if config.name.endswith(".json") and config.is_file():
        cfg = _read_json(config)
        sidecar = config.parent / "hf_quant_config.json"
        declares = not isinstance(cfg, dict) or "quantization_config" in cfg
        quant = _read_json(sidecar) if sidecar.is_file() and not declares else None
        return model_from_config(cfg, _config_name(config), weights_on_disk(config.parent), str(config), quant)
    index = _builtin_index()
    found = index.get(_key(name_or_path))
    if found is not None:
        return BUILTIN_MODELS[found]
    if re.fullmatch(r"[\w.-]+/[\w.-]+", name_or_path) and not path.exists():
        hub = _from_hub(name_or_path)
        if hub is not None:
            return hub
    variant = _quantised_variant(name_or_path, index)
    if variant is not None:
        return variant
    close = difflib.get_close_matches(_key(name_or_path), list(index), n=4, cutoff=0.5)
    names = list(dict.fromkeys(index[c] for c in close))
    known = f"did you mean {', '.join(names)}?" if names else f"built-in names: {', '.join(BUILTIN_MODELS)}."
    raise ConfigError(f"unknown model {name_or_path!r}: {known} Or give a directory with config.json, a .gguf file, "
                      "or a Hub id (needs huggingface_hub and the network); --list-models shows the built-in table")
