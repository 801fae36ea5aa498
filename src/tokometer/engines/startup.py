"""Start-up time: how long an engine takes from its process start to its first answer, cold and warm.

The one home of this measurement, used by ``tokometer serve``, by ``tokometer bench``'s embedded engine and by
``tokometer tune``'s variants. The clock starts just before the engine's process is forked
(`tokometer.engines.process.EngineProcess.started_ns`) and stops when the engine has answered its first
1-token completion (`tokometer.engines.ready.wait_ready` stamps it): what a launcher prepares before the
fork (finding the binary, reading the model's header, planning vLLM's flags) is not in it, nor what it does
after the answer (hashing the model file for the identity).

**Cold** is the first start this command makes: as cold as the host's caches are at that moment. tokometer does
not drop the OS page cache (that needs root), so a model file read by an earlier run may still be in memory.
**Warm** is a second start right after the first was stopped, where a cache makes it faster; what that cache
is depends on the engine (`WARM_MEANS`). A warm start is timed by default where it is cheap (llama.cpp,
about a second: `SECOND_START_BY_DEFAULT`); vLLM's takes minutes, so it is asked for.

`EngineStartup` is what is saved with a run: ``identity["startup"]`` of the engine's identity
(`tokometer.engines.identity`), so it travels wherever the identity goes (the store's ``engine`` column,
``bench --json``, ``runs --id``, the identity ``tokometer serve`` publishes for a later ``bench --url``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from tokometer.engines.handle import EngineHandle

__all__ = ["MEASURED", "SECOND_START_BY_DEFAULT", "STARTUP_KEY", "WARM_MEANS", "EngineStartup", "startup_of",
           "timed_start"]

MEASURED: Final = "from the engine's process start to its first 1-token answer"
"""What tokometer's start-up times measure."""
STARTUP_KEY: Final = "startup"
"""The key of an engine identity that holds its `EngineStartup`."""
WARM_MEANS: Final = {
    "llamacpp": "a second start straight after the first: the model file and llama-server in the OS page cache",
    "vllm": "a second start straight after the first: the weights in the OS page cache and vLLM's torch.compile "
            "and CUDA-graph caches (~/.cache/vllm) filled by the first",
    "ollama": "a second start of the Ollama daemon: the model's blobs in the OS page cache",
}
"""Per engine (the names ``serve --engine`` takes), what the warm start has that the cold one may not."""
SECOND_START_BY_DEFAULT: Final = {"llamacpp": True, "vllm": False, "ollama": False}
"""Whether a warm start is timed unless asked: llama.cpp restarts in about a second, vLLM takes minutes, and
an Ollama daemon that was already running is not ours to restart."""


@dataclass(frozen=True)
class EngineStartup:
    """One engine's start-up times: from its process start to its first answer, in seconds."""

    engine: str
    """``llamacpp``, ``vllm`` or ``ollama``."""
    cold_s: float
    """The first start (as cold as the host's caches are: the page cache is not dropped)."""
    warm_s: float | None = None
    """A second start straight after the first (`WARM_MEANS`); None when not timed."""
    measured: str = MEASURED
    """What the times are from and to (another tool's, for an imported run)."""

    @property
    def warm_means(self) -> str:
        return WARM_MEANS.get(self.engine, "a second start straight after the first")

    def to_json(self) -> dict[str, Any]:
        return {"engine": self.engine, "cold_s": self.cold_s, "warm_s": self.warm_s, "warm_means": self.warm_means,
                "measured": self.measured}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> EngineStartup | None:
        """The start-up ``to_json`` wrote; None for anything else (a value that is not a time is not one)."""
        cold, warm = _seconds(data.get("cold_s")), _seconds(data.get("warm_s"))
        if cold is None or (warm is None and data.get("warm_s") is not None):
            return None
        measured = data.get("measured")
        return cls(engine=str(data.get("engine") or "unknown")[:100], cold_s=cold, warm_s=warm,
                   measured=measured[:300] if isinstance(measured, str) and measured else MEASURED)

    def describe(self) -> str:
        """One line for a console: ``started in 1.23 s (cold), 0.98 s warm``."""
        warm = f", {self.warm_s:.2f} s warm (a second start)" if self.warm_s is not None else ""
        what = "process start to first answer" if self.measured == MEASURED else self.measured
        return f"started in {self.cold_s:.2f} s (cold: {what}){warm}"


_MOST_SECONDS: Final = 1e7
"""The longest start-up read back (about four months): a larger number is not a start-up time."""


def _seconds(value: Any) -> float | None:
    """``value`` as a start-up time in seconds, or None when it is not one."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < _MOST_SECONDS:
        return float(value)
    return None


def startup_of(identity: Mapping[str, Any] | None) -> EngineStartup | None:
    """The start-up saved in an engine identity (``identity["startup"]``), if it holds one."""
    saved = identity.get(STARTUP_KEY) if identity is not None else None
    return EngineStartup.from_json(saved) if isinstance(saved, Mapping) else None


def timed_start(start: Callable[[], EngineHandle], engine: str, warm: bool | None = None,
                progress: Callable[[str], None] | None = None) -> tuple[EngineHandle, EngineStartup | None]:
    """Start an engine with ``start`` and time it; with ``warm`` (None: `SECOND_START_BY_DEFAULT`), stop it and
    start it again, and hand back that second engine. The start-up is also written into the handle's identity
    (``identity["startup"]``), so it is saved with every run of it. None for an engine tokometer did not start
    (an Ollama daemon that was already running): it has no start-up to time, and is not restarted.
    ``progress`` is told what happens between the two starts.

    Whatever ``start`` raises is raised, with nothing left running."""
    handle = start()
    cold = handle.startup_s
    if cold is None:
        return handle, None
    warm_s = None
    if warm if warm is not None else SECOND_START_BY_DEFAULT.get(engine, False):
        if progress is not None:
            progress(f"up in {cold:.2f} s; stopping it to time a second (warm) start …")
        handle.stop()
        handle = start()
        warm_s = handle.startup_s
    startup = EngineStartup(engine, cold, warm_s)
    handle.identity[STARTUP_KEY] = startup.to_json()
    return handle, startup
