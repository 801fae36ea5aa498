"""The settings a tune varies, per engine: which names are known, what each takes, and where each goes.

A setting is named as the engine's own flag without its dashes (``parallel`` for ``--parallel``); its value is the
text the user gave. A known setting is checked before anything starts (`check_settings`: its kind and range, one
line naming the setting, the value and what is allowed) and maps onto the launcher: a keyword of
`tokometer.engines.LlamaCppSettings` or of vLLM's planner (``plan_vllm``/``plan_vllm_cpu``), or flags on the engine's
command line.

llama.cpp (``llamacpp``):

    parallel, ctx-size, threads      LlamaCppSettings fields (slots, total context, threads; the context is checked
                                     against the slots as the launcher checks it: at least 256 tokens a slot)
    batch-size, ubatch-size          --batch-size N, --ubatch-size N
    threads-batch                    --threads-batch N
    flash-attn                       --flash-attn on|off|auto (true/false read as on/off)
    cache-type-k, cache-type-v       --cache-type-k TYPE (f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0, q5_1)
    cont-batching                    --cont-batching / --no-cont-batching
    model                            an existing .gguf file (LlamaCppSettings.model_path)
    quantization                     a type llama-quantize knows (Q8_0, Q2_K, ...): the model requantised to it
                                     (`tokometer.tune.launch`, cached)

vLLM (``vllm``): ``max-num-seqs``, ``max-num-batched-tokens`` (flags), ``enable-chunked-prefill``,
``enable-prefix-caching`` (``--enable-X`` / ``--no-enable-X``), ``max-model-len`` (the planner's keyword), ``dtype``
(a flag), ``model`` (an existing checkpoint directory or file); ``kv-cache-dtype``, ``gpu-memory-utilization``,
``tensor-parallel-size`` and ``quantization`` are the GPU planner's keywords and plain flags on vLLM's CPU build;
``kv-cache-gb`` is the CPU planner's KV-cache size (``VLLM_CPU_KVCACHE_SPACE``).

Booleans are ``on``/``off``/``true``/``false``; names of choices are read in any case. A name that is not known is
passed to the engine as ``--name value`` (an empty value: ``--name`` alone), and the engine judges it: a flag it
refuses makes that variant fail to start, with the engine's own words. Such a value starting with ``-`` must be a
number (another flag is a setting of its own). Names are lower-case words joined by ``-`` (``max_num_seqs`` is
refused, with the spelling to use); what tokometer sets itself (``host``, ``port``, ...) is refused too.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokometer.engines.llamacpp import LlamaCppSettings, check_slots
from tokometer.engines.quantize import QUANT_TYPE
from tokometer.engines.vllm import KV_CACHE_DTYPES, QUANTIZATIONS
from tokometer.util.errors import ConfigError, EngineError
from tokometer.util.limits import MAX_CONCURRENCY, MAX_MEMORY_GIB, MAX_THREADS, MAX_TOKENS
from tokometer.util.readlimit import open_input
from tokometer.util.shown import quoted

__all__ = ["ENGINES", "GGUF_TYPES", "LLAMACPP_CACHE_TYPES", "MAX_VALUE_CHARS", "VLLM_DTYPES", "EngineSettings",
           "Setting", "check_settings", "engine_settings", "known_settings"]

ENGINES = ("llamacpp", "vllm")
MAX_VALUE_CHARS = 4096
"""The longest value text a setting takes (a path, a flag's argument)."""
GGUF_TYPES = ("Q1_0", "Q2_0", "Q4_0", "Q4_1", "MXFP4_MOE", "Q5_0", "Q5_1", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ2_M",
              "IQ1_S", "IQ1_M", "TQ1_0", "TQ2_0", "Q2_K", "Q2_K_S", "IQ3_XXS", "IQ3_S", "IQ3_M", "Q3_K", "IQ3_XS",
              "Q3_K_S", "Q3_K_M", "Q3_K_L", "IQ4_NL", "IQ4_XS", "Q4_K", "Q4_K_S", "Q4_K_M", "Q5_K", "Q5_K_S",
              "Q5_K_M", "Q6_K", "Q8_0", "F16", "BF16", "F32")
"""The types llama-quantize (b11434) lists as allowed (``llama-quantize --help``; a test compares them)."""
LLAMACPP_CACHE_TYPES = ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1")
"""``--cache-type-k``/``--cache-type-v`` values llama-server (b11434) allows."""
VLLM_DTYPES = ("auto", "bfloat16", "float", "float16", "float32", "half")
"""``--dtype`` values vLLM (0.32) allows."""
MIN_GPU_MEMORY_UTILIZATION, MAX_GPU_MEMORY_UTILIZATION = 0.05, 0.99
"""``--gpu-memory-utilization`` as ``tokometer serve`` and vLLM's planner take it."""
MAX_TENSOR_PARALLEL = 64
"""``--tensor-parallel-size`` at most, as ``tokometer serve`` takes it."""

_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_WHOLE = re.compile(r"[0-9]{1,20}")
_DECIMAL = re.compile(r"(?:[0-9]{1,20}(?:\.[0-9]{0,20})?|\.[0-9]{1,20})")
_NUMBER = re.compile(r"-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)")
_TRUE, _FALSE = ("on", "true"), ("off", "false")
_RESERVED = {
    "llamacpp": {"host": "tune starts every variant on loopback itself", "port": "tune picks a free port itself",
                 "alias": "tune names the model after its file", "metrics": "tune always turns on /metrics"},
    "vllm": {"host": "tune starts every variant on loopback itself", "port": "tune picks a free port itself",
             "served-model-name": "tune names the model itself",
             "device-memory-utilization": "write it gpu-memory-utilization"},
}


@dataclass(frozen=True)
class Kind:
    """What a value may be: ``read`` turns the text into the launcher's value (ValueError if it is not one),
    ``allowed`` says in words what is allowed, and ``flag`` makes the engine's arguments from that value."""

    allowed: str
    read: Callable[[str], Any]
    flag: Callable[[str, Any], tuple[str, ...]]


def _valued(name: str, value: Any) -> tuple[str, ...]:
    return (f"--{name}", f"{value:.10g}" if isinstance(value, float) else str(value))


def _switched(name: str, value: Any) -> tuple[str, ...]:
    return (f"--{name}",) if value else (f"--no-{name}",)


def _whole(low: int, high: int) -> Kind:
    def read(text: str) -> int:
        if not _WHOLE.fullmatch(text) or not low <= int(text) <= high:
            raise ValueError(text)
        return int(text)

    return Kind(f"a whole number from {low} to {high}", read, _valued)


def _decimal(low: float, high: float, *, low_open: bool = False) -> Kind:
    def read(text: str) -> float:
        number = float(text) if _DECIMAL.fullmatch(text) else float("nan")
        if not (low < number if low_open else low <= number) or not number <= high:
            raise ValueError(text)
        return number

    span = f"above {low:.10g} and at most {high:.10g}" if low_open else f"from {low:.10g} to {high:.10g}"
    return Kind(f"a number {span}", read, _valued)


def _one_of(choices: tuple[str, ...], aliases: Mapping[str, str] | None = None) -> Kind:
    by_fold = {choice.casefold(): choice for choice in choices} | dict(aliases or {})

    def read(text: str) -> str:
        return by_fold[text.casefold()]  # KeyError is a LookupError: reported as not allowed

    return Kind("one of " + ", ".join(choices), read, _valued)


def _read_switch(text: str) -> bool:
    folded = text.casefold()
    if folded not in _TRUE + _FALSE:
        raise ValueError(text)
    return folded in _TRUE


def _read_gguf_file(text: str) -> Path:
    path = Path(text).expanduser()
    with open_input(path) as handle:  # OSError (none there, a directory, unreadable): not allowed; a FIFO: no wait
        if handle.read(4) != b"GGUF":
            raise ValueError(text)
    return path


def _read_checkpoint(text: str) -> Path:
    path = Path(text).expanduser()
    if not path.exists():
        raise ValueError(text)
    return path


def _read_gguf_type(text: str) -> str:
    upper = text.upper()
    if upper not in GGUF_TYPES or not QUANT_TYPE.match(upper):
        raise ValueError(text)
    return upper


SWITCH = Kind("on, off, true or false", _read_switch, _switched)
GGUF_FILE = Kind("an existing GGUF model file", _read_gguf_file, _valued)
CHECKPOINT = Kind("an existing checkpoint directory or file", _read_checkpoint, _valued)
GGUF_TYPE = Kind("a type llama-quantize knows: " + ", ".join(GGUF_TYPES), _read_gguf_type, _valued)


@dataclass(frozen=True)
class Setting:
    """One known setting of an engine: its kind, and the launcher keyword it sets where it sets one (else flags)."""

    name: str
    kind: Kind
    keyword: str | None = None
    """The `LlamaCppSettings` field or the vLLM planner's keyword it sets; None: flags on the command line."""
    keyword_on: tuple[str, ...] = ("cpu", "gpu")
    """The devices on which it sets ``keyword``; on the others it is flags (vLLM's CPU planner takes fewer)."""

    def read(self, text: str) -> Any:
        """The launcher's value for ``text``; ConfigError in one line saying what is allowed."""
        try:
            return self.kind.read(text)
        except (ValueError, LookupError, OSError):
            raise ConfigError(f"setting {self.name}={text!r} is not allowed: {self.name} takes {self.kind.allowed}") \
                from None


def _table(*settings: Setting) -> dict[str, Setting]:
    return {setting.name: setting for setting in settings}


_TOKENS = _whole(1, MAX_TOKENS)
_FLASH = _one_of(("on", "off", "auto"), {"true": "on", "false": "off"})
_CACHE_TYPE = _one_of(LLAMACPP_CACHE_TYPES)
_GPU_ONLY = ("gpu",)
KNOWN: dict[str, dict[str, Setting]] = {
    "llamacpp": _table(
        Setting("parallel", _whole(1, MAX_CONCURRENCY), "parallel"), Setting("ctx-size", _TOKENS, "ctx_size"),
        Setting("threads", _whole(1, MAX_THREADS), "threads"), Setting("threads-batch", _whole(1, MAX_THREADS)),
        Setting("batch-size", _TOKENS), Setting("ubatch-size", _TOKENS), Setting("flash-attn", _FLASH),
        Setting("cache-type-k", _CACHE_TYPE), Setting("cache-type-v", _CACHE_TYPE),
        Setting("cont-batching", SWITCH), Setting("model", GGUF_FILE, "model_path"),
        Setting("quantization", GGUF_TYPE, "quantization")),
    "vllm": _table(
        Setting("max-num-seqs", _whole(1, MAX_CONCURRENCY)), Setting("max-num-batched-tokens", _TOKENS),
        Setting("enable-chunked-prefill", SWITCH), Setting("enable-prefix-caching", SWITCH),
        Setting("max-model-len", _TOKENS, "max_model_len"), Setting("dtype", _one_of(VLLM_DTYPES)),
        Setting("model", CHECKPOINT, "model"),
        Setting("kv-cache-dtype", _one_of(KV_CACHE_DTYPES), "kv_cache_dtype", _GPU_ONLY),
        Setting("gpu-memory-utilization", _decimal(MIN_GPU_MEMORY_UTILIZATION, MAX_GPU_MEMORY_UTILIZATION),
                "gpu_memory_utilization", _GPU_ONLY),
        Setting("tensor-parallel-size", _whole(1, MAX_TENSOR_PARALLEL), "tensor_parallel_size", _GPU_ONLY),
        Setting("quantization", _one_of(QUANTIZATIONS), "quantization", _GPU_ONLY),
        Setting("kv-cache-gb", _decimal(0, MAX_MEMORY_GIB, low_open=True), "kv_cache_gib", ("cpu",))),
}
"""Per engine, the known settings by name."""


def _check_slots(keywords: Mapping[str, Any]) -> None:
    """The context against the slots, as the llama.cpp launcher checks them (`check_slots`)."""
    fields = {key: keywords[key] for key in ("parallel", "ctx_size", "threads") if key in keywords}
    try:
        check_slots(LlamaCppSettings(**fields))
    except EngineError as exc:
        raise ConfigError(f"setting {str(exc).replace('--', '')}") from None


def _nothing_together(keywords: Mapping[str, Any]) -> None:
    """vLLM's settings are each checked alone here; its planner and vLLM itself judge them together."""


_TOGETHER: dict[str, Callable[[Mapping[str, Any]], None]] = {"llamacpp": _check_slots, "vllm": _nothing_together}
"""Per engine, what its settings must allow together (checked after each alone)."""


def known_settings(engine: str) -> Mapping[str, Setting]:
    """The known settings of ``engine`` (``llamacpp`` or ``vllm``) by name; ConfigError for another engine."""
    if engine not in KNOWN:
        raise ConfigError(f"tune knows the settings of {' and '.join(ENGINES)}, not of {engine!r}")
    return KNOWN[engine]


def _check_name(engine: str, name: str) -> None:
    if not _NAME.fullmatch(name) or len(name) > 64:
        spelled = name.strip("-").replace("_", "-").lower()
        hint = f"write {spelled}" if _NAME.fullmatch(spelled) and len(spelled) <= 64 else "e.g. ctx-size"
        raise ConfigError(f"setting name {quoted(name)} is not allowed: a setting is the engine's flag without its "
                          f"dashes, lower-case words joined by '-' ({hint})")
    if name in _RESERVED[engine]:
        raise ConfigError(f"setting {name} is not allowed: {_RESERVED[engine][name]}")
    negated = name.removeprefix("no-")
    if negated != name and KNOWN[engine].get(negated, None) is not None:
        raise ConfigError(f"setting {name} is not allowed: write {negated}=off")


def _check_text(name: str, text: str) -> None:
    if len(text) > MAX_VALUE_CHARS:
        raise ConfigError(f"setting {name}={quoted(text)} is not allowed: a value is at most {MAX_VALUE_CHARS} "
                          "characters")
    if any(ord(char) < 32 or ord(char) == 127 for char in text):
        raise ConfigError(f"setting {name}={text!r} is not allowed: a value is text on one line, without control "
                          "characters")


def _passed_through(name: str, text: str) -> tuple[str, ...]:
    """``--name value`` (``--name`` alone for an empty value) for a setting tune does not know."""
    if text.startswith("-") and not _NUMBER.fullmatch(text):
        raise ConfigError(f"setting {name}={text!r} is not allowed: a value starting with '-' must be a number; "
                          "give another flag as a setting of its own")
    return (f"--{name}", text) if text else (f"--{name}",)


@dataclass(frozen=True)
class EngineSettings:
    """A variant's settings as the launcher takes them: keywords (already typed) and the engine's extra flags."""

    keywords: Mapping[str, Any]
    """`LlamaCppSettings` fields (``quantization`` besides, for the launcher to requantise) or the vLLM planner's
    keywords (``model`` besides)."""
    argv: tuple[str, ...]
    """Flags for the engine's command line, in the settings' order; unknown names as ``--name value``."""


def engine_settings(engine: str, settings: Mapping[str, str], device: str = "cpu") -> EngineSettings:
    """``settings`` checked and split into the launcher's keywords and the engine's flags, for ``device``
    (``cpu``, or ``gpu`` for vLLM on CUDA). ConfigError in one line for the first setting that is not allowed."""
    known = known_settings(engine)
    keywords: dict[str, Any] = {}
    argv: list[str] = []
    for name, text in settings.items():
        _check_name(engine, name)
        _check_text(name, text)
        setting = known.get(name)
        if setting is None:
            argv += _passed_through(name, text)
            continue
        value = setting.read(text)
        if setting.keyword is not None and device in setting.keyword_on:
            keywords[setting.keyword] = value
        else:
            argv += setting.kind.flag(name, value)
    _TOGETHER[engine](keywords)
    return EngineSettings(keywords, tuple(argv))


def check_settings(engine: str, settings: Mapping[str, str]) -> None:
    """Check ``settings`` (name → value text) for ``engine`` before anything starts: each known setting's kind and
    range, the names, and what the settings allow together. ConfigError in one line naming the setting, the value
    and what is allowed."""
    engine_settings(engine, settings)
