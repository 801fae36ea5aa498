"""The embedded engine: llama.cpp's ``llama-server`` running a GGUF model (by default the bundled
Gemma 3 270M Q4_K_M), started with sane settings and returned once it answers a real request.

This module holds the settings, the command line and the launch of a given binary; starting with the
binary the normal lookup finds is `tokometer.engines.embedded.start_llamacpp` (the lookup may build
and smoke-run a binary, and the smoke run launches it through here).

Settings and why:
    --parallel 4          four slots: continuous batching across up to four requests at once
    --ctx-size 4096 × N   the total KV cache; llama.cpp splits it evenly, so 4096 tokens per slot
    --threads cores       physical cores; hyper-threads add contention, not speed, on matmuls
                          ($TOKOMETER_ENGINE_THREADS where set: `default_threads`)
    --metrics             Prometheus counters at /metrics (tokens, slots busy, KV use)
    --alias <file stem>   a stable model name for requests and saved runs
    --jinja --chat-template   only for a Gemma GGUF that carries no chat template (the bundled one):
                          Gemma's own turn format, instead of llama.cpp's ChatML fallback
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokometer.bundled import bundled_model_path, gemma_chat_template
from tokometer.engines.handle import EngineHandle
from tokometer.engines.identity import llamacpp_identity, physical_cores
from tokometer.engines.process import EngineProcess, busy_port_error, connect_host, free_port, port_in_use
from tokometer.engines.ready import wait_ready
from tokometer.util.errors import EngineError
from tokometer.util.gguf import gguf_metadata
from tokometer.util.limits import MAX_THREADS
from tokometer.util.shown import quoted

__all__ = ["THREADS_ENV_VAR", "LlamaCppSettings", "chat_template_args", "check_slots", "checked_model",
           "default_threads", "launch_llamacpp", "llamacpp_argv", "swa_args"]

_BIND_FAILURE = ("couldn't bind", "address already in use", "failed to bind")
_AUTO_PORT_TRIES = 3
THREADS_ENV_VAR = "TOKOMETER_ENGINE_THREADS"


@dataclass(frozen=True)
class LlamaCppSettings:
    """How to start ``llama-server``; every field has a sensible default."""

    model_path: Path | None = None  # None: the bundled Gemma 3 270M (assembled on demand)
    host: str = "127.0.0.1"
    port: int = 0  # 0: pick a free port
    parallel: int = 4
    ctx_size: int | None = None  # None: 4096 * parallel
    threads: int | None = None  # None: default_threads()
    binary: str | None = None  # None: the normal lookup (see engines.binary; engines.embedded uses it)
    extra_args: tuple[str, ...] = ()
    ready_timeout_s: float = 120.0


def chat_template_args(meta: dict[str, Any], extra_args: tuple[str, ...]) -> tuple[str, ...]:
    """``--jinja --chat-template <Gemma's>`` for a Gemma GGUF without a template (`tokometer.bundled`),
    unless the user set one."""
    template = gemma_chat_template(meta)
    if template is None or any(arg.startswith("--chat-template") for arg in extra_args):
        return ()
    return ("--jinja", "--chat-template", template)


def default_threads() -> int:
    """``--threads`` when the settings give none: ``$TOKOMETER_ENGINE_THREADS`` where set, else the physical
    cores.

    The variable is for a host whose cores other work shares (the test suite sets 1): ggml's threads meet at a
    barrier after every operation and wait there, so one of two threads not scheduled holds the other: on two
    cores under a load of 6–8, the bundled model decoded 2–3 tokens/s on two threads and 19–23 on one.
    EngineError when it is not a whole number from 1 to `MAX_THREADS`."""
    text = os.environ.get(THREADS_ENV_VAR, "").strip()
    if not text:
        return physical_cores()
    if not (text.isascii() and text.isdigit() and len(text) <= 6) or not 1 <= int(text) <= MAX_THREADS:
        raise EngineError(f"${THREADS_ENV_VAR} is {quoted(text)}: give a whole number of threads from 1 to "
                          f"{MAX_THREADS}, or unset it")
    return int(text)


def llamacpp_argv(binary: str, model: Path, port: int, settings: LlamaCppSettings,
                  meta: dict[str, Any] | None = None) -> list[str]:
    """The ``llama-server`` command line for these settings (``meta``: the model's GGUF header)."""
    parallel = settings.parallel
    return [
        binary, "--model", str(model), "--alias", model.stem,
        "--host", settings.host, "--port", str(port),
        "--parallel", str(parallel),
        "--ctx-size", str(settings.ctx_size or 4096 * parallel),
        "--threads", str(settings.threads or default_threads()),
        "--metrics",
        *swa_args(meta or {}, settings.extra_args),
        *chat_template_args(meta or {}, settings.extra_args),
        *settings.extra_args,
    ]


def swa_args(meta: dict[str, Any], extra_args: Sequence[str]) -> tuple[str, ...]:
    """``--swa-full`` for a model with sliding-window attention (Gemma 2/3, ...): llama.cpp otherwise keeps
    only the window's KV for those layers and cannot reuse a cached prompt prefix (measured with the
    bundled Gemma 3: 0 % of a shared 224-token prefix reused without it, 65 % with it), so neither shared
    system prompts nor chat histories would show a prompt cache. It costs the full KV for those layers."""
    has_window = any(key.endswith(".attention.sliding_window") and value for key, value in meta.items())
    return ("--swa-full",) if has_window and "--swa-full" not in extra_args else ()


def check_slots(settings: LlamaCppSettings) -> None:
    """The slots, the context and the threads checked (no file is read); EngineError saying what to fix."""
    if settings.parallel < 1:
        raise EngineError(f"--parallel must be at least 1 (got {settings.parallel})")
    if settings.ctx_size is not None and settings.ctx_size < settings.parallel * 256:
        raise EngineError(f"--ctx-size {settings.ctx_size} is too small for {settings.parallel} slots: "
                          "llama.cpp splits it evenly between slots; give at least 256 tokens per slot")
    if settings.threads is not None and settings.threads < 1:
        raise EngineError(f"--threads must be at least 1 (got {settings.threads})")


def _validate(settings: LlamaCppSettings) -> Path:
    check_slots(settings)
    model = settings.model_path if settings.model_path is not None else bundled_model_path()
    model = model.expanduser()
    if not model.is_file():
        raise EngineError(f"model file not found: {model}; pass an existing .gguf file with --model, "
                          "or leave --model out to use the bundled Gemma 3 270M")
    with model.open("rb") as handle:
        if handle.read(4) != b"GGUF":
            raise EngineError(f"{model} is not a GGUF file: llama.cpp needs a .gguf model "
                              "(convert with llama.cpp's convert_hf_to_gguf.py, or download a GGUF build)")
    return model.resolve()


def checked_model(settings: LlamaCppSettings) -> tuple[Path, dict[str, Any]]:
    """The settings checked (slots, context, threads, an existing GGUF file): the model's path and GGUF header,
    or EngineError saying what to fix."""
    model = _validate(settings)
    try:
        meta = gguf_metadata(model)
    except (OSError, ValueError) as exc:
        raise EngineError(f"cannot read the GGUF header of {model}: {exc}; is the file complete?") from exc
    return model, meta


def launch_llamacpp(binary: str, model: Path, meta: dict[str, Any], settings: LlamaCppSettings) -> EngineHandle:
    """Start this ``llama-server`` binary on ``model`` (checked by `checked_model`, ``meta`` its GGUF header)
    and block until it completes a 1-token request; raise EngineError on failure.

    Nothing is left running if this raises (or is interrupted): the engine's process group is stopped.
    `tokometer.engines.embedded.start_llamacpp` finds the binary first; the smoke run passes its own.
    """
    tries = _AUTO_PORT_TRIES if settings.port == 0 else 1
    for attempt in range(tries):
        if settings.port == 0:
            port = free_port(settings.host)
        else:
            port = settings.port
            if port_in_use(settings.host, port):
                raise busy_port_error(settings.host, port)
        argv = llamacpp_argv(binary, model, port, settings, meta)
        try:
            process = EngineProcess(argv, "llama-server")
        except OSError as exc:
            raise EngineError(f"could not run {binary}: {exc}") from exc
        root_url = f"http://{connect_host(settings.host)}:{port}"
        try:
            model_name = wait_ready(root_url, process, settings.ready_timeout_s, model=model.stem)
            identity = llamacpp_identity(
                binary, model, model_name, ctx_size=settings.ctx_size or 4096 * settings.parallel,
                parallel=settings.parallel, threads=settings.threads or default_threads(), argv=argv,
                meta=meta, added_template=chat_template_args(meta, settings.extra_args))
        except EngineError as exc:
            process.stop_for(exc)
            bind_failed = any(marker in process.log_tail(40).lower() for marker in _BIND_FAILURE)
            if bind_failed and attempt + 1 < tries:
                continue  # another process took the free port between our probe and the engine's bind
            if bind_failed:
                raise busy_port_error(settings.host, port) from None
            raise
        except BaseException:
            process.stop()
            raise
        return EngineHandle(root_url, model_name, identity, process)
    raise AssertionError("unreachable")  # pragma: no cover
