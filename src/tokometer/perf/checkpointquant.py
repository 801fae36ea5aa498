"""What a checkpoint's own quantisation config says: its weights' format, its routed experts' and its KV cache's.

Read from ``config.json``'s ``quantization_config``, or, where that has none, from the ``hf_quant_config.json``
TensorRT Model Optimizer writes beside it (its ``quantization`` object: the same keys as ``modelopt``'s):

    quant_method           what it says                               weights      KV cache
    fp8, fbgemm_fp8        8-bit float linear layers                  fp8
    awq, gptq (+ _marlin)  4-bit integer groups of 128 (``bits`` 4)   awq, gptq
    mxfp4                  gpt-oss: the routed experts in MXFP4       experts mxfp4
    modelopt               quant_algo FP8 (any scaling)               fp8          kv_cache_quant_algo FP8: fp8,
                                                                                   NVFP4: nvfp4
                           NVFP4, NVFP4_AWQ                           nvfp4
                           W4A16_AWQ, W4A8_AWQ                        awq
                           INT8_SQ, W8A8_SQ_*                         int8
                           MIXED_PRECISION (``quantized_layers``)     one format, or the experts' and the rest's
                           ``exclude_modules`` (``ignore``)           those modules in 16 bits (`unquantized`)
    compressed-tensors     ``config_groups``' weights: float 8        fp8
                           float 4 in groups of 16 (32)               nvfp4 (mxfp4)
                           int 8 with input activations (W8A8)        int8
                           int 4 (W4A16)                              int4
                           each module's group as vLLM resolves it    one format; or, in a mixture of
                           (`tokometer.perf.schemetargets`)           experts, the routed experts' and the
                                                                      rest's (in ``torch_dtype`` if in none)
                           ``ignore`` (names, ``re:`` of .* and text) those modules in 16 bits
    fp8, fbgemm_fp8        ``modules_to_not_convert`` (whole names)   those modules in 16 bits
    awq                    ``modules_to_not_convert`` (parts of names) those modules in 16 bits

The KV format a checkpoint declares is the one engines take by default, as vLLM 0.32 reads it when
``--kv-cache-dtype`` is ``auto`` (TensorRT-LLM reads a ModelOpt ``kv_cache_quant_algo`` as its cache's format too):

    ModelOpt            ``kv_cache_scheme`` object (config.json's form) first, else ``kv_cache_quant_algo``
                        (``vllm/utils/torch_utils.py``, ``get_kv_cache_quant_algo_string``):
                        float, num_bits 8, dynamic false: fp8; float, num_bits 4: nvfp4; FP8: fp8; NVFP4: nvfp4
                        (INT8: TensorRT-LLM's int8); anything else: vLLM's 16-bit cache
    compressed-tensors  ``kv_cache_scheme`` (``vllm/model_executor/layers/attention/attention.py``): fp8 for any
                        scheme, which vLLM loads only as float, num_bits 8, symmetric, per tensor or attention
                        head (``CompressedTensorsKVCacheMethod.validate_kv_cache_scheme``); another one is said
                        on the source line and the cache taken in 16 bits

A checkpoint that declares only its cache (llm-compressor's KV-cache recipe: no ``config_groups``) keeps its
weights in ``torch_dtype``. Where the targets of compressed-tensors groups of one format cannot be resolved (not
a list of names, a regular expression not read, a model whose modules are not named there, targets that match
none of those names), that format is every module's. Anything else (another method, a format these rows do not
list, groups mixed otherwise: attention in one format and the MLP in another, the experts in two) leaves the
weights in the config's ``torch_dtype`` and the model's source line says which field was not read (or which
modules take which formats) and that ``--dtype`` sets the format; the cache it declares is still taken.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tokometer.perf.modulepatterns import ignored, not_converted
from tokometer.perf.schemetargets import module_groups, scheme_targets
from tokometer.perf.unquantized import ROUTED_EXPERTS, names_shown
from tokometer.util.shown import value_shown

__all__ = ["CheckpointFormat", "checkpoint_format"]

_METHODS = {"fp8": "fp8", "fbgemm_fp8": "fp8", "awq": "awq", "awq_marlin": "awq", "gptq": "gptq",
            "gptq_marlin": "gptq"}
"""``quant_method`` values that name one format for every linear layer."""
_EXPERT_METHODS = {"mxfp4": "mxfp4"}
"""``quant_method`` values that cover a mixture of experts' routed experts only (gpt-oss's ``mxfp4``)."""
_MODELOPT_ALGOS = {"fp8": "fp8", "nvfp4": "nvfp4", "nvfp4_awq": "nvfp4", "w4a16_awq": "awq", "w4a8_awq": "awq",
                   "int8_sq": "int8"}
"""ModelOpt ``quant_algo`` values by the format they store; FP8 with any scaling suffix and W8A8_SQ_* too."""
_KV_ALGOS = {"fp8": "fp8", "int8": "int8", "nvfp4": "nvfp4"}
"""KV-cache formats a checkpoint may declare that the estimate models."""
_MODELOPT_METHODS = ("modelopt", "modelopt_fp4", "modelopt_fp8")


@dataclass(frozen=True)
class CheckpointFormat:
    """A checkpoint's formats as its config declares them; "" where it declares none (or none was read)."""

    weights: str = ""
    """Every linear layer's format ("": the config's ``torch_dtype``)."""
    experts: str = ""
    """The routed experts' own format where it differs from the rest's (gpt-oss: mxfp4)."""
    kv: str = ""
    """The KV-cache format engines take by default for this checkpoint."""
    note: str = ""
    """For the model's source line: what was read, or which field was not and what to do."""
    exclude: Any = None
    """The modules the checkpoint keeps in 16 bits as fnmatch patterns, matched against the model's own
    (`tokometer.perf.unquantized`): a ModelOpt ``exclude_modules`` (``ignore``) as written, compressed-tensors'
    ``ignore`` or a ``modules_to_not_convert`` as vLLM reads them (`tokometer.perf.modulepatterns`); None:
    no list."""
    exclude_field: str = "exclude_modules"
    """The config field the list came from, as said on the model's source line."""
    exclude_problem: str = ""
    """Why the list could not be read as patterns (the modules are then sized in the declared format)."""
    experts_by_layer: bool = False
    """The list names a layer's routed experts by the layer's fused module (``model.layers.N.mlp.experts``), as
    vLLM matches a ``modules_to_not_convert`` against it, not by each expert's modules."""
    unread: bool = False
    """The config declares a weight format the estimate does not read (sized in ``torch_dtype``, said in `note`)."""
    bits: float = 0.0
    """Bits a weight of a 4-bit integer format (awq, gptq, int4) as its config's groups make them: 4 + (16 + zero
    point bits) / group size (`_group_bits`); 0: the format's own (groups of 128)."""
    expert_bits: float = 0.0
    """The same of the routed experts where they are in their own 4-bit integer format (`experts`)."""

    @property
    def read(self) -> bool:
        """Whether the config declared a format the estimate takes (weights or experts)."""
        return bool(self.weights or self.experts)


