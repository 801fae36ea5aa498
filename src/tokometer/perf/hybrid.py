"""Layers that are not attention, as a ``config.json`` describes them: what each keeps a sequence, costs a token
and weighs (`tokometer.perf.loaders` builds the `ModelSpec` from them; `tokometer.perf.model` says how they count).

Two kinds of recurrent layer are read; each keeps a fixed state a sequence instead of a KV cache:

    Gated DeltaNet (Qwen3-Next, Qwen3.5)   three layers in four (``layer_types``' "linear_attention", or all but
        every ``full_attention_interval``-th); state = value heads × key dim × value dim, and the short
        convolution's last kernel − 1 inputs of the q, k and v channels (2 × key heads × key dim + value channels);
        parameters: the q, k, v, z projections, the b and a gates, out, the convolution
    Mamba2 (Nemotron-H, Granite 4.0-H)    the "M" blocks of Nemotron-H's ``hybrid_override_pattern`` (or "mamba" in
        its ``layers_block_type``), ``layer_types``' "mamba" layers (Granite 4.0-H: each with its MLP or experts,
        and a shared MLP of ``shared_intermediate_size``); with d_inner = heads × head dim (or ``mamba_expand`` ×
        hidden) and G groups of the state size N: state = heads × head dim × N, and the convolution's last
        kernel − 1 inputs of its d_inner + 2 G N channels; parameters: the input projection (x, z, B, C and dt:
        2 d_inner + 2 G N + heads), out, the convolution

The recurrence itself is in ``mamba_ssm_cache_dtype`` or ``mamba_ssm_dtype`` (4 B where a config says float32, as
vLLM then keeps it), else 2 B (the model's activations); the convolution's inputs 2 B. A token costs
6 × the recurrence's elements in FLOPs a layer (the decay and rank-one update, and the read-out).

Nemotron-H's layers are single blocks (``*`` attention, ``M`` Mamba2, ``-`` an MLP, ``E`` a mixture of experts),
not attention + MLP pairs: `BlockPattern` counts them, and its MLPs are squared-ReLU ones of two matrices (up and
down; three where a config names a gated activation). Hybrids with other layers (Jamba, Falcon-H1, Kimi Linear's
delta attention, LFM2's convolutions, linear attention and Mamba in one model) are `NotModelled`: refused with
their keys named rather than counted as attention.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tokometer.util.shown import quoted

__all__ = ["MAX_SIZE", "BlockPattern", "NotModelled", "Recurrent", "block_pattern", "recurrent_layers"]

MAX_SIZE = 1 << 24
"""The largest width, head count, layer count or expert count read from a config or header (16.7 million)."""

_FULL_KINDS = ("full_attention", "attention")
_WINDOW_KINDS = ("sliding_attention", "chunked_attention")
_LINEAR_KIND = "linear_attention"
_BLOCKS = {"mamba": "M", "mamba2": "M", "attention": "*", "full_attention": "*", "mlp": "-", "moe": "E"}
"""Nemotron-H's block names (``layers_block_type``, a newer ``layer_types``) as its pattern's letters."""
_MAMBA_KINDS = ("mamba", "mamba2")
_MAMBA_KEYS = ("ssm_state_size", "mamba_d_state", "mamba_n_heads", "mamba_num_heads")
"""Mamba2 fields: read for Nemotron-H's blocks and ``layer_types``' "mamba" layers, refused elsewhere."""
_OTHER_HYBRID_KEYS = ("attn_layer_period", "linear_attn_config", "mamba_d_ssm")
"""Keys of hybrids whose other layers are not read (Jamba, Kimi Linear, Falcon-H1)."""


class NotModelled(ValueError):
    """A config the estimate reads but whose layers it does not model (its message says which)."""


@dataclass(frozen=True)
class Recurrent:
    """A model's recurrent layers: how many, and one layer's state a sequence, FLOPs a token and parameters."""

    layers: int = 0
    state_bytes: int = 0
    flops_per_token: int = 0
    params: float = 0.0


@dataclass(frozen=True)
class BlockPattern:
    """Nemotron-H's blocks by kind: attention (``*``), Mamba2 (``M``), MLP (``-``) and mixture of experts (``E``)."""

    attention: int
    mamba: int
    mlp: int
    moe: int

    @property
    def mixers(self) -> int:
        """The blocks that mix tokens (attention and Mamba2): the model's layers as the estimate counts them."""
        return self.attention + self.mamba


