"""Probes beside the load (``bench --probe-rate R``): short requests sent while a step runs, kept apart from it.

A probe asks for one output token of a short prompt, so its TTFT is how long a newcomer waits behind
the running load (queueing, then a prefill that competes with the load's decode): the number a chat
user feels. Probes go out at ``rate`` per second as a Poisson process (exponential gaps, seeded), on
this event loop through a client of their own, whatever runs the step (this loop, worker processes,
Ray, sessions); they start with the step and stop being sent when it ends (those in flight then
finish). Their records never enter the step's own records, store or metrics: the step summary gets
them as its ``probe`` block (`tokometer.metrics.probes`).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Awaitable, Callable
from time import perf_counter_ns

from tokometer.client.streamclient import StreamClient
from tokometer.load.runner import StepOutcome
from tokometer.load.share import WorkerSetup
from tokometer.prompt import Message, Prompt
from tokometer.records import RequestRecord
from tokometer.util.clock import sleep_until

__all__ = ["PROBE_PROMPT", "Prober", "probe_gaps_ns", "prober_for"]

_TEXT = "Reply with one word: ready?"
PROBE_PROMPT = Prompt((Message("user", _TEXT),), _TEXT, max_tokens=1, exact_length=True)
"""A short prompt answered with one token (the length is exact: it holds with ``--ignore-eos`` too)."""


def probe_gaps_ns(rate: float, seed: int) -> Callable[[], int]:
    """The gaps of a Poisson process at ``rate`` per second, in ns, one per call; the same seed, the same gaps."""
    rng = random.Random(f"probes:{seed}")
    return lambda: max(1, int(rng.expovariate(rate) * 1e9))


class Prober:
    """Sends probes at ``rate`` per second while a step runs; `beside` returns the step's outcome and the probes."""

    def __init__(self, rate: float, client: StreamClient) -> None:
        self.rate, self.client = rate, client

    async def beside(self, work: Awaitable[StepOutcome], step_index: int, seed: int,
                     ) -> tuple[StepOutcome, list[RequestRecord]]:
        """Run ``work`` (a step) with probes beside it; the probes still in flight when it ends are awaited."""
        done: list[RequestRecord] = []
        in_flight: set[asyncio.Task[None]] = set()
        sender = asyncio.create_task(self._send(step_index, seed, done, in_flight))
        interrupted = True
        try:
            outcome = await work
            interrupted = outcome.interrupted
        finally:
            sender.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sender
            for task in in_flight if interrupted else ():
                task.cancel()  # Ctrl-C: the probes in flight are cancelled as the step's own requests were
            if in_flight:
                await asyncio.gather(*in_flight, return_exceptions=True)
            await self.client.drain()  # every finished probe parsed and handed on
        done.sort(key=lambda r: r.index)
        return outcome, done

    async def _send(self, step_index: int, seed: int, done: list[RequestRecord],
                    in_flight: set[asyncio.Task[None]]) -> None:
        gap = probe_gaps_ns(self.rate, seed)
        due = perf_counter_ns() + gap()
        index = 0
        while True:
            await sleep_until(due, 0)
            record = RequestRecord(index=index, step=step_index, due_ns=due)
            task = asyncio.create_task(self._one(record, done))
            in_flight.add(task)
            task.add_done_callback(in_flight.discard)
            index += 1
            due += gap()

    async def _one(self, record: RequestRecord, done: list[RequestRecord]) -> None:
        await self.client.send(PROBE_PROMPT, record, on_done=done.append)

    async def close(self) -> None:
        await self.client.close()


def prober_for(rate: float | None, setup: WorkerSetup) -> Prober | None:
    """The probes ``--probe-rate`` asks for, with a client of their own to ``setup``'s target; None without."""
    if rate is None:
        return None
    from tokometer.protocols.registry import create_client

    return Prober(rate, StreamClient(setup.target, create_client(setup.api), setup.params, setup.timeouts))