def checkpoint_format(cfg: dict[str, Any], sidecar: Any = None, moe: bool = False) -> CheckpointFormat:
    """The formats ``cfg``'s ``quantization_config`` declares, else ``sidecar``'s (an ``hf_quant_config.json``
    document); ``moe``: the model has routed experts (gpt-oss's ``mxfp4`` covers only them); ``cfg``'s shapes name
    the modules compressed-tensors groups are resolved over. Never raises: a field of the wrong type is a format not
    read, said in `CheckpointFormat.note`."""
    quant = cfg.get("quantization_config")
    if quant is None and isinstance(sidecar, dict):
        inner = sidecar.get("quantization")
        if isinstance(inner, dict):
            return _modelopt(inner, "hf_quant_config.json", moe)
    if quant is None:
        return CheckpointFormat()
    if not isinstance(quant, dict):
        return _not_read("quantization_config is not an object")
    method = _text(quant.get("quant_method")).lower()
    if method in _EXPERT_METHODS:
        fmt = _EXPERT_METHODS[method]
        return CheckpointFormat(experts=fmt, note=f"quant_method {method}: the experts in {fmt}") if moe else \
            CheckpointFormat(weights=fmt, note=f"quant_method {method}")
    if method in _METHODS:
        fmt = _METHODS[method]
        bits = quant.get("bits", 4)
        if fmt in ("awq", "gptq") and bits != 4:  # the rows are 4-bit groups
            return _not_read(f"quant_method {method} with bits {value_shown(bits)}")
        group_bits, group_note = (0.0, "")
        if fmt in ("awq", "gptq"):  # AutoAWQ's qzeros only with zero_point; GPTQ stores them even when symmetric
            zero = 4 if fmt == "gptq" or quant.get("zero_point", True) is not False else 0
            group_bits, group_note = _group_bits(quant.get("group_size", 128), zero, cfg.get("hidden_size"))
        kept = quant.get("modules_to_not_convert") if fmt != "gptq" else None  # vLLM's GPTQ does not read it
        return CheckpointFormat(weights=fmt, note=f"quant_method {method}{group_note}", bits=group_bits,
                                exclude=None if kept is None else not_converted(kept, substring=fmt == "awq"),
                                exclude_field="modules_to_not_convert", experts_by_layer=True)
    if method in _MODELOPT_METHODS:
        return _modelopt(quant, "quantization_config", moe)
    if method == "compressed-tensors":
        return _compressed_tensors(quant, cfg)
    return _not_read(f"quantization_config's quant_method {value_shown(quant.get('quant_method'))} "
                     "is not read")


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _not_read(why: str, kv: str = "", kv_note: str = "") -> CheckpointFormat:
    declared = f"; KV cache {kv}, as it declares" if kv else kv_note
    return CheckpointFormat(kv=kv, note=f"{why}: sized in its torch_dtype; give --dtype for its format{declared}",
                            unread=True)