def _whole(cfg: dict[str, Any], *keys: str, default: int | None = None) -> int:
    """The first of ``keys`` the config has, as a whole number from 1 to `MAX_SIZE` (ValueError naming it)."""
    key = next((k for k in keys if cfg.get(k) is not None), None)
    value = int(cfg[key]) if key else default
    if value is None:
        raise KeyError(keys[0])
    if not 1 <= value <= MAX_SIZE:
        raise ValueError(f"{key or keys[0]} must be from 1 to {MAX_SIZE:,} (got {value})")
    return value


def _ssm_bytes(cfg: dict[str, Any]) -> int:
    """Bytes of one recurrence element: 4 where the config keeps the state in float32, else 2."""
    named = str(cfg.get("mamba_ssm_cache_dtype") or cfg.get("mamba_ssm_dtype") or "").lower()
    return 4 if named in ("float32", "fp32") else 2


def block_pattern(cfg: dict[str, Any], layers: int) -> BlockPattern | None:
    """Nemotron-H's blocks from ``hybrid_override_pattern`` (or ``layers_block_type``, or a nemotron_h config's
    ``layer_types``), one a layer; None for a config without them. An unknown block is `NotModelled`."""
    names = cfg.get("layers_block_type")
    if names is None and str(cfg.get("model_type", "")).startswith("nemotron_h"):
        names = cfg.get("layer_types")
    pattern = cfg.get("hybrid_override_pattern")
    if pattern is None and isinstance(names, list):
        unknown = sorted({str(n) for n in names} - set(_BLOCKS))
        if unknown:
            raise NotModelled(f"its blocks include a kind the estimate does not model: {', '.join(unknown)}")
        pattern = "".join(_BLOCKS[str(n)] for n in names)
    if pattern is None:
        return None
    if not isinstance(pattern, str) or set(pattern) - set("M*-E"):
        raise NotModelled(f"hybrid_override_pattern {quoted(str(pattern))} has blocks other than M (Mamba2), "
                          "* (attention), - (MLP) and E (experts)")
    if len(pattern) != layers:
        raise ValueError(f"the block pattern has {len(pattern)} blocks, num_hidden_layers says {layers}")
    if "*" not in pattern:
        raise NotModelled("its block pattern has no attention block; a model without attention is not modelled")
    return BlockPattern(pattern.count("*"), pattern.count("M"), pattern.count("-"), pattern.count("E"))


