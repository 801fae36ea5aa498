"""Starting one variant's engine: its settings onto the launcher, its start-up timed, its failure in the engine's words.

`start_variant` maps the variant's settings (`tokometer.tune.settings`) onto the engine's launcher
(`tokometer.engines`: llama.cpp's ``launch_llamacpp``, vLLM's planner and ``start_vllm``), on a free port, and times
the start from the engine's process start to its first answer (a 1-token completion, `tokometer.engines.ready`).
What is prepared before the clock starts is not timed: finding the binary, requantising the model
(``quantization=Q8_0``: the variant's model file, by default the bundled one, requantised once with llama-quantize
and cached, `tokometer.engines.quantize.requantized`), hashing the model file for the engine's identity and planning
vLLM's flags. vLLM's start, as timed, includes asking its environment for vLLM's version (a fraction of a second).

Where a second start is measured (by default for llama.cpp, where it costs about a second; ``second_start=True``
for vLLM, whose start takes minutes), the first engine is stopped and started again, and the variant's run uses
that second engine: `Startup.second_s` is the start with the page cache (and vLLM's compile caches) warm.

An engine that does not come up (a flag it refuses, out of memory, it died, not ready in time) raises
`VariantStartFailed` with the end of its own log and its command line; nothing is left running. A problem no variant
could get past (no llama-server, no vLLM) is the launcher's own EngineError.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from types import TracebackType
from typing import Any

from tokometer.engines.handle import EngineHandle
from tokometer.tune.outcome import Startup, Variant
from tokometer.tune.settings import EngineSettings, engine_settings
from tokometer.util.errors import EngineError, TokometerError

__all__ = ["LAST_WORDS_LINES", "LAST_WORDS_LINE_CHARS", "LaunchOptions", "LaunchedVariant", "VariantStartFailed",
           "last_words", "start_variant"]

LAST_WORDS_LINES = 8
"""The most lines of an engine's log a failed start quotes."""
LAST_WORDS_LINE_CHARS = 400
"""The most characters of one such line."""
_TROUBLE = re.compile(r"error|exception|fail|invalid|unsupported|refus|unknown|unrecognized|out of memory|killed",
                      re.IGNORECASE)


@dataclass(frozen=True)
class LaunchOptions:
    """How to start every variant of a tune (what is not a setting of the variant)."""

    engine: str = "llamacpp"
    """``llamacpp`` or ``vllm``."""
    host: str = "127.0.0.1"
    ready_timeout_s: float | None = None
    """Seconds from process start to the first answer; None: the launcher's default (llama.cpp 120, vLLM 1800)."""
    llama_server: str | None = None
    """llama.cpp: the ``llama-server`` binary (None: the normal lookup)."""
    vllm: str | None = None
    """vLLM: the ``vllm`` command, its venv or its python (None: the normal lookup)."""
    device: str = "cpu"
    """vLLM: ``cpu`` (its CPU build) or ``gpu`` (CUDA); llama.cpp: ``cpu``."""
    gpu_memory_gb: float | None = None
    """vLLM on a GPU: its memory in GiB (None: detected)."""
    second_start: bool | None = None
    """Time a second start after stopping the first (the run then uses the second engine); None: on for llama.cpp,
    off for vLLM."""

    @property
    def times_second_start(self) -> bool:
        from tokometer.engines.startup import SECOND_START_BY_DEFAULT

        return self.second_start if self.second_start is not None else SECOND_START_BY_DEFAULT.get(self.engine, False)


@dataclass(frozen=True)
class LaunchedVariant:
    """A variant's engine, up and answering: the handle, how long it took to start and its exact command line.

    A context manager: leaving the ``with`` block stops the engine's whole process group."""

    handle: EngineHandle
    startup: Startup
    command_line: tuple[str, ...]

    def stop(self) -> None:
        self.handle.stop()

    def __enter__(self) -> LaunchedVariant:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


class VariantStartFailed(TokometerError):
    """A variant's engine did not come up: ``last_words`` is the end of the engine's own log (or of the tool that
    prepared its weights), ``command_line`` what was run (empty when nothing was). Nothing it started is running."""

    def __init__(self, message: str, last_words: str, command_line: tuple[str, ...]) -> None:
        super().__init__(message)
        self.last_words = last_words
        self.command_line = command_line