def _modelopt_algo(algo: Any) -> str:
    """A ModelOpt ``quant_algo``'s format ("" if not one listed)."""
    key = _text(algo).lower()
    if key.startswith("fp8"):
        return "fp8"
    if key.startswith("w8a8_sq"):
        return "int8"
    return _MODELOPT_ALGOS.get(key, "")


def _modelopt(quant: dict[str, Any], where: str, moe: bool) -> CheckpointFormat:
    """A ModelOpt config (``quant_algo``, ``kv_cache_quant_algo``, a mixed one's ``quantized_layers``)."""
    algo = _text(quant.get("quant_algo"))
    kv, kv_note = _declared_kv(quant.get("kv_cache_scheme") or quant.get("kv_cache_quant_algo"))
    if algo.lower() == "mixed_precision":
        weights, experts = _mixed(quant.get("quantized_layers"), moe)
    else:
        weights, experts = _modelopt_algo(algo), ""
    if not weights:
        return _not_read(f"{where}'s quant_algo {value_shown(quant.get('quant_algo'))} is not read", kv, kv_note)
    note = f"{where}: ModelOpt {algo}" + (f", the experts in {experts}" if experts else "") + kv_note
    exclude = quant.get("exclude_modules", quant.get("ignore"))
    return CheckpointFormat(weights=weights, experts=experts, kv=kv, note=note, exclude=exclude)


