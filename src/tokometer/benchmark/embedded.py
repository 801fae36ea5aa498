"""What ``tokometer bench`` does differently for the embedded engine: lighter defaults (a profile of the spec),
its start timed (`start_embedded`: cold and warm, saved with the run in the engine's identity), and a check that
the engine is still running, asked between requests so that a crashed engine ends the run with its last log
lines."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tokometer.engines.handle import EngineHandle
    from tokometer.engines.llamacpp import LlamaCppSettings

__all__ = ["EMBEDDED_PROFILE", "engine_check", "start_embedded"]

EMBEDDED_PROFILE: Mapping[str, Any] = MappingProxyType({
    "requests": 8, "input_tokens": 128, "output_tokens": 64, "concurrency": (1, 2, 4)})
"""`BenchSpec` defaults for a small CPU model on the machine that also runs the client: a short sweep
(`tokometer.benchmark.spec.apply_profile` applies them; every other field keeps its own default)."""


def engine_check(engine: EngineHandle) -> Callable[[], str | None]:
    """A check for `run_benchmark`: None while ``engine`` runs, else why the run cannot go on."""

    def check() -> str | None:
        if engine.alive():
            return None
        tail = " | ".join(engine.log_tail(5).splitlines())
        return f"the engine exited during the run (exit code {engine.exit_code()}); its last log lines: {tail}"

    return check


def start_embedded(settings: LlamaCppSettings, say: Callable[[str], None] | None = None) -> EngineHandle:
    """The embedded llama.cpp engine, up and answering, its start-up timed (`tokometer.engines.startup`: cold, then
    warm, a second start, as for ``serve``) and written into its identity, which the run saves."""
    from tokometer.engines import start_llamacpp
    from tokometer.engines.startup import timed_start

    handle, startup = timed_start(lambda: start_llamacpp(settings), "llamacpp", progress=say)
    if startup is not None and say is not None:
        say(f"the embedded engine {startup.describe()}")
    return handle