def last_words(log: str, lines: int = LAST_WORDS_LINES) -> str:
    """The few lines (at most ``lines``, each cut to `LAST_WORDS_LINE_CHARS`) of an engine's log that say why it
    stopped: its last lines, after the lines before them that name an error (llama.cpp prints a refused flag first,
    then its usage)."""
    kept = [_cut(line.rstrip()) for line in log.splitlines() if line.strip()]
    tail = kept[len(kept) - min(len(kept), max(1, lines // 2)):]
    earlier = [line for line in kept[:len(kept) - len(tail)] if _TROUBLE.search(line)]
    room = max(0, lines - len(tail))
    return "\n".join([*earlier[len(earlier) - min(len(earlier), room):], *tail])


def _cut(line: str) -> str:
    return line if len(line) <= LAST_WORDS_LINE_CHARS else line[:LAST_WORDS_LINE_CHARS] + "…"


@contextmanager
def _failing(variant: Variant) -> Iterator[None]:
    """An EngineError inside becomes this variant's `VariantStartFailed`, with the engine's words and command."""
    try:
        yield
    except EngineError as exc:
        words = last_words(exc.engine_log) if exc.engine_log else str(exc)
        raise VariantStartFailed(f"variant {variant.name} did not start: {exc}", words, exc.command_line) from exc


def _llamacpp_starter(mapped: EngineSettings, options: LaunchOptions,
                      variant: Variant) -> Callable[[], EngineHandle]:
    """What starts this variant's llama-server, with the binary found and the model file ready (requantised)."""
    from tokometer.bundled import file_sha256
    from tokometer.engines.binary import find_llama_server
    from tokometer.engines.llamacpp import LlamaCppSettings, checked_model, launch_llamacpp
    from tokometer.engines.serverbinary import llama_server_version

    keywords = dict(mapped.keywords)
    quantization = keywords.pop("quantization", None)
    if options.ready_timeout_s is not None:
        keywords["ready_timeout_s"] = options.ready_timeout_s
    binary = find_llama_server(options.llama_server)
    settings = LlamaCppSettings(host=options.host, port=0, binary=binary, extra_args=mapped.argv, **keywords)
    with _failing(variant):
        model, meta = checked_model(settings)
        if quantization is not None:
            model, meta = checked_model(replace(settings, model_path=_requantized(model, str(quantization))))
        file_sha256(model)  # the identity's hash, cached by size and mtime: not part of the timed start
    llama_server_version(binary)  # likewise (cached)
    return lambda: launch_llamacpp(binary, model, meta, settings)


def _requantized(model: Path, quantization: str) -> Path:
    from tokometer.engines.quantize import requantized

    return requantized(model, quantization)


def _vllm_starter(mapped: EngineSettings, options: LaunchOptions, variant: Variant) -> Callable[[], EngineHandle]:
    """What starts this variant's vLLM (on a free port each time), with vLLM found and the model ready."""
    from tokometer.engines.vllm import find_vllm, start_vllm

    install = find_vllm(options.vllm)
    keywords = dict(mapped.keywords)
    model, served = _vllm_model(keywords.pop("model", None))
    timeout = {"ready_timeout_s": options.ready_timeout_s} if options.ready_timeout_s is not None else {}
    with _failing(variant):
        _vllm_plan(model, served, keywords, mapped.argv, options)  # a plan vLLM could not start is said now

    def start() -> EngineHandle:
        plan = _vllm_plan(model, served, keywords, mapped.argv, options)
        plan.argv[0] = str(install.binary)
        return start_vllm(plan, install=install, **timeout)

    return start


def _vllm_model(model: Path | None) -> tuple[str, str | None]:
    """The checkpoint vLLM serves and the name it serves it under: the bundled model converted for vLLM unless
    ``model`` is set (as ``tokometer serve --engine vllm`` does)."""
    if model is not None:
        return str(model), None
    from tokometer.engines.vllm_model import BUNDLED_VLLM_NAME, bundled_checkpoint

    return str(bundled_checkpoint()), BUNDLED_VLLM_NAME


def _vllm_plan(model: str, served: str | None, keywords: dict[str, Any], argv: tuple[str, ...],
               options: LaunchOptions) -> Any:
    """vLLM's plan for these keywords and flags on a free port (the GPU planner on a GPU, else the CPU one)."""
    from tokometer.engines.process import free_port
    from tokometer.engines.vllm import plan_vllm, plan_vllm_cpu

    port = free_port(options.host)
    if options.device == "gpu":
        from tokometer.engines.gpus import gpu_for_planning

        return plan_vllm(model, gpu_for_planning(options.gpu_memory_gb), host=options.host, port=port,
                         extra_args=argv, **keywords)
    return plan_vllm_cpu(model, served_name=served, host=options.host, port=port, extra_args=argv, **keywords)


_STARTERS: dict[str, Callable[[EngineSettings, LaunchOptions, Variant], Callable[[], EngineHandle]]] = {
    "llamacpp": _llamacpp_starter, "vllm": _vllm_starter}
"""Per engine, what prepares its start (the engines `tokometer.tune.settings.ENGINES` names)."""


def start_variant(variant: Variant, options: LaunchOptions) -> LaunchedVariant:
    """Start ``variant``'s engine and time it (twice where ``options`` says so: the run then uses the second);
    raise `VariantStartFailed` if it does not come up, with nothing left running.

    ConfigError for settings that are not allowed (`tokometer.tune.settings.check_settings` says so before a tune
    starts); EngineError for what no variant could get past (no llama-server or vLLM to run)."""
    mapped = engine_settings(options.engine, variant.settings, options.device)
    start = _STARTERS[options.engine](mapped, options, variant)
    from tokometer.engines.startup import timed_start

    with _failing(variant):  # timed as every engine start is (`tokometer.engines.startup`)
        handle, timed = timed_start(start, options.engine, options.times_second_start)
    startup = Startup(timed.cold_s, timed.warm_s) if timed is not None else Startup(0.0)
    return LaunchedVariant(handle, startup, tuple(handle.identity.get("argv") or ()))