def _declared_kv(declared: Any) -> tuple[str, str]:
    """(the KV format a ModelOpt ``kv_cache_scheme`` object or ``kv_cache_quant_algo`` declares, "" if none or one
    vLLM falls back to 16 bits for; its note), by vLLM's rule (module docstring)."""
    if declared is None:
        return "", ""
    if isinstance(declared, dict):
        bits, kind, dynamic = declared.get("num_bits"), declared.get("type"), declared.get("dynamic")
        if kind == "float" and bits == 8 and dynamic is False:
            return "fp8", ", KV cache fp8 (kv_cache_scheme)"
        if kind == "float" and bits == 4:
            return "nvfp4", ", KV cache nvfp4 (kv_cache_scheme)"
        return "", f"; its kv_cache_scheme ({_scheme(declared)}) is one vLLM keeps in 16 bits (give --kv-dtype)"
    fmt = _KV_ALGOS.get(_text(declared).lower(), "")
    if fmt:
        return fmt, f", KV cache {fmt}"
    return "", f"; its KV cache {value_shown(declared)} is not modelled (give --kv-dtype)"


def _compressed_kv(scheme: Any) -> tuple[str, str]:
    """(the KV format a compressed-tensors ``kv_cache_scheme`` declares, ""; its note): fp8 for the one scheme vLLM
    loads (module docstring); another is said, the cache then in 16 bits."""
    if scheme is None:
        return "", ""
    if isinstance(scheme, dict) and scheme.get("type") == "float" and scheme.get("num_bits") == 8 and \
            scheme.get("symmetric") and scheme.get("strategy") in ("tensor", "attn_head"):
        return "fp8", ", KV cache fp8 (kv_cache_scheme)"
    shown = _scheme(scheme) if isinstance(scheme, dict) else value_shown(scheme)
    return "", (f"; its kv_cache_scheme ({shown}) is not one vLLM loads (float, num_bits 8, symmetric, per tensor "
                "or attention head): the cache taken in 16 bits (give --kv-dtype)")


def _scheme(scheme: dict[str, Any]) -> str:
    """A KV scheme's fields as a note quotes them."""
    return ", ".join(f"{key} {value_shown(scheme.get(key))}" for key in ("type", "num_bits", "dynamic", "symmetric",
                                                                      "strategy") if key in scheme) or "empty"


def _mixed(layers: Any, moe: bool) -> tuple[str, str]:
    """(the rest's format, the experts' format) of a ModelOpt MIXED_PRECISION ``quantized_layers`` map: one format
    throughout, or, in a mixture of experts, one for the modules under ``experts`` and one for the rest; ("", "")
    otherwise."""
    if not isinstance(layers, dict) or not layers:
        return "", ""
    experts: set[str] = set()
    rest: set[str] = set()
    for name, entry in layers.items():
        fmt = _modelopt_algo(entry.get("quant_algo")) if isinstance(entry, dict) else ""
        if not fmt:
            return "", ""
        (experts if moe and ".experts" in str(name) else rest).add(fmt)
    if len(experts) > 1 or len(rest) > 1:
        return "", ""
    if not rest:
        return "", experts.pop()
    main = rest.pop()
    expert = experts.pop() if experts else ""
    return main, "" if expert == main else expert


