"""The linear layers a quantised checkpoint keeps in its 16-bit dtype: its list of them as fnmatch patterns matched
against the modules the config's shapes imply.

TensorRT Model Optimizer writes, beside a checkpoint's ``quant_algo``, the modules it left unquantised as
``fnmatch`` patterns over module names (``hf_quant_config.json``'s ``exclude_modules``; ``ignore`` in a
``quantization_config``): ``"lm_head"``, ``"model.layers.*.self_attn*"``, ``"model.layers.0.mlp*"``. vLLM and
TensorRT-LLM load those modules in the checkpoint's own dtype. NVIDIA's DeepSeek R1 FP4 exports keep the attention
so (the v2 ones all of it but ``o_proj``): over 11 B parameters, 4 % of the weights, and, with attention data
parallel, a whole copy of them on every GPU.

compressed-tensors' ``ignore`` and transformers' ``modules_to_not_convert`` name them by other rules; their lists
come here as the fnmatch patterns that match the same names (`tokometer.perf.checkpointquant`).

The families that name their modules their own way (GPT-2, StarCoder, GPT-J, GPT-NeoX, Falcon, BLOOM, OPT, MPT,
StarCoder2, Phi-2, Nemotron, ChatGLM, Qwen 1, and the fused names of Phi-3 and Phi-4 and of GLM-4:
``transformer.h.N.attn.c_attn``, ``gpt_neox.layers.N.mlp.dense_h_to_4h``, ``model.layers.N.mlp.c_fc``,
``model.layers.N.self_attn.qkv_proj`` ...) are matched by their own names alone, under their own root, each module with
the parameters the count gives it (two MLP matrices where their MLP has two): the table of them, by ``model_type``, is
`tokometer.perf.modulenames`. Every other model's layers' linear modules are named as Hugging Face's Llama-style
decoder layers name them, under any of the usual roots (``model.layers``, ``model.language_model.layers``,
``language_model.model.layers``, ``language_model.layers``), each with its parameters from the config's shapes, in
the spelling of the model's family (`_family`, from its ``model_type``):

    attention        q_proj (MLA: q_a_proj and q_b_proj, or q_proj), k_proj, v_proj (MLA: kv_a_proj_with_mqa,
                     kv_b_proj), o_proj, under self_attn
    dense MLP        gate_proj, up_proj, down_proj, hidden × width each, under mlp (Llama 4: feed_forward)
    shared expert    the same under mlp.shared_experts or mlp.shared_expert (Llama 4: feed_forward.shared_expert)
    routed experts   the same under mlp.experts.N, or fused as mlp.experts.gate_up_proj (Llama 4 and gpt-oss:
                     that alone, under feed_forward for Llama 4); Mixtral's and MiniMax's family
                     block_sparse_moe.experts.N as w1, w3, w2; the first and the last expert are matched, each
                     standing for half of them
    router           mlp.gate, mlp.router, mlp.shared_expert_gate (Mixtral's family block_sparse_moe.gate, Llama
                     4's feed_forward.router): matched, not counted

A model of a family not known here (``model_type`` absent or another) is matched in every spelling above. A module
is kept when any of its spellings matches a pattern. A list that names a layer's modules (`_LAYER_WORDS`:
``layers``, ``*_proj``, ``attn``, ``mlp``, ``experts``, and the other families' ``h.N``, ``blocks``,
``query_key_value``, ``c_fc``, ``fc1`` ...) and matches none here is from a model that names them otherwise:
`KeptModules.unmatched` holds its first such pattern, and the caller says it (one that matches some names and not
others is not told apart). The embeddings and the LM head are counted in 16 bits whatever the list
(`tokometer.perf.model.ModelSpec.weight_bytes_split`), so not here. DeepSeek's dense first layers and Llama 4's
interleaved dense layers are told from its MoE layers by the rule the parameter count reads
(`tokometer.perf.moelayout`). A config of single blocks (Nemotron-H), with linear-attention layers, or with experts
in one of the families of their own names is not matched, nor a list beyond `MAX_PATTERNS`, `MAX_PATTERN_CHARS` or
`MAX_TOTAL_CHARS`, a model deeper than `MAX_LAYERS`, or a matching that would take more than `MAX_WORK` tries:
`NotMatched`, and the caller says so.

The same names, a MoE layer's routed experts as expert 0's three projections, are what a compressed-tensors
checkpoint's groups are resolved against (`linear_modules`, `tokometer.perf.schemetargets`).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from tokometer.perf.modulenames import LayerNames, layer_names
from tokometer.perf.moelayout import moe_layout

__all__ = ["MAX_LAYERS", "MAX_PATTERNS", "MAX_PATTERN_CHARS", "MAX_TOTAL_CHARS", "MAX_WORK", "ROUTED_EXPERTS",
           "KeptModules", "NotMatched", "kept_modules", "linear_modules", "names_shown"]

MAX_PATTERNS = 1024
"""Patterns an ``exclude_modules`` list may hold to be matched (NVIDIA's longest lists name a few hundred)."""
MAX_PATTERN_CHARS = 256
"""Characters one pattern may have."""
MAX_TOTAL_CHARS = 32768
"""Characters the distinct patterns may have together (compiling them takes time with them)."""
MAX_WORK = 500_000
"""Tries of a module name against a pattern that can match it (one whose text before its first wildcard starts
the name) the matching may take: about 0.4 s at most on a 2-core VM; NVIDIA's per-layer lists take a few
thousand."""
MAX_LAYERS = 1024
"""Layers a model may have for its modules to be matched one by one."""

ROUTED_EXPERTS = "routed experts"
"""The kind of module a MoE layer's routed experts are (`linear_modules`, `KeptModules.where`)."""
_ROOTS = ("model.layers", "model.language_model.layers", "language_model.model.layers", "language_model.layers")
_MLP = ("gate_proj", "up_proj", "down_proj")
_ATTENTION_KINDS = {"full_attention", "sliding_attention", "chunked_attention"}
_LAYER_WORDS = re.compile(
    r"layers?\b|blocks\b|(?:^|\.)h\.|_proj|attn|attention|query_key_value|wqkv|mlp|ffn|feed_forward|c_(?:fc|proj)\b"
    r"|dense_(?:h_to_4h|4h_to_h)|fc(?:1|2|_in|_out)\b|experts?\b|moe", re.IGNORECASE)
"""Words of a pattern that names a decoder layer's modules (not the embeddings', the LM head's or a vision
tower's alone), in Llama's spelling or another family's (`tokometer.perf.modulenames`: ``transformer.h.N``,
``blocks``, ``query_key_value``, ``Wqkv``, ``c_fc``, ``dense_h_to_4h``, ``fc1``, ...): one that matched nothing
is said, as the model's modules are then named otherwise."""
_OTHER_PARTS = re.compile(r"vision|visual|image|audio|speech|projector|multi_modal|mm_", re.IGNORECASE)
"""Words of a pattern about another part of a multimodal model, whose modules are not matched here."""
_BLOCK_SPARSE = frozenset({"mixtral", "minimax", "minimax_m1", "minimax_m2", "phimoe"})
"""``model_type`` values of the families that name their experts block_sparse_moe.experts.N.w1 (Mixtral's)."""
_ROUTERS = {"block_sparse_moe": ("block_sparse_moe.gate",), "feed_forward": ("feed_forward.router",),
            "mlp": ("mlp.gate", "mlp.router", "mlp.shared_expert_gate"),
            "": ("mlp.gate", "mlp.router", "block_sparse_moe.gate", "feed_forward.router", "mlp.shared_expert_gate")}
"""A MoE layer's router, as each family spells it: matched so that a list keeping it is not said as matching
nothing, and not counted (hidden × experts parameters a layer)."""
_OTHER_LAYERS = ("layers_block_type", "hybrid_override_pattern", "linear_num_value_heads")
"""Config keys of models with layers other than attention (Nemotron-H's blocks, Qwen3-Next's linear attention)."""


class NotMatched(ValueError):
    """The patterns, or the model, are of a kind this module does not match: the checkpoint is sized in its declared
    format, and the reason said."""


@dataclass(frozen=True)
class KeptModules:
    """Linear-layer parameters the patterns keep in 16 bits, outside the routed experts and in them, and where."""

    params: float = 0.0
    expert_params: float = 0.0
    where: str = ""
    """In words: which kinds of module, in how many layers."""
    unmatched: str = ""
    """Where nothing matched: the first pattern that names a layer's modules (`_LAYER_WORDS`), which then matched
    none of the names here (a model that names its modules otherwise); "" else."""


def kept_modules(cfg: dict[str, Any], patterns: Any, field: str = "exclude_modules", *,
                 experts_by_layer: bool = False) -> KeptModules:
    """The parameters ``patterns`` (an ``exclude_modules`` list, or another list of fnmatch patterns, called
    ``field`` in what is said) keep out of the quantised format in the model ``cfg`` describes (merged with its
    ``text_config``; module docstring). `NotMatched` for patterns that are not a list of strings within the bounds,
    or a model whose modules are not named here. ``experts_by_layer``: a layer's routed experts are matched by the
    name of their fused module (``model.layers.N.mlp.experts``), all or none, as vLLM matches a
    ``modules_to_not_convert`` list."""
    matcher = _Patterns(patterns, field)
    model = _layout(cfg)
    family, experts = model.family, model.experts
    kept: dict[str, int] = {}
    rest = expert_total = 0.0
    routers = False
    for layer in range(model.layers):
        for kind, modules in model.layer_modules(layer):
            share = sum(size for names, size in modules if model.matches(matcher, layer, names))
            if share:
                rest += share
                kept[kind] = kept.get(kind, 0) + 1
        if layer in model.moe and not (kept or routers):  # a router kept in 16 bits: matched, not counted (tiny)
            routers = model.matches(matcher, layer, _ROUTERS[family])
        if layer in model.moe and experts:
            halves = (2 * model.matches(matcher, layer, _fused_experts(family)) if experts_by_layer else
                      sum(model.matches(matcher, layer, _expert_names(index, family)) for index in (0, experts - 1)))
            if halves:
                expert_total += halves / 2 * experts * 3 * model.hidden * model.expert_width
                kept[ROUTED_EXPERTS] = kept.get(ROUTED_EXPERTS, 0) + 1
    where = ", ".join(f"{kind} in {count} of {model.layers} layers" for kind, count in kept.items())
    unmatched = "" if kept or routers else next(
        (p for p in dict.fromkeys(patterns) if _LAYER_WORDS.search(p) and not _OTHER_PARTS.search(p)), "")
    return KeptModules(rest, expert_total, where, unmatched)


def linear_modules(cfg: dict[str, Any]) -> Iterator[tuple[str, tuple[str, ...]]]:
    """Each linear module of the model ``cfg`` describes (merged with its ``text_config``) but its routers, layer by
    layer, as (its kind: attention, dense MLP, shared expert or `ROUTED_EXPERTS`; its full names, every spelling
    under every root); a MoE layer's routed experts as expert 0's three projections, the names vLLM looks up a
    compressed-tensors scheme by (`tokometer.perf.schemetargets`). `NotMatched` for a model whose modules are not
    named here (module docstring)."""
    model = _layout(cfg)
    for layer in range(model.layers):
        for kind, modules in model.layer_modules(layer):
            for names, _size in modules:
                yield kind, model.full_names(layer, names)
        if layer in model.moe and model.experts:
            for names in _first_expert(model.family):
                yield ROUTED_EXPERTS, model.full_names(layer, names)


_Modules = list[tuple[tuple[str, ...], float]]
"""Modules as each one's spellings (below a layer's root) and parameters."""


@dataclass(frozen=True)
class _Layout:
    """A model's layers as named here: their roots, the spelling of its family (`_family`), its attention's
    modules, and the MoE layers and widths as the parameter count reads them (`_mlp_shapes`); a family of its own
    names (`tokometer.perf.modulenames`) with its MLP's."""

    layers: int
    roots: tuple[str, ...]
    family: str
    hidden: int
    attention: _Modules
    moe: range
    dense: int
    shared: int
    expert_width: int
    experts: int
    named: LayerNames | None

    def layer_modules(self, layer: int) -> Iterator[tuple[str, _Modules]]:
        """Layer ``layer``'s kinds of module outside the routed experts, each module's spellings and parameters."""
        if self.named is None:
            yield from _layer_modules(layer in self.moe, self.attention, self.hidden, self.dense, self.shared,
                                      self.family)
            return
        yield "attention", self.attention
        yield "dense MLP", [((name,), size) for name, size in self.named.mlp_sizes(self.hidden, self.dense)]

    def full_names(self, layer: int, names: Iterable[str]) -> tuple[str, ...]:
        """A module's spellings (``names``, below a layer's root) in ``layer``, under every root."""
        return tuple(f"{root}.{layer}.{name}" for name in names for root in self.roots)

    def matches(self, patterns: _Patterns, layer: int, names: Iterable[str]) -> bool:
        """Whether any spelling of a module (``names``, below a layer's root) in ``layer`` matches."""
        return any(patterns.match(name) for name in self.full_names(layer, names))


def _layout(cfg: dict[str, Any]) -> _Layout:
    """The model's layers as named here (`_Layout`); `NotMatched` for a model whose modules are not (module
    docstring)."""
    layers = _matched_layers(cfg)
    moe, dense_width, shared_width, expert_width, experts = _mlp_shapes(cfg, layers)
    hidden = _whole(cfg.get("hidden_size"))
    named = layer_names(cfg)
    if named is None:
        return _Layout(layers, _ROOTS, _family(cfg), hidden, _attention(cfg), moe, dense_width, shared_width,
                       expert_width, experts, None)
    if experts:
        raise NotMatched(f"a mixture of experts of model_type {cfg.get('model_type')} is not matched")
    _hidden, heads, kv_heads, head_dim = _heads(cfg)
    attention: _Modules = [((name,), size) for name, size in named.attention_sizes(hidden, heads, kv_heads,
                                                                                     head_dim)]
    return _Layout(layers, (named.root,), "", hidden, attention, moe, dense_width, 0, 0, 0, named)


def names_shown(cfg: dict[str, Any], expert: str = "E") -> str:
    """A few of the names the model's modules are matched by, as a message gives them (module docstring), a routed
    expert's numbered ``expert``."""
    named = layer_names(cfg)
    return named.shown if named else (
        f"model.layers.N.self_attn.q_proj, .mlp.gate_proj, .mlp.experts.{expert}.gate_proj, ...")


def _matched_layers(cfg: dict[str, Any]) -> int:
    """The model's layer count; `NotMatched` for a model of more than `MAX_LAYERS` or with layers other than
    attention and MLP."""
    layers = _whole(cfg.get("num_hidden_layers"))
    if not 1 <= layers <= MAX_LAYERS:
        raise NotMatched(f"a model of {layers} layers is not matched (at most {MAX_LAYERS})")
    kinds = cfg.get("layer_types")
    if (isinstance(kinds, list) and not set(map(str, kinds)) <= _ATTENTION_KINDS) or any(
            cfg.get(key) for key in _OTHER_LAYERS):
        raise NotMatched("a model with other layers than attention and MLP is not matched")
    return layers


class _Patterns:
    """``exclude_modules`` patterns (fnmatch's syntax) grouped by the literal text before their first wildcard, so
    that a module name is tried only against the patterns that can match it; each try counted against
    `MAX_WORK`."""

    def __init__(self, patterns: Any, field: str) -> None:
        if not isinstance(patterns, list):
            raise NotMatched(f"{field} is a JSON {type(patterns).__name__}, not a list")
        if len(patterns) > MAX_PATTERNS:
            raise NotMatched(f"{field} lists {len(patterns):,} patterns (at most {MAX_PATTERNS:,} are matched)")
        if not all(isinstance(p, str) and 0 < len(p) <= MAX_PATTERN_CHARS for p in patterns):
            raise NotMatched(f"{field} holds an entry that is not a pattern of 1 to {MAX_PATTERN_CHARS} characters")
        unique = list(dict.fromkeys(patterns))
        if sum(map(len, unique)) > MAX_TOTAL_CHARS:
            raise NotMatched(f"the {field} patterns hold more than {MAX_TOTAL_CHARS:,} characters together")
        self._field = field
        groups: dict[str, list[str]] = {}
        for pattern in unique:
            cut = next((i for i, ch in enumerate(pattern) if ch in "*?["), len(pattern))
            groups.setdefault(pattern[:cut], []).append(pattern)
        self._groups = {prefix: (len(group), re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in group)))
                        for prefix, group in groups.items()}
        self._lengths = sorted({len(prefix) for prefix in groups})
        self._work = 0

    def match(self, name: str) -> bool:
        """Whether a pattern matches ``name``; `NotMatched` once the tries pass `MAX_WORK`."""
        for length in self._lengths:
            if length > len(name):
                return False
            group = self._groups.get(name[:length])
            if group is None:
                continue
            self._work += group[0]
            if self._work > MAX_WORK:
                raise NotMatched(f"the {self._field} patterns take more than {MAX_WORK:,} tries to match")
            if group[1].match(name):
                return True
        return False


