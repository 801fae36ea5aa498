"""One load step shared out between N load generators: worker processes (`workers`) or Ray actors (`ray_actor`).

Generator ``w`` of ``N`` runs `run_share`: its share of the step on its own event loop with a client of its
own. Concurrency ``c`` is split into near-equal slot counts, a rate ``r`` into ``r / N`` per generator (N
independent Poisson streams add up to one Poisson stream at ``r``; gamma streams add up to a smoother one,
and constant ones are phase-shifted to interleave), requests and warm-up requests likewise. Record indices
are mapped back to the step's own numbering: generator ``w``'s local request ``i`` is request ``i * N + w``.
Multi-turn sessions (`WorkerSetup.sessions`) are shared out likewise, each generator running whole sessions
(session ``s`` of generator ``w`` is session ``s * N + w``); a trace's requests are dealt out in turn
(generator ``w`` sends requests ``w``, ``w + N``, ...), each at its own time.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import TypeVar

from tokometer.backends import create_backend
from tokometer.backends.client import StreamClient, Target, Timeouts
from tokometer.clock import sleep_until
from tokometer.datasets.base import Prompt
from tokometer.datasets.conversations import SessionScript
from tokometer.load.health import ClientHealth
from tokometer.load.profiles import LoadStep
from tokometer.load.runner import StepLimits, StepOutcome, run_step
from tokometer.records import RequestRecord
from tokometer.wire.base import GenerationParams

__all__ = ["Items", "WorkerSetup", "cycle_from", "make_client", "run_share", "share", "split_evenly",
           "stopped_before_start"]

T = TypeVar("T")

Items = list[Prompt] | list[SessionScript]
"""A step's prompts, or its sessions (`WorkerSetup.sessions`)."""


@dataclass(frozen=True, slots=True)
class WorkerSetup:
    """What a load generator needs to build its own client (everything picklable)."""

    target: Target
    api: str
    params: GenerationParams
    timeouts: Timeouts
    tokenizer_path: str | None = None
    sessions: bool = False
    """The step's items are `SessionScript`s, run by `tokometer.load.sessions`."""


def split_evenly(total: int, parts: int, index: int) -> int:
    """Part ``index`` of ``total`` split into ``parts`` near-equal whole shares."""
    return total // parts + (1 if index < total % parts else 0)


def share(step: LoadStep, limits: StepLimits, workers: int, w: int) -> tuple[LoadStep, StepLimits, int]:
    """Generator ``w``'s step, limits, and phase offset (ns) for constant-rate interleaving."""
    requests = None if limits.requests is None else split_evenly(limits.requests, workers, w)
    mine = StepLimits(requests, limits.duration_s, split_evenly(limits.warmup, workers, w))
    if step.mode == "trace":
        cap = None if step.max_concurrency is None else max(1, split_evenly(step.max_concurrency, workers, w))
        return replace(step, offsets=step.offsets[w::workers], max_concurrency=cap), mine, 0
    if step.mode == "rate":
        assert step.rate is not None
        rate = step.rate / workers
        cap = None if step.max_concurrency is None else max(1, split_evenly(step.max_concurrency, workers, w))
        phase = int(w * 1e9 / step.rate) if step.arrival == "constant" else 0
        return replace(step, rate=rate, max_concurrency=cap), mine, phase
    concurrency = step.concurrency if step.mode == "concurrency" else 1
    return replace(step, mode="concurrency", concurrency=split_evenly(concurrency, workers, w)), mine, 0


def cycle_from(items: list[T], start: int, stride: int) -> Iterator[T]:
    """Every ``stride``-th prompt (or session) from ``start``, endlessly: generators share out distinct ones."""
    return itertools.islice(itertools.cycle(items), start, None, stride)


def stopped_before_start() -> StepOutcome:
    """The outcome of a generator told to stop before its share began: nothing sent, interrupted."""
    return StepOutcome([], ClientHealth(0.0, 0.0, 0.0, None), interrupted=True)


def make_client(setup: WorkerSetup) -> StreamClient:
    """A client of the generator's own, on the running event loop, counting tokens as the run's does."""
    count = None
    if setup.tokenizer_path:
        from tokometer.tokens import FileTokenizer

        count = FileTokenizer(setup.tokenizer_path).count
    return StreamClient(setup.target, create_backend(setup.api), setup.params, setup.timeouts, count)


async def run_share(setup: WorkerSetup, client: StreamClient, step: LoadStep, step_index: int, limits: StepLimits,
                    items: Items, seed: int, workers: int, w: int, start_ns: int,
                    on_record: Callable[[RequestRecord], None]) -> StepOutcome:
    """Run generator ``w``'s share of ``step`` with ``client``; each record, renumbered, goes to ``on_record``.

    ``start_ns`` is the common start moment on this generator's own clock: an open loop's schedule starts
    there, a closed loop waits for it, so that all the generators begin together.
    """
    my_step, my_limits, phase = share(step, limits, workers, w)

    def mine(record: RequestRecord) -> None:
        record.index = record.index * workers + w
        if record.session is not None:
            record.session = record.session * workers + w
        on_record(record)

    start = start_ns + phase if step.open_loop else None
    if start is None:
        try:
            await sleep_until(start_ns)
        except asyncio.CancelledError:
            if (current := asyncio.current_task()) is not None:
                current.uncancel()
            return stopped_before_start()
    if setup.sessions:
        from tokometer.load.sessions import run_session_step

        scripts = cycle_from([s for s in items if isinstance(s, SessionScript)], w, workers)
        return await run_session_step(my_step, step_index, my_limits, scripts, client, mine, seed * 1000 + w,
                                      start_ns=start)
    stream = cycle_from([p for p in items if isinstance(p, Prompt)], w, workers)
    return await run_step(my_step, step_index, my_limits, stream, client, mine, seed * 1000 + w, start_ns=start)