def _compressed_tensors(quant: dict[str, Any], cfg: dict[str, Any]) -> CheckpointFormat:
    """A compressed-tensors config: the formats its ``config_groups``' schemes give the model's modules
    (`_resolved`), and the cache its ``kv_cache_scheme`` declares; a config of a cache alone keeps the weights in
    ``torch_dtype``."""
    groups = quant.get("config_groups")
    kv, kv_note = _compressed_kv(quant.get("kv_cache_scheme"))
    if (groups is None or groups == {}) and (kv or kv_note):
        return CheckpointFormat(kv=kv, note=f"compressed-tensors: the weights in torch_dtype{kv_note}")
    if not isinstance(groups, dict) or not groups:
        return _not_read("compressed-tensors config_groups of a format not read", kv, kv_note)
    schemes = {str(key): group for key, group in groups.items()}
    formats = {key: _scheme_format(group) for key, group in schemes.items()}
    resolved = _resolved(schemes, formats, cfg)
    if isinstance(resolved, str):
        return _not_read(resolved, kv, kv_note)
    rest, experts = resolved
    weights, expert_fmt = _format(rest, formats), _format(experts, formats)
    if expert_fmt == weights:
        rest, experts, expert_fmt = rest | experts, set(), ""
    if not weights and not expert_fmt:
        return CheckpointFormat(kv=kv, note=f"compressed-tensors: no linear module in a group, the weights in "
                                            f"torch_dtype{kv_note}")
    bits, group_note = _int4_bits(schemes, rest, cfg) if weights == "int4" else (0.0, "")
    expert_bits, expert_note = _int4_bits(schemes, experts, cfg) if expert_fmt == "int4" else (0.0, "")
    said = f"compressed-tensors {weights}{group_note}" if weights else "compressed-tensors: the rest in torch_dtype"
    if expert_fmt:
        said += f", the experts {expert_fmt}{expert_note}"
    ignore = quant.get("ignore")
    try:
        patterns, problem = (None if ignore is None else ignored(ignore)), ""
    except ValueError as exc:
        patterns, problem = None, str(exc)
    return CheckpointFormat(weights=weights, experts=expert_fmt, kv=kv, note=f"{said}{kv_note}", exclude=patterns,
                            exclude_field="ignore", exclude_problem=problem, bits=bits, expert_bits=expert_bits)


def _format(keys: set[str | None], formats: dict[str, str]) -> str:
    """The format the groups ``keys`` give, all one ("" for none: the modules in ``torch_dtype``)."""
    return next((formats[key] for key in keys if key is not None), "")


def _resolved(schemes: dict[str, Any], formats: dict[str, str],
              cfg: dict[str, Any]) -> tuple[set[str | None], set[str | None]] | str:
    """(the groups the linear modules outside the routed experts take, the groups the routed experts take), each
    set of one format (None among them: modules in no group, in ``torch_dtype``), as vLLM resolves each module's
    scheme (`tokometer.perf.schemetargets`); or why it is not read: a format not read, or formats mixed otherwise
    than one for the routed experts and one for the rest. Where the targets or the model's modules are not
    matched, every group for every module (`_unresolved`)."""
    try:
        targets = scheme_targets(schemes)
        kinds = module_groups(cfg, targets)
    except ValueError as exc:  # NotMatched too
        return _unresolved(formats, str(exc))
    taken = {key for keys in kinds.values() for key in keys if key is not None}
    if any(None in keys for keys in kinds.values()) and set(targets.values()) - taken:
        return _unresolved(formats, f"its targets match none of the modules named here ({names_shown(cfg, '0')})")
    unread = sorted(key for key in taken if not formats[key])
    if unread:
        return f"compressed-tensors config_groups of a format not read (group {value_shown(unread[0])})"
    by_kind = {kind: {formats[key] if key is not None else None for key in keys} for kind, keys in kinds.items()}
    rest_formats = set().union(*(fmts for kind, fmts in by_kind.items() if kind != ROUTED_EXPERTS))
    expert_formats = by_kind.get(ROUTED_EXPERTS, set())
    if len(rest_formats) > 1 or len(expert_formats) > 1 or (expert_formats == {None} and rest_formats != {None}):
        return f"compressed-tensors config_groups give {_kinds_said(by_kind)}: formats mixed beyond the experts' " \
               "and the rest's"
    rest = set().union(*(keys for kind, keys in kinds.items() if kind != ROUTED_EXPERTS))
    return rest, kinds.get(ROUTED_EXPERTS, set())