def _whole(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _heads(cfg: dict[str, Any]) -> tuple[int, int, int, int]:
    """(hidden size, heads, KV heads, head dim) as the parameter count reads them."""
    hidden, heads = _whole(cfg.get("hidden_size")), _whole(cfg.get("num_attention_heads"))
    head_dim = _whole(cfg.get("head_dim")) or hidden // max(1, heads)
    return hidden, heads, _whole(cfg.get("num_key_value_heads")) or heads, head_dim


def _attention(cfg: dict[str, Any]) -> list[tuple[tuple[str, ...], float]]:
    """Each attention projection's spellings and parameters (module docstring)."""
    hidden, heads, kv_heads, head_dim = _heads(cfg)
    if cfg.get("kv_lora_rank"):
        rank, rope = _whole(cfg.get("kv_lora_rank")), _whole(cfg.get("qk_rope_head_dim", 64))
        nope, v_dim, q_rank = (_whole(cfg.get("qk_nope_head_dim", 128)), _whole(cfg.get("v_head_dim", 128)),
                               _whole(cfg.get("q_lora_rank")))
        q: list[tuple[tuple[str, ...], float]] = (
            [(("self_attn.q_a_proj",), hidden * q_rank), (("self_attn.q_b_proj",), q_rank * heads * (nope + rope))]
            if q_rank else [(("self_attn.q_proj",), hidden * heads * (nope + rope))])
        return [*q, (("self_attn.kv_a_proj_with_mqa",), hidden * (rank + rope)),
                (("self_attn.kv_b_proj",), rank * heads * (nope + v_dim)),
                (("self_attn.o_proj",), heads * v_dim * hidden)]
    gate = 2 if cfg.get("attn_output_gate") else 1
    return [(("self_attn.q_proj",), hidden * heads * head_dim * gate),
            (("self_attn.k_proj",), hidden * kv_heads * head_dim),
            (("self_attn.v_proj",), hidden * kv_heads * head_dim),
            (("self_attn.o_proj",), heads * head_dim * hidden)]


def _mlp_shapes(cfg: dict[str, Any], layers: int) -> tuple[range, int, int, int, int]:
    """(the MoE layers, a dense layer's MLP width, a MoE layer's shared-expert width, a routed expert's width, the
    routed experts), as the parameter count reads them (`tokometer.perf.moelayout`)."""
    hidden = _whole(cfg.get("hidden_size"))
    inter = _whole(cfg.get("intermediate_size")) or 4 * hidden
    experts = _whole(cfg.get("num_local_experts")) or _whole(cfg.get("n_routed_experts")) or _whole(
        cfg.get("num_experts"))
    per_token = _whole(cfg.get("num_experts_per_tok")) or _whole(cfg.get("experts_per_token"))
    if experts <= 1 or per_token <= 0:
        return range(0), inter, 0, 0, 0
    moe, dense, shared = moe_layout(cfg, layers, inter)
    return moe, dense, shared, _whole(cfg.get("moe_intermediate_size")) or inter, experts


def _family(cfg: dict[str, Any]) -> str:
    """How the model's family names its MLP modules: ``block_sparse_moe`` (Mixtral's), ``feed_forward`` (Llama 4),
    ``mlp`` (the rest Hugging Face knows: Llama's spelling, or a family of its own names,
    `tokometer.perf.modulenames`, which has no experts here), "" for a ``model_type`` not known here (every
    spelling)."""
    kind = cfg.get("model_type")
    kind = kind.lower() if isinstance(kind, str) else ""
    if kind in _BLOCK_SPARSE:
        return "block_sparse_moe"
    if kind.startswith("llama4"):
        return "feed_forward"
    return "mlp" if kind else ""


def _layer_modules(moe: bool, attention: list[tuple[tuple[str, ...], float]], hidden: int, dense: int,
                   shared: int, family: str) -> Iterator[tuple[str, list[tuple[tuple[str, ...], float]]]]:
    """A layer's kinds of module outside the routed experts, each module's spellings (`_family`'s) and
    parameters."""
    roots = {"feed_forward": ("feed_forward",), "block_sparse_moe": ("mlp",), "mlp": ("mlp",)}.get(
        family, ("mlp", "feed_forward"))
    yield "attention", attention
    if not moe:
        yield "dense MLP", [(tuple(f"{root}.{p}" for root in roots), hidden * dense) for p in _MLP]
    elif shared:
        names = {"feed_forward": ("feed_forward.shared_expert",), "mlp": ("mlp.shared_experts", "mlp.shared_expert"),
                 "block_sparse_moe": ("mlp.shared_experts", "mlp.shared_expert")}.get(
            family, ("mlp.shared_experts", "mlp.shared_expert", "feed_forward.shared_expert"))
        yield "shared expert", [(tuple(f"{name}.{p}" for name in names), hidden * shared) for p in _MLP]


def _fused_experts(family: str) -> tuple[str, ...]:
    """The spellings of a layer's routed experts as one fused module in ``family`` (`_family`)."""
    return {"block_sparse_moe": ("block_sparse_moe.experts",), "feed_forward": ("feed_forward.experts",),
            "mlp": ("mlp.experts",)}.get(family, ("mlp.experts", "feed_forward.experts", "block_sparse_moe.experts"))


def _expert_names(index: int, family: str) -> tuple[str, ...]:
    """The spellings of routed expert ``index``'s first matrix in ``family`` (`_family`; its others are named
    alike)."""
    per_expert = {"block_sparse_moe": (f"block_sparse_moe.experts.{index}.w1",),
                  "feed_forward": ("feed_forward.experts.gate_up_proj",),
                  "mlp": (f"mlp.experts.{index}.gate_proj", "mlp.experts.gate_up_proj")}
    return per_expert.get(family, (*per_expert["mlp"], f"feed_forward.experts.{index}.gate_proj",
                                   *per_expert["feed_forward"], *per_expert["block_sparse_moe"]))


def _first_expert(family: str) -> list[tuple[str, ...]]:
    """The spellings of routed expert 0's three projections in ``family`` (`_family`), as vLLM names them to look up
    their compressed-tensors scheme: ``{experts}.0.gate_proj``, ``up_proj``, ``down_proj`` (Mixtral's family's
    ``w1``, ``w3``, ``w2``)."""
    return [tuple(f"{fused}.0.{w if fused.startswith('block_sparse_moe') else proj}"
                  for fused in _fused_experts(family))
            for proj, w in (("gate_proj", "w1"), ("up_proj", "w3"), ("down_proj", "w2"))]
