"""Probes beside the load (``bench --probe-rate R``): short requests sent while a step runs, kept apart from it.

A probe asks for one output token of a short prompt, so its TTFT is how long a newcomer waits behind
the running load (queueing, then a prefill that competes with the load's decode): the number a chat
user feels. Probes go out at ``rate`` per second as a Poisson process (exponential gaps, seeded), on
this event loop through a client of their own, whatever runs the step (this loop, worker processes,
Ray, sessions); they start with the step and stop being sent when it ends (those in flight then
finish). Their records never enter the step's own records, store or metrics: the step summary gets
them as its ``probe`` block (`tokometer.metrics.probes`).

Probes are an open loop with no count, so both of their buffers have a size: at most
`MAX_PROBES_IN_FLIGHT` wait for an answer at once and a step keeps at most `MAX_PROBES_PER_STEP`
records; a probe due beyond either is not sent and is counted as skipped (the block says how many).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from time import perf_counter_ns

from tokometer.client.streamclient import StreamClient
from tokometer.load.runner import StepOutcome
from tokometer.load.share import WorkerSetup
from tokometer.prompt import Message, Prompt
from tokometer.protocols.registry import create_client
from tokometer.records import RequestRecord
from tokometer.util.clock import sleep_until

__all__ = ["MAX_PROBES_IN_FLIGHT", "MAX_PROBES_PER_STEP", "PROBE_PROMPT", "Prober", "Probes", "probe_gaps_ns",
           "prober_for"]

_TEXT = "Reply with one word: ready?"
PROBE_PROMPT = Prompt((Message("user", _TEXT),), _TEXT, max_tokens=1, exact_length=True)
"""A short prompt answered with one token (the length is exact: it holds with ``--ignore-eos`` too)."""


MAX_PROBES_IN_FLIGHT = 1000
"""Probes waiting for an answer at once, at most: beyond it a due probe is skipped (a server that answers
none of them must not make the client hold unbounded requests)."""
MAX_PROBES_PER_STEP = 100_000
"""Probe records one step keeps, at most (a high rate over a long step must not grow memory without end)."""


@dataclass(slots=True)
class Probes:
    """One step's probes: their records, and those due that were not sent (a cap was reached)."""

    records: list[RequestRecord] = field(default_factory=list)
    skipped: int = 0


def probe_gaps_ns(rate: float, seed: int) -> Callable[[], int]:
    """The gaps of a Poisson process at ``rate`` per second, in ns, one per call; the same seed, the same gaps."""
    rng = random.Random(f"probes:{seed}")
    return lambda: max(1, int(rng.expovariate(rate) * 1e9))


class Prober:
    """Sends probes at ``rate`` per second while a step runs; `beside` returns the step's outcome and the probes."""

    def __init__(self, rate: float, client: StreamClient) -> None:
        self.rate, self.client = rate, client

    async def beside(self, work: Awaitable[StepOutcome], step_index: int, seed: int,
                     ) -> tuple[StepOutcome, Probes]:
        """Run ``work`` (a step) with probes beside it; the probes still in flight when it ends are awaited."""
        done = Probes()
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
        done.records.sort(key=lambda r: r.index)
        return outcome, done

    async def _send(self, step_index: int, seed: int, done: Probes, in_flight: set[asyncio.Task[None]]) -> None:
        gap = probe_gaps_ns(self.rate, seed)
        due = perf_counter_ns() + gap()
        index = 0
        while True:
            await sleep_until(due, 0)
            this, due = due, due + gap()
            if len(in_flight) >= MAX_PROBES_IN_FLIGHT or index >= MAX_PROBES_PER_STEP:
                done.skipped += 1
                continue
            record = RequestRecord(index=index, step=step_index, due_ns=this)
            task = asyncio.create_task(self._one(record, done.records))
            in_flight.add(task)
            task.add_done_callback(in_flight.discard)
            index += 1

    async def _one(self, record: RequestRecord, done: list[RequestRecord]) -> None:
        await self.client.send(PROBE_PROMPT, record, on_done=done.append)

    async def close(self) -> None:
        await self.client.close()


def prober_for(rate: float | None, setup: WorkerSetup) -> Prober | None:
    """The probes ``--probe-rate`` asks for, with a client of their own to ``setup``'s target; None without."""
    if rate is None:
        return None
    return Prober(rate, StreamClient(setup.target, create_client(setup.api), setup.params, setup.timeouts))