def _layer_counts(cfg: dict[str, Any], layers: int) -> tuple[int, int]:
    """(Gated DeltaNet layers, Mamba2 layers) of a config whose every layer is a mixer and an MLP: ``layer_types``'
    "linear_attention" and "mamba" ones (Qwen3.5, Granite 4.0-H), or, without a list, all but every
    ``full_attention_interval``-th where the config has ``linear_num_value_heads`` (Qwen3-Next). Other layer kinds,
    both recurrent kinds at once, and other hybrids' keys are `NotModelled`."""
    kinds = cfg.get("layer_types")
    if isinstance(kinds, list):
        if len(kinds) != layers:
            raise ValueError(f"layer_types lists {len(kinds)} layers, num_hidden_layers says {layers}")
        unknown = sorted({str(k) for k in kinds} - {*_FULL_KINDS, *_WINDOW_KINDS, _LINEAR_KIND, *_MAMBA_KINDS})
        if unknown:
            raise NotModelled(f"layer_types has layers of a kind the estimate does not model: {', '.join(unknown)} "
                              "(it reads full, sliding-window, chunked and linear (Gated DeltaNet) attention, and "
                              "Mamba2)")
    mamba = sum(1 for k in kinds if k in _MAMBA_KINDS) if isinstance(kinds, list) else 0
    stray = [key for key in ("hybrid_override_pattern", "layers_block_type", *_OTHER_HYBRID_KEYS,
                             *(() if mamba else _MAMBA_KEYS)) if cfg.get(key) not in (None, "", [], {})]
    if stray:
        raise NotModelled(f"it describes a hybrid model with state-space or other non-attention layers "
                          f"({', '.join(stray)}), which the estimate does not model: it would count them as attention")
    if isinstance(kinds, list):
        linear = sum(1 for k in kinds if k == _LINEAR_KIND)
    else:
        interval = int(cfg.get("full_attention_interval") or 0)
        linear = layers - layers // interval if interval > 1 and cfg.get("linear_num_value_heads") else 0
    if linear and mamba:
        raise NotModelled("layer_types mixes linear-attention and Mamba layers, which the estimate does not model")
    if linear + mamba >= layers:
        raise NotModelled("every layer is a recurrent one; a model without attention layers is not modelled")
    return linear, mamba


def _gated_deltanet(cfg: dict[str, Any], hidden: int, layers: int) -> Recurrent:
    """``layers`` Gated DeltaNet layers (module docstring)."""
    nk, nv = _whole(cfg, "linear_num_key_heads"), _whole(cfg, "linear_num_value_heads")
    dk, dv = _whole(cfg, "linear_key_head_dim"), _whole(cfg, "linear_value_head_dim")
    kernel = _whole(cfg, "linear_conv_kernel_dim", default=4)
    channels = 2 * nk * dk + nv * dv  # the convolution runs over q, k and v
    state = nv * dk * dv * _ssm_bytes(cfg) + channels * (kernel - 1) * 2
    params = hidden * (2 * nk * dk + 2 * nv * dv) + hidden * 2 * nv + nv * dv * hidden + channels * kernel
    return Recurrent(layers, state, 6 * nv * dk * dv, float(params))


def _mamba2(cfg: dict[str, Any], hidden: int, layers: int) -> Recurrent:
    """``layers`` Mamba2 blocks (module docstring)."""
    heads = _whole(cfg, "mamba_num_heads", "mamba_n_heads")
    width = int(cfg.get("mamba_expand") or 2) * hidden  # without a head dim: expand × hidden over the heads
    head_dim = _whole(cfg, "mamba_head_dim", "mamba_d_head", default=width // heads if width % heads == 0 else None)
    size = _whole(cfg, "ssm_state_size", "mamba_d_state", "ssm_states_size")
    groups = _whole(cfg, "n_groups", "mamba_n_groups", default=1)
    kernel = _whole(cfg, "conv_kernel", "mamba_d_conv", default=4)
    inner, channels = heads * head_dim, heads * head_dim + 2 * groups * size
    state = heads * head_dim * size * _ssm_bytes(cfg) + channels * (kernel - 1) * 2
    params = hidden * (2 * inner + 2 * groups * size + heads) + inner * hidden + channels * kernel
    return Recurrent(layers, state, 6 * heads * head_dim * size, float(params))


def recurrent_layers(cfg: dict[str, Any], hidden: int, layers: int, blocks: BlockPattern | None) -> Recurrent:
    """The config's recurrent layers: Nemotron-H's Mamba2 blocks, or Mamba2 or Gated DeltaNet layers, or none."""
    if blocks is not None:
        return _mamba2(cfg, hidden, blocks.mamba) if blocks.mamba else Recurrent()
    linear, mamba = _layer_counts(cfg, layers)
    if mamba:
        return _mamba2(cfg, hidden, mamba)
    return _gated_deltanet(cfg, hidden, linear) if linear else Recurrent()
