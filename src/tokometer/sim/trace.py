"""The simulator's own record of what it sent and when: the truth tests compare against.

Stamps are `time.perf_counter_ns()` in the server process; on Linux that is
CLOCK_MONOTONIC, the same clock the benchmark client stamps with.

The simulator is the timing reference, so reading its trace must never stall
the streams it is serving: `json_slices` writes a trace of any size out a slice
at a time, handing the event loop back between slices, and `TraceLog.select`
pages it (``since`` a request number, at most ``limit`` entries).
"""

from __future__ import annotations

import asyncio
import bisect
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import asdict, dataclass, field
from typing import Any

import orjson

__all__ = ["SendTrace", "TraceLog", "json_slices"]

_SLICE_COST = 10_000
"""Work per slice, in stamps (a body counts one per 64 characters): ~1 ms of serialising."""


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
    admitted_ns: int = 0
    """Modelled engine: when its scheduler first admitted the request into the batch (the queue wait ends);
    0 in scripted timing, which has no queue."""
    disconnected: bool = False
    disconnected_ns: int = 0
    """When the client's disconnect reached the server (0: it did not go away), even while a stream waits."""
    body: str = ""
    """The request body (first 64 KiB), with --trace-bodies."""
    body_digest: str = ""
    """Short hash of the request body: tells whether two requests sent the same prompt."""
    adapter: str | None = None
    """The LoRA adapter it asked for (``sim --lora``); None: the base model."""
    adapter_loaded: bool = False
    """Scripted timing: its adapter was not loaded, so its first token came ``switch_ms`` later
    (`tokometer.sim.adapters`)."""

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

    def select(self, *, last: int | None = None, since: int | None = None, limit: int | None = None,
               ) -> list[SendTrace]:
        """The last ``last`` traces, or those from request number ``since`` on; at most ``limit`` of them."""
        items = self.last(last)
        if since is not None:
            items = items[bisect.bisect_left(items, since, key=lambda t: t.seq):]  # seq grows with arrival
        return items if limit is None else items[:limit]


def _cost(trace: SendTrace) -> int:
    return 1 + len(trace.event_ns) + len(trace.body) // 64


async def json_slices(traces: list[SendTrace]) -> AsyncIterator[bytes]:
    """``traces`` as one JSON array, serialised a slice at a time, yielding to the event loop in between."""
    yield b"["
    start = 0
    while start < len(traces):
        end, cost = start, 0
        while end < len(traces) and cost < _SLICE_COST:
            cost += _cost(traces[end])
            end += 1
        items = orjson.dumps(traces[start:end])[1:-1]  # a dataclass serialises as its asdict() would
        yield items if start == 0 else b"," + items
        start = end
        await asyncio.sleep(0)
    yield b"]"
