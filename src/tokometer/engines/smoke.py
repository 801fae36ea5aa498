"""The smoke run: does a ``llama-server`` binary really work on this machine?

A build that compiles can still die at its first matrix multiply (SIGILL when ``-march=native``
used instructions the machine advertises but refuses, e.g. AMX in a VM). The smoke run starts the
binary the normal way (``launch_llamacpp``: one slot, a small context, a free loopback port) with
the bundled model, which already completes a 1-token request when ready, then asks for a few more
tokens, and stops it. It takes a few seconds. The result says whether it worked and, if the engine
died by a signal, which one: the build falls back to safer flags on that.
"""

from __future__ import annotations

import signal
import time
from dataclasses import dataclass
from pathlib import Path

from tokometer.bundled import bundled_model_path
from tokometer.engines.llamacpp import LlamaCppSettings, checked_model, launch_llamacpp
from tokometer.engines.ready import http_json
from tokometer.engines.serverbinary import checked_binary
from tokometer.engines.signals import EngineDied
from tokometer.util.errors import EngineError
from tokometer.util.shown import clipped

__all__ = ["SMOKE_TOKENS", "SmokeResult", "smoke_run"]

SMOKE_TOKENS = 4
_SENT_FROM_OUTSIDE = frozenset({signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGHUP})


@dataclass(frozen=True)
class SmokeResult:
    """``ok``: it generated tokens; ``skipped``: it could not be tried (no bundled model); ``signal``: the
    signal number that killed the engine, if one did; ``detail``: what happened, in one line."""

    ok: bool
    detail: str
    signal: int | None = None
    seconds: float = 0.0
    skipped: bool = False

    @property
    def died_by_signal(self) -> bool:
        """Killed by a signal of its own making (SIGILL, SIGSEGV, SIGBUS, SIGABRT, SIGFPE …), the kind safer
        compile flags may cure; not one sent from outside (SIGKILL, perhaps the OOM killer; SIGTERM; SIGINT)."""
        return self.signal is not None and self.signal not in _SENT_FROM_OUTSIDE


def smoke_run(binary: Path, model: Path | None = None, timeout_s: float = 120.0) -> SmokeResult:
    """Start ``binary`` with ``model`` (default: the bundled Gemma), generate a few tokens, stop it."""
    started = time.monotonic()
    try:
        model_path = model if model is not None else bundled_model_path()
    except EngineError as exc:
        return SmokeResult(False, f"not run: {exc}", skipped=True)
    settings = LlamaCppSettings(model_path=model_path, binary=str(binary), parallel=1, ctx_size=512,
                                ready_timeout_s=timeout_s)
    try:
        model_file, meta = checked_model(settings)
        with launch_llamacpp(checked_binary(str(binary)), model_file, meta, settings) as engine:
            body = {"model": engine.model, "prompt": "The capital of France is", "max_tokens": SMOKE_TOKENS,
                    "temperature": 0}
            try:
                status, payload = http_json(engine.openai_url + "/completions", body, timeout=timeout_s)
            except OSError as exc:
                deadline = time.monotonic() + 2.0  # a dying engine drops the connection a moment before it exits
                while engine.alive() and time.monotonic() < deadline:
                    time.sleep(0.05)
                engine.check("on the smoke run's request")
                return SmokeResult(False, f"the smoke run's request failed: {exc}",
                                   seconds=time.monotonic() - started)
            engine.check("on the smoke run's request")
    except EngineDied as exc:
        return SmokeResult(False, str(exc), signal=int(exc.signal) if exc.signal else None,
                           seconds=time.monotonic() - started)
    except EngineError as exc:
        return SmokeResult(False, str(exc), seconds=time.monotonic() - started)
    seconds = time.monotonic() - started
    choices = payload.get("choices") if isinstance(payload, dict) else None
    if status != 200 or not choices:
        return SmokeResult(False, f"the smoke run's request got HTTP {status}: {clipped(str(payload))}",
                           seconds=seconds)
    usage = payload.get("usage") if isinstance(payload, dict) else None
    tokens = usage.get("completion_tokens") if isinstance(usage, dict) else None
    return SmokeResult(True, f"generated {tokens if tokens is not None else 'some'} tokens in {seconds:.1f} s",
                       seconds=seconds)
