"""Run one load step in this process: issue requests by the profile, collect records.

Every finished record goes to ``on_record`` at once (the results store writes
it), so an interrupted step loses nothing that finished. On cancellation
(Ctrl-C) the requests still in flight are cancelled, recorded as ``cancelled``
and handed on too; the step then returns what it has, marked interrupted.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from dataclasses import dataclass
from time import perf_counter_ns
from typing import Any, Generic, TypeVar

from tokometer.client.streamclient import StreamClient
from tokometer.load.profiles import LoadStep, schedule_offsets
from tokometer.load.selfcheck import ClientHealth, LoopMonitor
from tokometer.prompt import Prompt
from tokometer.records import RequestRecord
from tokometer.util.clock import sleep_until

__all__ = ["DISPATCH_SPIN_NS", "START_LEAD_NS", "Issuer", "StepLimits", "StepOutcome", "dispatch", "guarded",
           "run_step", "step_offsets"]

T = TypeVar("T")

_Send = Callable[[int, Prompt, int], Awaitable[None]]

START_LEAD_NS = 20_000_000
"""Rate steps start this long after they are planned, so the first due time is not already late."""

DISPATCH_SPIN_NS = 1_000_000
"""Event-loop timers fire up to ~1 ms off; the dispatcher yields to the loop for the last
millisecond before each due time instead (measured: client lag p99 ~15 us instead of ~0.9 ms)."""


@dataclass(frozen=True, slots=True)
class StepLimits:
    """When a step ends: after ``requests`` measured requests, or ``duration_s``, whichever first.

    ``warmup`` requests are sent first under the same load and left out of
    every result.
    """

    requests: int | None = 100
    duration_s: float | None = None
    warmup: int = 0

    @property
    def total(self) -> int | None:
        return None if self.requests is None else self.requests + self.warmup


@dataclass(slots=True)
class StepOutcome:
    """What a step produced: its records (warm-up included, flagged) and the client's health."""

    records: list[RequestRecord]
    health: ClientHealth
    interrupted: bool = False
    failure: str | None = None
    """Why the step could not go on (a Ray actor died, `tokometer.load.cluster`); the run then stops as failed."""


class Issuer(Generic[T]):
    """Hands out (index, item) pairs (prompts, or sessions) until the step's limits are reached."""

    def __init__(self, prompts: Iterator[T], limits: StepLimits) -> None:
        self._prompts = prompts
        self._limits = limits
        self._next = 0
        self._deadline_ns: int | None = None

    def start(self, now_ns: int) -> None:
        if self._limits.duration_s is not None:
            self._deadline_ns = now_ns + int(self._limits.duration_s * 1e9)

    def expired(self, now_ns: int) -> bool:
        """The step's ``duration`` has passed."""
        return self._deadline_ns is not None and now_ns >= self._deadline_ns

    def take(self, now_ns: int) -> tuple[int, T] | None:
        total = self._limits.total
        if total is not None and self._next >= total:
            return None
        if self._deadline_ns is not None and now_ns >= self._deadline_ns and self._next >= self._limits.warmup:
            return None
        try:
            prompt = next(self._prompts)
        except StopIteration:
            return None
        index = self._next
        self._next += 1
        return index, prompt


async def run_step(
    step: LoadStep,
    step_index: int,
    limits: StepLimits,
    prompts: Iterator[Prompt],
    client: StreamClient,
    on_record: Callable[[RequestRecord], None],
    seed: int = 0,
    start_ns: int | None = None,
) -> StepOutcome:
    """Run one step; returns when every issued request has finished (or on cancellation).

    ``start_ns`` fixes when a rate step's schedule starts (worker processes of one
    step share it); by default it starts a moment from now.
    """
    records: list[RequestRecord] = []
    issuer = Issuer(prompts, limits)
    in_flight: set[asyncio.Task[None]] = set()
    monitor = LoopMonitor()

    def done(record: RequestRecord) -> None:
        records.append(record)
        on_record(record)

    async def one(index: int, prompt: Prompt, due_ns: int) -> None:
        record = RequestRecord(index=index, step=step_index, warmup=index < limits.warmup, due_ns=due_ns)
        if prompt.input_tokens is not None:
            record.input_tokens, record.input_tokens_source = prompt.input_tokens, "prompt_spec"
        record.prefix_group, record.prefix_first = prompt.prefix_group, prompt.prefix_first
        record.images = len(prompt.images) or None
        await client.send(prompt, record, on_done=done)

    loop = (_open_loop(step, limits, issuer, one, in_flight, seed, start_ns) if step.open_loop
            else _closed_loop(step.concurrency if step.mode == "concurrency" else 1, issuer, one,
                              step.ramp.slot_opens(step.concurrency) if step.ramp is not None else None))
    interrupted = await guarded(loop, in_flight, client, monitor)
    health = monitor.health(step, records)
    records.sort(key=lambda r: r.index)
    return StepOutcome(records, health, interrupted)


