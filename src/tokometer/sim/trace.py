"""The simulator's own record of what it sent and when: the truth tests compare against.

Stamps are `time.perf_counter_ns()` in the server process; on Linux that is
CLOCK_MONOTONIC, the same clock the benchmark client stamps with.
"""

from __future__ import annotations

from collections import deque
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["SendTrace", "TraceLog"]


@dataclass(slots=True)
class SendTrace:
    """One request as the simulator served it."""

    seq: int
    path: str
    fault: str
    received_ns: int
    status: int = 200
    headers_ns: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish: str = ""
    event_ns: list[int] = field(default_factory=list)
    """Send time of each content-carrying event."""
    event_tokens: list[int] = field(default_factory=list)
    end_ns: int = 0
    disconnected: bool = False
    body: str = ""
    """The request body (first 64 KiB), with --trace-bodies."""
    body_digest: str = ""
    """Short hash of the request body: tells whether two requests sent the same prompt."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class TraceLog:
    """The last ``size`` traces, in arrival order."""

    def __init__(self, size: int) -> None:
        self._traces: deque[SendTrace] = deque(maxlen=size or None)
        self._enabled = size > 0

    def add(self, trace: SendTrace) -> None:
        if self._enabled:
            self._traces.append(trace)

    def clear(self) -> None:
        self._traces.clear()

    def last(self, n: int | None = None) -> list[SendTrace]:
        items = list(self._traces)
        return items if n is None else items[-n:]