def _unresolved(formats: dict[str, str], why: str) -> tuple[set[str | None], set[str | None]] | str:
    """Every group for every module, where the modules' own could not be resolved (``why``): read where the groups
    are of one format; several, or one not read, not read."""
    found = set(formats.values())
    if "" in found:
        return "compressed-tensors config_groups of a format not read"
    if len(found) > 1:
        return f"compressed-tensors config_groups of several formats ({' and '.join(sorted(found))}) where {why}"
    return set(formats), set()


def _kinds_said(by_kind: dict[str, set[str | None]]) -> str:
    """Each kind of module's formats in words: "attention fp8 and the dense MLP fp8 or int4 by module"."""
    said = [f"{'' if kind == 'attention' else 'the '}{'experts' if kind == ROUTED_EXPERTS else kind} "
            + " or ".join(sorted(fmt or "in torch_dtype (no group)" for fmt in fmts))
            + (" by module" if len(fmts) > 1 else "") for kind, fmts in by_kind.items()]
    return ", ".join(said[:-1]) + " and " + said[-1] if len(said) > 1 else said[0]


_MAX_GROUP = 1 << 20
"""The largest group size read (a row of a model's widest matrix is far below it)."""


def _group_bits(size: Any, zero_bits: int, hidden: Any) -> tuple[float, str]:
    """(bits a weight of 4-bit integer groups of ``size`` weights, each with a 16-bit scale and a zero point of
    ``zero_bits``, and the note that says so), ``size`` -1 one group a row, of the hidden size; (0, why)
    for a size not read (the format's groups of 128 are taken)."""
    if size == -1 and isinstance(hidden, int) and not isinstance(hidden, bool) and 0 < hidden <= _MAX_GROUP:
        return 4 + (16 + zero_bits) / hidden, f", groups of a row ({4 + (16 + zero_bits) / hidden:.3f} bits)"
    if not isinstance(size, int) or isinstance(size, bool) or not 0 < size <= _MAX_GROUP:
        return 0.0, f"; its group_size {value_shown(size)} is not read: groups of 128 taken"
    bits = 4 + (16 + zero_bits) / size
    return bits, f", groups of {size}{' with zero points' if zero_bits else ''} ({bits:.3f} bits)"


def _int4_bits(schemes: dict[str, Any], keys: set[str | None], cfg: dict[str, Any]) -> tuple[float, str]:
    """`_group_bits` of the compressed-tensors int4 schemes ``keys`` name (None: no scheme): a group's
    ``group_size`` (strategy group), a row (channel) or nothing (tensor), with a 4-bit zero point when not
    ``symmetric`` (packed as the weights); schemes of several sizes are not read (the format's groups of 128 are
    taken)."""
    found: set[tuple[float, str]] = set()
    for key in sorted(filter(None, keys)):
        weights = schemes[key]["weights"]  # `_scheme_format` read it as int4: an object with its fields
        strategy, zero = weights.get("strategy"), 0 if weights.get("symmetric", True) else 4
        if strategy == "tensor":
            found.add((4.0, ", one scale a matrix (4.000 bits)"))
        else:
            found.add(_group_bits(-1 if strategy == "channel" else weights.get("group_size"), zero,
                                  cfg.get("hidden_size")))
    if len(found) != 1:
        return 0.0, "; its schemes' groups differ: groups of 128 taken"
    return found.pop()


def _scheme_format(group: Any) -> str:
    """A compressed-tensors scheme's weight format ("" where not one listed)."""
    weights = group.get("weights") if isinstance(group, dict) else None
    if not isinstance(weights, dict):
        return ""
    bits, kind, size = weights.get("num_bits"), _text(weights.get("type")), weights.get("group_size")
    if kind == "float" and bits == 8:
        return "fp8"
    if kind == "float" and bits == 4:
        return {16: "nvfp4", 32: "mxfp4"}.get(size, "") if isinstance(size, int) else ""
    if kind == "int" and bits == 8:
        return "int8" if isinstance(group.get("input_activations"), dict) else ""
    return "int4" if kind == "int" and bits == 4 else ""