async def guarded(loop: Coroutine[Any, Any, None], tasks: set[asyncio.Task[None]], client: StreamClient,
                  monitor: LoopMonitor) -> bool:
    """Run a step's ``loop`` with the event-loop monitor on. On cancellation (Ctrl-C) the ``tasks`` still in flight
    are cancelled and awaited (each records itself as cancelled); the client is drained either way. True when
    the step was interrupted."""
    interrupted = False
    monitor.start()
    try:
        await loop
    except asyncio.CancelledError:
        interrupted = True
        current = asyncio.current_task()
        if current is not None:
            current.uncancel()
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
    finally:
        await client.drain()
        monitor.stop()
    return interrupted


async def _closed_loop(
    concurrency: int, issuer: Issuer[Prompt], one: _Send, opens_s: list[float] | None = None
) -> None:
    """``concurrency`` slots, each sending its next request as its last one ends; with ``opens_s`` (a ramp,
    `tokometer.load.ramp.Ramp.slot_opens`) slot k starts that many seconds after the step's start."""
    start = perf_counter_ns()
    issuer.start(start)

    async def worker(opens: float) -> None:
        if opens > 0:
            await sleep_until(start + int(opens * 1e9), DISPATCH_SPIN_NS)
        while True:
            due = perf_counter_ns()
            item = issuer.take(due)
            if item is None:
                return
            await one(item[0], item[1], due)

    workers = [asyncio.create_task(worker(opens_s[k] if opens_s else 0.0)) for k in range(concurrency)]
    try:
        await asyncio.gather(*workers)
    except asyncio.CancelledError:
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        raise


def step_offsets(step: LoadStep, limits: StepLimits, seed: int) -> list[int]:
    """When each request (or session) of an open-loop step is due, in ns from the step's start: the trace's own
    times, or a schedule at the step's rate for ``limits.total`` requests (rate x duration without a count)."""
    if step.mode == "trace":
        return list(step.offsets if limits.total is None else step.offsets[:limits.total])
    assert step.rate is not None
    ramp = step.ramp
    if limits.total is not None:
        n = limits.total
    else:
        assert limits.duration_s is not None
        expected = ramp.expected(limits.duration_s) if ramp is not None else step.rate * limits.duration_s
        n = limits.warmup + max(1, int(expected))
    if ramp is None:
        return schedule_offsets(n, step.rate, step.arrival, step.burstiness, seed)
    # A unit-rate schedule of the step's arrival kind, its points mapped through the ramp's Λ⁻¹.
    return [int(ramp.due_at(u / 1e9) * 1e9) for u in schedule_offsets(n, 1.0, step.arrival, step.burstiness, seed)]


async def _open_loop(
    step: LoadStep,
    limits: StepLimits,
    issuer: Issuer[Prompt],
    one: _Send,
    in_flight: set[asyncio.Task[None]],
    seed: int,
    start_ns: int | None,
) -> None:
    offsets = step_offsets(step, limits, seed)
    start = start_ns if start_ns is not None else perf_counter_ns() + START_LEAD_NS
    if limits.requests is not None or step.mode == "trace":
        issuer.start(start)  # a count and a duration: whichever comes first
    # With only --duration, the schedule itself holds rate x duration requests.
    await dispatch(offsets, start, issuer, one, in_flight, step.max_concurrency)


async def dispatch(offsets: list[int], start: int, issuer: Issuer[T], run: Callable[[int, T, int], Awaitable[None]],
                   tasks: set[asyncio.Task[None]], max_concurrency: int | None) -> None:
    """The open loop's dispatcher: at ``start + offset`` for each offset, take the next item and ``run`` it
    as a task of its own (at most ``max_concurrency`` running), then wait for all of them."""
    gate = asyncio.Semaphore(max_concurrency) if max_concurrency else None

    async def gated(index: int, item: T, due: int) -> None:
        if gate is None:
            await run(index, item, due)
            return
        async with gate:
            await run(index, item, due)

    for offset in offsets:
        due = start + offset
        await sleep_until(due, DISPATCH_SPIN_NS)
        taken = issuer.take(due)
        if taken is None:
            break
        task = asyncio.create_task(gated(taken[0], taken[1], due))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    if tasks:
        await asyncio.gather(*tasks)
