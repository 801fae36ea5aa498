"""`LoadActor`: one share of a step's load, generated on a Ray cluster node (`tokometer.load.cluster` drives it).

The class is plain Python; the driver makes it a threaded Ray actor (``max_concurrency`` > 1). `run` holds
one of its threads for the whole share and runs it on an event loop of its own (uvloop) with the same
stamping client as a local run (`tokometer.load.share.run_share`). Meanwhile the driver calls the other
methods from other threads: `clock` (this node's monotonic clock, for the driver's offset measurement),
`ready` and `go` (the start barrier: every actor has its loop and client up before any begins), `take` (the
records finished since the last call: the driver streams them into its store while the step runs) and
`stop` (Ctrl-C on the driver: what is in flight is cancelled, recorded as such, and `run` returns).

Stamps stay on this node's clock (``perf_counter_ns``); the driver moves them onto its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import threading
from pathlib import Path
from time import perf_counter_ns
from typing import Any

from tokometer.load.profiles import LoadStep
from tokometer.load.runner import StepLimits, StepOutcome
from tokometer.load.selfcheck import ClientHealth
from tokometer.load.share import Items, WorkerSetup, make_client, run_share, stopped_before_start
from tokometer.records import RequestRecord

__all__ = ["LoadActor", "boot_id"]


def boot_id() -> str | None:
    """This kernel's boot ID: two processes that report the same one read the same CLOCK_MONOTONIC."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip() or None
    except OSError:
        return None


class LoadActor:
    """Generator ``index`` of ``actors``: runs its share of each step it is given (see the module docstring)."""

    def __init__(self, setup: WorkerSetup, index: int, actors: int) -> None:
        self._setup = setup
        self._index = index
        self._actors = actors
        self._lock = threading.Lock()
        self._pending: list[RequestRecord] = []
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._go: asyncio.Future[int | None] | None = None
        self._task: asyncio.Task[StepOutcome] | None = None
        self._stopped = False

    def where(self) -> dict[str, Any]:
        """Which node (its Ray ID), host and process this actor runs in, and its kernel's boot ID."""
        import ray

        return {"node_id": ray.get_runtime_context().get_node_id(), "host": socket.gethostname(),
                "pid": os.getpid(), "boot_id": boot_id()}

    def clock(self) -> int:
        """This node's monotonic clock, now."""
        return perf_counter_ns()

    def run(self, step: LoadStep, step_index: int, limits: StepLimits, items: Items,
            seed: int) -> tuple[ClientHealth, bool]:
        """Run this actor's share of ``step`` once `go` says when; its health and whether it was interrupted."""
        import uvloop

        try:
            return uvloop.run(_run(self, step, step_index, limits, items, seed))
        finally:
            # Reset here, not on entry: the driver's `ready` (or a `stop`) for the next step may run first.
            self._ready.clear()
            with self._lock:
                self._stopped = False

    def _keep(self, record: RequestRecord) -> None:
        with self._lock:
            self._pending.append(record)

    def ready(self, timeout_s: float) -> bool:
        """Wait until `run` has its event loop and client up (False: not within ``timeout_s``)."""
        return self._ready.wait(timeout_s)

    def go(self, start_ns: int) -> None:
        """Begin the share at ``start_ns`` on this node's clock."""
        with self._lock:
            loop, go = self._loop, self._go
        if loop is not None and go is not None:
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nothing left to start
                loop.call_soon_threadsafe(_settle, go, start_ns)

    def take(self) -> list[RequestRecord]:
        """The records finished since the last call."""
        with self._lock:
            taken, self._pending = self._pending, []
        return taken

    def stop(self) -> None:
        """End the share now: requests in flight are cancelled (and recorded so); `run` then returns."""
        with self._lock:
            self._stopped = True
            loop, go, task = self._loop, self._go, self._task
        if loop is not None:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_halt, go, task)


async def _run(actor: LoadActor, step: LoadStep, step_index: int, limits: StepLimits, items: Items,
               seed: int) -> tuple[ClientHealth, bool]:
    """`LoadActor.run`'s event loop. Not a method: Ray makes a class with any ``async def`` method an async
    actor, whose calls all share one event loop of Ray's; this actor gives each call a thread and runs the
    share on a uvloop of its own."""
    loop = asyncio.get_running_loop()
    client = make_client(actor._setup)
    go: asyncio.Future[int | None] = loop.create_future()
    with actor._lock:
        actor._loop, actor._go = loop, go
        if actor._stopped:
            go.set_result(None)
    actor._ready.set()
    outcome = stopped_before_start()
    try:
        start_ns = await go
        if start_ns is not None:
            task = loop.create_task(run_share(actor._setup, client, step, step_index, limits, items, seed,
                                              actor._actors, actor._index, start_ns, actor._keep))
            with actor._lock:
                actor._task = task
                if actor._stopped:
                    task.cancel()
            with contextlib.suppress(asyncio.CancelledError):  # stopped before the task began
                outcome = await task
    finally:
        with actor._lock:
            actor._loop = actor._go = actor._task = None
        await client.close()
    return outcome.health, outcome.interrupted


def _settle(go: asyncio.Future[int | None] | None, value: int | None) -> None:
    if go is not None and not go.done():
        go.set_result(value)


def _halt(go: asyncio.Future[int | None] | None, task: asyncio.Task[StepOutcome] | None) -> None:
    _settle(go, None)
    if task is not None:
        task.cancel()
