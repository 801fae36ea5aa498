"""Waiting for a moment on the monotonic clock from inside an event loop."""

from __future__ import annotations

import asyncio
from time import perf_counter_ns

__all__ = ["PRECISE_SPIN_NS", "sleep_until"]

PRECISE_SPIN_NS = 1_500_000
"""The last stretch of a wait that a precise pacer (the simulator's ``--precise``) covers by yielding, not a timer."""


async def sleep_until(due_ns: int, spin_ns: int = 0) -> None:
    """Return once ``perf_counter_ns() >= due_ns``.

    Event-loop timers have millisecond resolution (uvloop may even fire a timer
    early), so this re-arms until the moment has really passed. With
    ``spin_ns``, the last stretch is covered by yielding to the loop instead of
    a timer: precise to a few microseconds, at the cost of CPU.
    """
    while True:
        remaining = due_ns - perf_counter_ns()
        if remaining <= 0:
            return
        if remaining <= spin_ns:
            await asyncio.sleep(0)
        else:
            await asyncio.sleep((remaining - spin_ns) / 1e9)
