"""Run one load step across several processes, when one event loop cannot keep up.

Each worker process runs `run_step` with its share of the step: concurrency
``c`` is split into near-equal slot counts, a rate ``r`` into ``r / N`` per
worker (N independent Poisson streams add up to one Poisson stream at ``r``;
gamma streams add up to a smoother one, and constant ones are phase-shifted to
interleave), requests and warm-up requests likewise. All workers start on the
same ``perf_counter_ns`` moment (CLOCK_MONOTONIC is shared by the processes of
a host), and record indices are mapped back to the step's own numbering:
worker ``w``'s local request ``i`` is request ``i * N + w``. Multi-turn sessions
(`WorkerSetup.sessions`) are shared out likewise, each worker running whole
sessions (session ``s`` of worker ``w`` is session ``s * N + w``); a trace's
requests are dealt out in turn (worker ``w`` sends requests ``w``, ``w + N``,
...), each at its own time.

Records come back over a pipe in small batches (every 50 ms) and reach
``on_record`` in the parent as they arrive, so the results store still gets
every finished request while the step runs. Workers ignore SIGINT: the parent
decides when to stop and tells them; they record what was in flight as
cancelled and send it back before they exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import multiprocessing
import signal
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from multiprocessing.connection import Connection, wait
from time import perf_counter_ns
from typing import Any, TypeVar

from tokometer.backends import create_backend
from tokometer.backends.client import StreamClient, Target, Timeouts
from tokometer.datasets.base import Prompt
from tokometer.datasets.conversations import SessionScript
from tokometer.load.health import ClientHealth
from tokometer.load.profiles import LoadStep
from tokometer.load.runner import StepLimits, StepOutcome, run_step
from tokometer.records import RequestRecord
from tokometer.wire.base import GenerationParams

__all__ = ["WorkerSetup", "run_step_in_workers", "split_evenly"]

T = TypeVar("T")

Items = list[Prompt] | list[SessionScript]
"""A step's prompts, or its sessions (`WorkerSetup.sessions`)."""

_FLUSH_S = 0.05
_START_LEAD_NS = 200_000_000


@dataclass(frozen=True, slots=True)
class WorkerSetup:
    """What a worker needs to build its own client (everything picklable)."""

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


def _share(step: LoadStep, limits: StepLimits, workers: int, w: int) -> tuple[LoadStep, StepLimits, int]:
    """The worker's step, limits, and phase offset (ns) for constant-rate interleaving."""
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


