"""``EngineHandle``: a started, ready engine, as callers see it (URL, model name, identity, stop).

Returned by every launcher (``start_llamacpp``, ``start_vllm``, ``start_ollama``). It is a context
manager: leaving the ``with`` block stops what the launcher started, and nothing else (an Ollama
daemon that was already running is left alone).
"""

from __future__ import annotations

import time
from types import TracebackType
from typing import Any

from tokometer.engines.process import EngineProcess
from tokometer.engines.ready import log_excerpt
from tokometer.engines.signals import died_error

__all__ = ["EngineHandle"]


class EngineHandle:
    """A ready engine: where to send requests, what to call the model, and how to stop it."""

    def __init__(self, root_url: str, model: str, identity: dict[str, Any], process: EngineProcess | None) -> None:
        self.root_url = root_url.rstrip("/")
        self.openai_url = self.root_url + "/v1"
        self.model = model
        self.identity = identity
        self.process = process

    def __repr__(self) -> str:
        state = "alive" if self.alive() else f"exited {self.exit_code()}"
        return f"<EngineHandle {self.identity.get('engine', '?')} {self.root_url} model={self.model!r} {state}>"

    def alive(self) -> bool:
        """True while the engine process we started is running (always True for one we did not start)."""
        return self.process.alive() if self.process is not None else True

    @property
    def startup_s(self) -> float | None:
        """Seconds from the engine's process start to its first answer (None for an engine we did not start)."""
        return self.process.startup_s() if self.process is not None else None

    def exit_code(self) -> int | None:
        """The engine's exit status once it has exited (negative: the signal that killed it), else None."""
        return self.process.exit_code() if self.process is not None else None

    def log_tail(self, lines: int = 20) -> str:
        """The last lines of the engine's own log ("" for an engine we did not start)."""
        return self.process.log_tail(lines) if self.process is not None else ""

    def check(self, when: str = "while in use") -> None:
        """Raise EngineDied (an EngineError) if the engine has died (call it when requests start failing)."""
        process = self.process
        if process is not None and not process.alive():
            raise died_error(process.name, process.exit_code(), when, log_excerpt(process), process.argv[0])

    def wait(self, poll_s: float = 0.5) -> int | None:
        """Block until the engine exits (Ctrl-C raises KeyboardInterrupt to the caller); return its status."""
        while self.process is None or self.process.alive():
            time.sleep(poll_s)
        return self.exit_code()

    def stop(self) -> None:
        """Stop what we started, with its whole process group; idempotent."""
        if self.process is not None:
            self.process.stop()

    def __enter__(self) -> EngineHandle:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
