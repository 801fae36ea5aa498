"""Hedged requests: when the primary's first token is late, race the same request on a second upstream.

- **Deadline** (route option ``hedge_after``): a fixed time (``"300ms"``, ``"1.5s"``) or a percentile
  (``"p50"`` to ``"p99"``) of the primary's recent upstream TTFTs, the window ``slow_ttft_ms`` reads
  (``slow_window`` requests). A percentile needs `MIN_SAMPLES` recent TTFTs: before that no hedge
  is sent. A percentile deadline is never shorter than ``hedge_min_ms`` (an upstream answering in
  5 ms should not be hedged at 6 ms for a jitter of 1 ms).
- **Budget** (``hedge_budget``): a hedge is sent only while fewer races are running on the route than
  ``hedge_budget`` times the requests in flight to the route's upstreams (at least one race at a
  time), so hedging adds at most that share of load when everything is slow, which is when
  hedging everything would double it. A hedge that was due and refused is counted
  (``outcome="over_budget"``).
- **Race** (`race`): the primary's attempt runs; at the deadline the hedge starts; the first of the
  two to produce a content event wins and the other is cancelled (its connection closed, which the
  upstream sees as a disconnect). A leg that fails does not end the race while the other still runs.

This module is a leaf: the policy and the race, generic over what an attempt returns; the router
(`tokometer.gateway.router`) supplies the attempts.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import re
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

__all__ = ["MIN_SAMPLES", "HedgeAfter", "Race", "percentile", "race"]

MIN_SAMPLES = 5
"""Recent TTFTs a percentile deadline needs (fewer: no hedge)."""

T = TypeVar("T")

_SPEC = re.compile(r"^(?:p(?P<p>\d{2})|(?P<n>\d+(?:\.\d+)?)\s*(?P<unit>ms|s))$")


@dataclass(frozen=True, slots=True)
class HedgeAfter:
    """When to hedge: a percentile of recent TTFTs, or a fixed time."""

    percentile: int | None = None
    fixed_ms: float | None = None

    @classmethod
    def parse(cls, text: str) -> HedgeAfter:
        """``"p95"`` or ``"300ms"``/``"1.5s"``; ValueError (one line) for anything else."""
        match = _SPEC.match(text.strip().lower())
        if match is None:
            raise ValueError(f"{text!r} is neither a percentile (p50 to p99) nor a time (e.g. 300ms, 1.5s)")
        if match["p"] is not None:
            p = int(match["p"])
            if not 50 <= p <= 99:
                raise ValueError(f"{text!r}: the percentile must be between p50 and p99")
            return cls(percentile=p)
        ms = float(match["n"]) * (1000.0 if match["unit"] == "s" else 1.0)
        if ms <= 0:
            raise ValueError(f"{text!r}: the time must be more than 0")
        return cls(fixed_ms=ms)

    def deadline_ms(self, recent_ttft_ms: Sequence[float], floor_ms: float) -> float | None:
        """The primary's deadline for its first token, or None (no hedge: too few samples yet)."""
        if self.fixed_ms is not None:
            return self.fixed_ms
        assert self.percentile is not None
        if len(recent_ttft_ms) < MIN_SAMPLES:
            return None
        return max(floor_ms, percentile(recent_ttft_ms, self.percentile))


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile (``p`` in 0-100) of a non-empty sequence."""
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


@dataclass(slots=True)
class Race(Generic[T]):
    """How a (possibly hedged) first attempt ended."""

    winner: T | None = None
    by: Literal["primary", "hedge"] | None = None
    """Which leg won (None: both failed, or no hedge was sent and the primary failed)."""
    hedged: bool = False
    """A hedge was started."""
    primary_error: BaseException | None = None
    hedge_error: BaseException | None = None
    primary_lost_after_s: float | None = None
    """The primary lost the race: how long it had run when it was cancelled (its TTFT is at least this)."""


async def race(primary: Coroutine[Any, Any, T], deadline_s: float | None,
               start_hedge: Callable[[], Coroutine[Any, Any, T] | None],
               discard: Callable[[T], Awaitable[None]]) -> Race[T]:
    """Run ``primary``; if it has not finished ``deadline_s`` after it started, ``start_hedge()`` (None: no
    hedge now) and take whichever finishes first with a value. The other leg is cancelled, or if it too
    finished with a value, handed to ``discard``. Errors are returned, not raised; cancelling the race
    cancels both legs."""
    started = time.monotonic()
    a: asyncio.Task[T] = asyncio.ensure_future(primary)
    b: asyncio.Task[T] | None = None
    result: Race[T] = Race()
    handled: set[asyncio.Task[T]] = set()
    returned = False
    try:
        if deadline_s is not None:
            await asyncio.wait({a}, timeout=deadline_s)
        if not a.done():
            leg = start_hedge() if deadline_s is not None else None
            if leg is not None:
                b = asyncio.ensure_future(leg)
                result.hedged = True
        pending: set[asyncio.Task[T]] = {a} if b is None else {a, b}
        while pending and result.by is None:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in (a, b):  # the primary first when both finished in the same step
                if task is None or task not in done:
                    continue
                handled.add(task)
                error = task.exception()
                if error is not None:
                    if task is a:
                        result.primary_error = error
                    else:
                        result.hedge_error = error
                elif result.by is None:
                    result.winner, result.by = task.result(), "primary" if task is a else "hedge"
                else:
                    await discard(task.result())
        if result.by == "hedge" and not a.done():
            result.primary_lost_after_s = time.monotonic() - started
        returned = True
        return result
    finally:
        for task in (a, b):
            if task is None:
                continue
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            elif not task.cancelled() and task.exception() is None and (task not in handled or not returned):
                await discard(task.result())  # finished with a value nobody will use (the race was cancelled)