def _worker_main(control: Connection, conn: Connection, setup: WorkerSetup, step: LoadStep, step_index: int,
                 limits: StepLimits, prompts: Items, seed: int, workers: int, w: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    import uvloop

    uvloop.run(_worker_async(control, conn, setup, step, step_index, limits, prompts, seed, workers, w))


async def _worker_async(control: Connection, conn: Connection, setup: WorkerSetup, step: LoadStep,
                        step_index: int, limits: StepLimits, prompts: Items, seed: int, workers: int,
                        w: int) -> None:
    """``control`` brings go/stop from the parent (watched by the loop); ``conn`` carries
    records back (blocking writes: two pipes, because the loop makes a watched fd non-blocking)."""
    count = None
    if setup.tokenizer_path:
        from tokometer.tokens import FileTokenizer

        count = FileTokenizer(setup.tokenizer_path).count
    client = StreamClient(setup.target, create_backend(setup.api), setup.params, setup.timeouts, count)
    my_step, my_limits, phase = _share(step, limits, workers, w)
    pending: list[RequestRecord] = []

    def on_record(record: RequestRecord) -> None:
        record.index = record.index * workers + w
        if record.session is not None:
            record.session = record.session * workers + w
        pending.append(record)

    async def flusher() -> None:
        while True:
            await asyncio.sleep(_FLUSH_S)
            if pending:
                conn.send(("records", pending[:]))
                pending.clear()

    conn.send(("ready", None))
    loop = asyncio.get_running_loop()
    go: asyncio.Future[Any] = loop.create_future()
    main_task: asyncio.Task[StepOutcome] | None = None

    def on_message() -> None:
        try:
            kind, value = control.recv()
        except EOFError:
            kind, value = "stop", None
        if kind == "go" and not go.done():
            go.set_result(value)
        elif kind == "stop":
            if not go.done():
                go.set_result(None)
            if main_task is not None:
                main_task.cancel()

    loop.add_reader(control.fileno(), on_message)
    start_ns = await go
    flush_task = loop.create_task(flusher())
    try:
        if start_ns is None:
            outcome = StepOutcome([], ClientHealth(0.0, 0.0, 0.0, None), interrupted=True)
        else:
            start = start_ns + phase if step.open_loop else None
            if setup.sessions:
                from tokometer.load.sessions import run_session_step

                scripts = _cycle_from([s for s in prompts if isinstance(s, SessionScript)], w, workers)
                main_task = loop.create_task(run_session_step(my_step, step_index, my_limits, scripts, client,
                                                              on_record, seed * 1000 + w, start_ns=start))
            else:
                stream = _cycle_from([p for p in prompts if isinstance(p, Prompt)], w, workers)
                main_task = loop.create_task(
                    run_step(my_step, step_index, my_limits, stream, client, on_record, seed * 1000 + w,
                             start_ns=start))
            outcome = await main_task
    finally:
        loop.remove_reader(control.fileno())
        flush_task.cancel()
        await client.close()
    conn.send(("records", pending[:]))
    conn.send(("done", (outcome.health, outcome.interrupted)))
    conn.close()
    control.close()


async def run_step_in_workers(
    step: LoadStep,
    step_index: int,
    limits: StepLimits,
    prompts: Items,
    setup: WorkerSetup,
    workers: int,
    on_record: Callable[[RequestRecord], None],
    seed: int = 0,
) -> StepOutcome:
    """Run ``step`` in ``workers`` processes; same result shape as `run_step`."""
    ctx = multiprocessing.get_context("spawn")
    pipes: list[Connection] = []
    controls: list[Connection] = []
    processes = []
    for w in range(workers):
        control_r, control_w = ctx.Pipe(duplex=False)
        data_r, data_w = ctx.Pipe(duplex=False)
        process = ctx.Process(target=_worker_main, name=f"tokometer-worker-{w}", daemon=True,
                              args=(control_r, data_w, setup, step, step_index, limits, prompts, seed, workers, w))
        process.start()
        control_r.close()
        data_w.close()
        pipes.append(data_r)
        controls.append(control_w)
        processes.append(process)
    loop = asyncio.get_running_loop()
    records: list[RequestRecord] = []
    healths: list[ClientHealth] = []
    flags: list[bool] = []
    interrupted = False
    finished = loop.create_future()

    def deliver(batch: list[RequestRecord]) -> None:
        for record in batch:
            records.append(record)
            on_record(record)

    def reader() -> None:
        try:
            _read_all()
        finally:
            loop.call_soon_threadsafe(lambda: None if finished.done() else finished.set_result(None))

    def _read_all() -> None:
        open_pipes = set(pipes)
        ready = 0
        while open_pipes:
            for conn in wait(list(open_pipes)):
                assert isinstance(conn, Connection)
                try:
                    kind, value = conn.recv()
                except EOFError:
                    open_pipes.discard(conn)
                    continue
                if kind == "records":
                    loop.call_soon_threadsafe(deliver, value)
                elif kind == "ready":
                    ready += 1
                    if ready == workers:
                        start = perf_counter_ns() + _START_LEAD_NS
                        for control in controls:
                            with contextlib.suppress(OSError):
                                control.send(("go", start))
                elif kind == "done":
                    healths.append(value[0])
                    flags.append(value[1])
                    open_pipes.discard(conn)

    thread = threading.Thread(target=reader, name="tokometer-worker-reader", daemon=True)
    thread.start()
    try:
        await asyncio.shield(finished)
    except asyncio.CancelledError:
        interrupted = True
        current = asyncio.current_task()
        if current is not None:
            current.uncancel()
        for control in controls:
            with contextlib.suppress(OSError):
                control.send(("stop", None))
        await finished
    finally:
        thread.join(timeout=5)
        for process in processes:
            process.join(timeout=5)
            if process.is_alive():
                process.kill()
        for pipe in pipes + controls:
            pipe.close()
    interrupted = interrupted or any(flags)
    records.sort(key=lambda r: r.index)
    return StepOutcome(records, ClientHealth.merged(healths, records, step, workers), interrupted)


def _cycle_from(prompts: list[T], start: int, stride: int) -> Iterator[T]:
    """Every ``stride``-th prompt (or session) from ``start``, endlessly: workers share out distinct ones."""
    return itertools.islice(itertools.cycle(prompts), start, None, stride)
