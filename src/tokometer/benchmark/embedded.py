"""What ``tokometer bench`` does differently for the embedded engine: lighter defaults, and a check that the
engine is still running, asked between requests so that a crashed engine ends the run with its last log lines."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tokometer.engines.handle import EngineHandle

__all__ = ["EMBEDDED_DEFAULTS", "ENDPOINT_DEFAULTS", "BenchDefaults", "bench_defaults", "engine_check"]


@dataclass(frozen=True)
class BenchDefaults:
    """A run's size when the options leave it open; ``concurrency``: the levels swept when no load is given."""

    requests: int
    input_tokens: int
    output_tokens: int
    concurrency: tuple[int, ...] = ()


ENDPOINT_DEFAULTS = BenchDefaults(requests=100, input_tokens=256, output_tokens=128)
EMBEDDED_DEFAULTS = BenchDefaults(requests=8, input_tokens=128, output_tokens=64, concurrency=(1, 2, 4))
"""A small CPU model on the machine that also runs the client: a short sweep."""


def bench_defaults(embedded: bool) -> BenchDefaults:
    return EMBEDDED_DEFAULTS if embedded else ENDPOINT_DEFAULTS


def engine_check(engine: EngineHandle) -> Callable[[], str | None]:
    """A check for `run_benchmark`: None while ``engine`` runs, else why the run cannot go on."""

    def check() -> str | None:
        if engine.alive():
            return None
        tail = " | ".join(engine.log_tail(5).splitlines())
        return f"the engine exited during the run (exit code {engine.exit_code()}); its last log lines: {tail}"

    return check
