"""This client's own stalls while it reads a stream: when its event loop could not run.

The streaming check stamps each event when the client reads it. On a host whose CPUs are saturated (a server on
the same machine, other work beside it) the client's process can go unscheduled for hundreds of milliseconds;
the server's events meanwhile wait in the socket and are read together when the client runs again, so they
look like a proxy's burst (gaps near zero after a long one) though nothing between the two held them back.

`StallWatch` runs a timer every `TICK_S` beside the read and keeps each stretch the timer fired more than
`STALL_NS` late: ``(from_ns, to_ns)``, the time the loop could not run (`perf_counter_ns`, the stamps' clock).
`held_by_client` says whether a burst was read right at the end of such a stretch (within `READ_SLACK_NS`) and the
stretch covered most of the silence before the burst.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from time import perf_counter_ns
from typing import Final

__all__ = ["READ_SLACK_NS", "STALL_NS", "TICK_S", "StallWatch", "held_by_client"]

TICK_S: Final = 0.005
STALL_NS: Final = 20_000_000
"""A timer this late (20 ms, four ticks) is a stall of the client, not the OS's scheduling noise."""
READ_SLACK_NS: Final = 10_000_000
"""An arrival read this soon after a stall ended (10 ms) was waiting in the socket during it."""
_MAX_STALLS: Final = 10_000


class StallWatch:
    """Records the client's stalls while running (``async with``)."""

    def __init__(self) -> None:
        self.stalls: list[tuple[int, int]] = []
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        tick_ns = int(TICK_S * 1e9)
        while len(self.stalls) < _MAX_STALLS:
            due = perf_counter_ns() + tick_ns
            await asyncio.sleep(TICK_S)
            now = perf_counter_ns()
            if now - due > STALL_NS:
                self.stalls.append((due, now))

    async def __aenter__(self) -> StallWatch:
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    @property
    def longest_ms(self) -> float:
        """The longest stall, in ms (0: none)."""
        return max((b - a for a, b in self.stalls), default=0) / 1e6


def held_by_client(arrival_ns: int, silent_from_ns: int, stalls: Sequence[tuple[int, int]]) -> bool:
    """Whether a burst read at ``arrival_ns``, after nothing came since ``silent_from_ns``, was held back by the
    client itself: read as it came back from one of ``stalls``, and stalled for at least half of that silence. A
    short stall that happens to end just before a proxy's block (or a whole buffered answer) arrives does not
    make the block the client's doing: the block was held somewhere else for the rest of the silence."""
    silence = max(1, arrival_ns - silent_from_ns)
    return any(start <= arrival_ns <= end + READ_SLACK_NS
               and min(end, arrival_ns) - max(start, silent_from_ns) >= silence / 2 for start, end in stalls)
