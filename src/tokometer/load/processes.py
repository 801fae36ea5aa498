"""Run one load step across several processes, when one event loop cannot keep up.

Each worker process runs its share of the step (`tokometer.load.share`: how concurrency, rates,
requests, sessions and traces are split, and how record indices map back). All workers start on the
same ``perf_counter_ns`` moment (CLOCK_MONOTONIC is shared by the processes of a host).

Records come back over a pipe in small batches (every 50 ms) and reach
``on_record`` in the parent as they arrive, so the results store still gets
every finished request while the step runs. Workers ignore SIGINT: the parent
decides when to stop and tells them; they record what was in flight as
cancelled and send it back before they exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from time import perf_counter_ns
from typing import Any

from tokometer.load.profiles import LoadStep
from tokometer.load.runner import StepLimits, StepOutcome
from tokometer.load.selfcheck import ClientHealth
from tokometer.load.share import Items, WorkerSetup, make_client, run_share, split_evenly, stopped_before_start
from tokometer.records import RequestRecord

__all__ = ["WorkerSetup", "run_step_in_workers", "split_evenly"]

_FLUSH_S = 0.05
_START_LEAD_NS = 200_000_000


def _worker_main(control: Connection, conn: Connection, setup: WorkerSetup, step: LoadStep, step_index: int,
                 limits: StepLimits, prompts: Items, seed: int, workers: int, w: int) -> None:
    """A worker process: its share of the step on its own uvloop, deaf to SIGINT (the parent says stop)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    import uvloop

    uvloop.run(_worker_async(control, conn, setup, step, step_index, limits, prompts, seed, workers, w))


async def _worker_async(control: Connection, conn: Connection, setup: WorkerSetup, step: LoadStep,
                        step_index: int, limits: StepLimits, prompts: Items, seed: int, workers: int,
                        w: int) -> None:
    """``control`` brings go/stop from the parent (watched by the loop); ``conn`` carries
    records back (blocking writes: two pipes, because the loop makes a watched fd non-blocking)."""
    client = make_client(setup)
    pending: list[RequestRecord] = []

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
        outcome = stopped_before_start()
        if start_ns is not None:
            main_task = loop.create_task(run_share(setup, client, step, step_index, limits, prompts, seed,
                                                   workers, w, start_ns, pending.append))
            with contextlib.suppress(asyncio.CancelledError):  # stopped before the task began
                outcome = await main_task
    finally:
        loop.remove_reader(control.fileno())
        flush_task.cancel()
        await client.close()
    conn.send(("records", pending[:]))
    conn.send(("done", (outcome.health, outcome.interrupted)))
    conn.close()
    control.close()


@dataclass
class _Workers:
    """The worker processes of one step and their pipes: ``controls`` carry go/stop out, ``pipes`` records back."""

    processes: list[BaseProcess] = field(default_factory=list)
    pipes: list[Connection] = field(default_factory=list)
    controls: list[Connection] = field(default_factory=list)

    def send_all(self, message: tuple[str, Any]) -> None:
        """Tell every worker ``message`` (one that has exited already is skipped)."""
        for control in self.controls:
            with contextlib.suppress(OSError):
                control.send(message)

    def close(self) -> None:
        """Wait a little for each worker to exit, kill one that does not, and close every pipe."""
        for process in self.processes:
            process.join(timeout=5)
            if process.is_alive():
                process.kill()
        for pipe in self.pipes + self.controls:
            pipe.close()


def _start_workers(setup: WorkerSetup, step: LoadStep, step_index: int, limits: StepLimits, prompts: Items,
                   seed: int, workers: int) -> _Workers:
    """Spawn ``workers`` processes, each running its share of ``step`` once told to go."""
    ctx = multiprocessing.get_context("spawn")
    started = _Workers()
    for w in range(workers):
        control_r, control_w = ctx.Pipe(duplex=False)
        data_r, data_w = ctx.Pipe(duplex=False)
        process = ctx.Process(target=_worker_main, name=f"tokometer-worker-{w}", daemon=True,
                              args=(control_r, data_w, setup, step, step_index, limits, prompts, seed, workers, w))
        process.start()
        control_r.close()
        data_w.close()
        started.pipes.append(data_r)
        started.controls.append(control_w)
        started.processes.append(process)
    return started


@dataclass
class _Results:
    """What the workers sent back: the records (each handed to ``on_record`` as it arrives), and each worker's
    client health and whether it was interrupted."""

    on_record: Callable[[RequestRecord], None]
    records: list[RequestRecord] = field(default_factory=list)
    healths: list[ClientHealth] = field(default_factory=list)
    flags: list[bool] = field(default_factory=list)

    def deliver(self, batch: list[RequestRecord]) -> None:
        """Keep a batch of records and pass each on (on the event loop)."""
        for record in batch:
            self.records.append(record)
            self.on_record(record)


def _read_pipes(workers: _Workers, results: _Results, loop: asyncio.AbstractEventLoop) -> None:
    """Read every worker's pipe until each has said done or closed (in a thread: `wait` blocks). Records go to
    the loop as they come; once every worker is ready, all are given the same start moment."""
    open_pipes = set(workers.pipes)
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
                loop.call_soon_threadsafe(results.deliver, value)
            elif kind == "ready":
                ready += 1
                if ready == len(workers.pipes):
                    workers.send_all(("go", perf_counter_ns() + _START_LEAD_NS))
            elif kind == "done":
                results.healths.append(value[0])
                results.flags.append(value[1])
                open_pipes.discard(conn)


async def _wait_or_stop(finished: asyncio.Future[None], workers: _Workers) -> bool:
    """Wait until the workers are done; if this task is cancelled meanwhile, tell them to stop, wait for what
    they had in flight, and say the step was interrupted (True)."""
    try:
        await asyncio.shield(finished)
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if current is not None:
            current.uncancel()
        workers.send_all(("stop", None))
        await finished
        return True
    return False


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
    started = _start_workers(setup, step, step_index, limits, prompts, seed, workers)
    loop = asyncio.get_running_loop()
    results = _Results(on_record)
    finished: asyncio.Future[None] = loop.create_future()

    def reader() -> None:
        try:
            _read_pipes(started, results, loop)
        finally:
            loop.call_soon_threadsafe(lambda: None if finished.done() else finished.set_result(None))

    thread = threading.Thread(target=reader, name="tokometer-worker-reader", daemon=True)
    thread.start()
    try:
        interrupted = await _wait_or_stop(finished, started)
    finally:
        thread.join(timeout=5)
        started.close()
    interrupted = interrupted or any(results.flags)
    results.records.sort(key=lambda r: r.index)
    return StepOutcome(results.records, ClientHealth.merged(results.healths, results.records, step, workers),
                       interrupted)
