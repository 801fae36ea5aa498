"""Run a benchmark's load steps on Ray actors spread over a cluster's nodes (``bench --ray``).

`RayLoad.connect` joins a running cluster as a driver (``auto``: the one started on this machine, or named
by RAY_ADDRESS; else the head's ``HOST:PORT``), reserves one CPU per actor in a SPREAD placement group (the
actors land on as many distinct nodes as there are) and starts a `LoadActor` in each bundle, once for the
whole run. `RayLoad.run_step` runs one step as `tokometer.load.processes` does on one host: each actor runs
its share (`tokometer.load.share`: concurrency, rate, requests, sessions or trace split between them) on an
event loop of its own with the same stamping client; a start barrier (every actor `ready`, then `go` at one
moment) makes them begin together; every 50 ms the driver takes each actor's finished records and hands
them to ``on_record``, so the results store fills while the step runs and neither Ctrl-C nor a failing
actor loses what reached the driver. A failed actor stops the step (the others are stopped and drained)
and is reported as the step's ``failure``.

Clocks: each actor stamps with its node's monotonic clock. Before each step the driver measures each
actor's clock against its own, NTP-style (`ClockOffset.measure`): of 16 round trips (driver reads t0,
actor reads a, driver reads t1) the one with the shortest round trip gives the offset
``(t0 + t1) / 2 - a``, right to within half that round trip, since the actor read its clock somewhere inside
it. Every stamp of the actor's records is moved onto the driver's timeline by that offset
(`RequestRecord.shift_clock`). An actor whose kernel has the driver's boot ID reads the very same
CLOCK_MONOTONIC: its offset is exactly 0 (the measured one is still reported, a check on the method).
Durations within one record (TTFT, ITL, ...) come from one clock and never depend on the offset; only
comparisons across actors (the step's span, a merged timeline) do.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from time import perf_counter_ns
from types import ModuleType
from typing import Any

from tokometer.load.profiles import LoadStep
from tokometer.load.ray_actor import LoadActor, boot_id
from tokometer.load.runner import StepLimits, StepOutcome
from tokometer.load.selfcheck import ClientHealth
from tokometer.load.share import Items, WorkerSetup, stopped_before_start
from tokometer.records import RequestRecord
from tokometer.util.errors import ConfigError

__all__ = ["INSTALL_HINT", "ClockOffset", "RayLoad", "import_ray"]

INSTALL_HINT = "pip install 'tokometer[ray]'"

_FLUSH_S = 0.05
_START_LEAD_NS = 200_000_000
_CLOCK_SAMPLES = 16
_START_TIMEOUT_S = 120.0
"""For the actors to start (a fresh Ray worker imports tokometer) and for a step's share to get ready."""
_STOP_TIMEOUT_S = 30.0
_ACTOR_THREADS = 8
"""`LoadActor.run` holds one thread; ready, go, take, stop and clock calls need others meanwhile."""


def import_ray() -> ModuleType:
    """The ``ray`` module; without it, a `ConfigError` that says how to install it."""
    try:
        import ray
    except ImportError:
        raise ConfigError(f"--ray needs Ray, which is not installed here: {INSTALL_HINT}") from None
    return ray


@dataclass(frozen=True, slots=True)
class ClockOffset:
    """How an actor's monotonic clock maps onto the driver's."""

    offset_ns: int
    """Added to a reading of the actor's clock, gives the driver's."""
    accuracy_ns: int
    """The measured offset is right to within this much (half the shortest round trip)."""
    measured_ns: int
    """What the round trips gave (equal to ``offset_ns`` unless the clock is shared)."""
    shared: bool = False
    """The actor's kernel is the driver's: the same CLOCK_MONOTONIC, offset exactly 0."""

    @classmethod
    def measure(cls, read: Callable[[], int], samples: int = _CLOCK_SAMPLES,
                now: Callable[[], int] = perf_counter_ns) -> ClockOffset:
        """Offset and accuracy from the shortest of ``samples`` round trips to ``read`` (the remote clock)."""
        best: tuple[int, int] | None = None
        for _ in range(samples):
            t0 = now()
            remote = read()
            t1 = now()
            sample = (t1 - t0, (t0 + t1) // 2 - remote)
            if best is None or sample[0] < best[0]:
                best = sample
        assert best is not None, "at least one sample"
        return cls(best[1], (best[0] + 1) // 2, best[1])

    def same_kernel(self) -> ClockOffset:
        """This measurement, for an actor known to read the driver's own clock."""
        return ClockOffset(0, self.accuracy_ns, self.measured_ns, shared=True)


@dataclass(slots=True)
class _Actor:
    handle: Any
    index: int
    node_id: str
    ip: str
    host: str
    boot_id: str | None
    clock: ClockOffset = ClockOffset(0, 0, 0)
    requests: int = 0

    @property
    def node(self) -> str:
        """The short node name records carry: the node ID's first 12 hex digits."""
        return self.node_id[:12]

    def entry(self) -> dict[str, Any]:
        """What the step's ``client.actors`` says of this actor."""
        return {"actor": self.index, "node": self.node, "ip": self.ip, "host": self.host,
                "requests": self.requests, "clock_offset_ms": self.clock.offset_ns / 1e6,
                "clock_accuracy_ms": self.clock.accuracy_ns / 1e6,
                "measured_offset_ms": self.clock.measured_ns / 1e6, "shared_clock": self.clock.shared}


def _one_line(exc: BaseException) -> str:
    cause = getattr(exc, "cause", None) or exc  # RayTaskError: the exception raised in the actor
    text = str(cause).strip().splitlines()
    return f"{type(cause).__name__}: {text[0] if text else ''}".rstrip(": ")


class RayLoad:
    """Load actors on a Ray cluster, for one run: `connect`, then `run_step` per step, then `close`."""

    def __init__(self, ray: ModuleType, actors: list[_Actor], group: Any, owned: bool) -> None:
        self._ray = ray
        self.actors = actors
        self._group = group
        self._owned = owned

    @classmethod
    async def connect(cls, address: str, setup: WorkerSetup, actors: int | None = None) -> RayLoad:
        """Join the cluster at ``address`` and start ``actors`` load actors (None: one per node with a CPU)."""
        ray = import_ray()
        if address.startswith("ray://"):
            raise ConfigError(f"--ray {address}: Ray Client addresses are not supported; run tokometer on a "
                              "node of the cluster and give the head's HOST:PORT (or auto)")
        owned = not ray.is_initialized()
        if owned and address != "auto":
            _check_reachable(address)
        if owned:
            previous = signal.getsignal(signal.SIGTERM) if _main_thread() else None
            try:
                ray.init(address=address, log_to_driver=False, logging_level=logging.ERROR)
            except Exception as exc:  # ConnectionError, ValueError, RuntimeError...: all mean "no cluster there"
                raise ConfigError(f"--ray {address}: cannot join a Ray cluster ({_one_line(exc)}); start one "
                                  "with 'ray start --head', or give its address HOST:PORT") from None
            finally:
                if previous is not None:  # ray.init sets its own SIGTERM handler: keep tokometer's
                    signal.signal(signal.SIGTERM, previous)
        try:
            placed, group = await asyncio.to_thread(_place, ray, setup, actors)
        except BaseException:
            if owned:
                ray.shutdown()
            raise
        return cls(ray, placed, group, owned)

    def close(self) -> None:
        """Stop the actors, free their CPUs and leave the cluster (which goes on running)."""
        from ray.util.placement_group import remove_placement_group

        for actor in self.actors:
            with contextlib.suppress(Exception):
                self._ray.kill(actor.handle)
        with contextlib.suppress(Exception):
            remove_placement_group(self._group)
        if self._owned:
            self._ray.shutdown()

    async def _measure_clocks(self) -> str | None:
        """Each actor's clock against this one; why not, if an actor has died since the last step."""
        local = boot_id()
        for actor in self.actors:
            actor.requests = 0
            try:
                clock = await asyncio.to_thread(ClockOffset.measure, _reader(self._ray, actor.handle))
            except Exception as exc:  # RayActorError: it died between steps
                return f"Ray actor {actor.index} on node {actor.node} ({actor.host}) failed: {_one_line(exc)}"
            actor.clock = clock.same_kernel() if local is not None and actor.boot_id == local else clock
        return None

    async def run_step(self, step: LoadStep, step_index: int, limits: StepLimits, items: Items,
                       on_record: Callable[[RequestRecord], None], seed: int = 0) -> StepOutcome:
        """Run ``step`` on the actors; same result shape as `run_step`, plus ``failure`` if an actor failed."""
        try:
            failure = await self._measure_clocks()
        except asyncio.CancelledError:  # Ctrl-C before the step began
            if (current := asyncio.current_task()) is not None:
                current.uncancel()
            return stopped_before_start()
        if failure is not None:
            outcome = stopped_before_start()
            outcome.failure = failure
            return outcome
        step_run = _StepRun(self._ray, self.actors, on_record)
        items_ref = self._ray.put(items)
        runs = {a.index: _future(a.handle.run.remote(step, step_index, limits, items_ref, seed))
                for a in self.actors}
        try:
            await step_run.start(runs)
            await step_run.drain(runs)
        except asyncio.CancelledError:
            if (current := asyncio.current_task()) is not None:
                current.uncancel()
            step_run.interrupted = True
            step_run.stop_all()
            await step_run.drain(runs, _STOP_TIMEOUT_S)
        healths, flags = [], []
        for future in runs.values():
            if future.done() and not future.cancelled() and future.exception() is None:
                health, interrupted = future.result()
                healths.append(health)
                flags.append(interrupted)
        records = sorted(step_run.records, key=lambda r: r.index)
        health = ClientHealth.merged(healths, records, step, len(self.actors))
        health.actors = [a.entry() for a in self.actors]
        interrupted = step_run.interrupted or any(flags) or step_run.failure is not None
        return StepOutcome(records, health, interrupted, failure=step_run.failure)


class _StepRun:
    """One step's traffic with the actors: the barrier, the record stream, stopping."""

    def __init__(self, ray: ModuleType, actors: list[_Actor], on_record: Callable[[RequestRecord], None]) -> None:
        self._ray = ray
        self._actors = actors
        self._on_record = on_record
        self.records: list[RequestRecord] = []
        self.failure: str | None = None
        self.interrupted = False
        self._dead: set[int] = set()

    async def start(self, runs: dict[int, asyncio.Future[Any]]) -> None:
        """The barrier: wait until every actor is ready, then tell all of them the same moment to begin.
        A run that ends before that (it failed) fails the step."""
        ready_all = asyncio.gather(*(_future(a.handle.ready.remote(_START_TIMEOUT_S)) for a in self._actors),
                                   return_exceptions=True)
        one_ended = asyncio.ensure_future(asyncio.wait(runs.values(), return_when=asyncio.FIRST_COMPLETED))
        try:
            either: set[asyncio.Future[Any]] = {ready_all, one_ended}
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        finally:
            one_ended.cancel()
        if not ready_all.done():
            ready_all.cancel()
            for index, future in runs.items():
                if future.done():
                    exc = None if future.cancelled() else future.exception()
                    self._fail(self._actors[index], _one_line(exc) if exc else "it ended before the step began")
            return
        for actor, answer in zip(self._actors, ready_all.result(), strict=True):
            if answer is not True:
                why = _one_line(answer) if isinstance(answer, BaseException) else f"not ready in {_START_TIMEOUT_S:g} s"
                self._fail(actor, why)
        if self.failure is not None:
            return
        start = perf_counter_ns() + _START_LEAD_NS
        for actor in self._actors:
            actor.handle.go.remote(start - actor.clock.offset_ns)

    async def drain(self, runs: dict[int, asyncio.Future[Any]], timeout_s: float | None = None) -> None:
        """Take records every 50 ms until every run has returned (or ``timeout_s`` passed), then the last ones."""
        deadline = None if timeout_s is None else perf_counter_ns() + int(timeout_s * 1e9)
        pending = set(runs.values())
        while pending and (deadline is None or perf_counter_ns() < deadline):
            done, pending = await asyncio.wait(pending, timeout=_FLUSH_S)
            await self._take_all()
            for index, future in runs.items():
                if future in done and (exc := future.exception()) is not None:
                    self._fail(self._actors[index], _one_line(exc))
            if self.failure is not None and deadline is None:  # the others were told to stop: wait so long
                deadline = perf_counter_ns() + int(_STOP_TIMEOUT_S * 1e9)
        await self._take_all()

    async def _take_all(self) -> None:
        live = [a for a in self._actors if a.index not in self._dead]
        taking = asyncio.gather(*(_future(a.handle.take.remote()) for a in live), return_exceptions=True)
        try:
            batches = await asyncio.shield(taking)
        except asyncio.CancelledError:  # Ctrl-C: the actors have handed these over; keep them, then stop
            self._keep(live, await taking)
            raise
        self._keep(live, batches)

    def _keep(self, live: list[_Actor], batches: list[Any]) -> None:
        for actor, batch in zip(live, batches, strict=True):
            if isinstance(batch, BaseException):
                self._fail(actor, _one_line(batch))
                continue
            for record in batch:
                record.shift_clock(actor.clock.offset_ns)
                record.actor, record.node = actor.index, actor.node
                actor.requests += 1
                self.records.append(record)
                self._on_record(record)

    def _fail(self, actor: _Actor, why: str) -> None:
        if actor.index in self._dead:
            return
        self._dead.add(actor.index)
        if self.failure is None:
            self.failure = f"Ray actor {actor.index} on node {actor.node} ({actor.host}) failed: {why}"
        self.stop_all()

    def stop_all(self) -> None:
        """Tell every actor to stop, failed ones too (one that failed to answer may still be running)."""
        for actor in self._actors:
            with contextlib.suppress(Exception):
                actor.handle.stop.remote()


def _place(ray: ModuleType, setup: WorkerSetup, count: int | None) -> tuple[list[_Actor], Any]:
    """Reserve the CPUs (a SPREAD placement group), start the actors, and ask each where it runs."""
    from ray.util.placement_group import placement_group, remove_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    nodes = [n for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get("CPU", 0) >= 1]
    count = count or len(nodes)
    free = ray.available_resources().get("CPU", 0.0)
    if not nodes or count > free:
        raise ConfigError(f"--ray: {count} load actor(s) need {count} free CPU(s), and the Ray cluster has "
                          f"{free:g} free on {len(nodes)} node(s) with CPUs: give fewer --workers, or add nodes")
    group = placement_group([{"CPU": 1.0}] * count, strategy="SPREAD")
    try:
        ray.get(group.ready(), timeout=_START_TIMEOUT_S)
        remote = ray.remote(LoadActor)
        handles = [remote.options(num_cpus=1, max_concurrency=_ACTOR_THREADS, scheduling_strategy=(
            PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=i))).remote(setup, i, count)
            for i in range(count)]
        where = ray.get([h.where.remote() for h in handles], timeout=_START_TIMEOUT_S)
    except Exception as exc:
        with contextlib.suppress(Exception):
            remove_placement_group(group)
        raise ConfigError(f"--ray: the load actors did not start ({_one_line(exc)}); every node needs tokometer "
                          "installed, the same version as here") from None
    ips = {n["NodeID"]: n.get("NodeManagerAddress", "") for n in nodes}
    return [_Actor(h, i, w["node_id"], ips.get(w["node_id"], ""), w["host"], w["boot_id"])
            for i, (h, w) in enumerate(zip(handles, where, strict=True))], group


def _check_reachable(address: str) -> None:
    """A one-line error at once when nothing listens at ``HOST:PORT`` (Ray itself retries for minutes)."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(f"--ray {address}: give auto, or the Ray head's address HOST:PORT (its GCS port, "
                          "6379 unless 'ray start --head --port' said otherwise)")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=5).close()
    except OSError as exc:
        raise ConfigError(f"--ray {address}: nothing answers there ({exc.strerror or exc}); is the Ray head "
                          "running ('ray start --head'), and are host and port right?") from None


def _reader(ray: ModuleType, handle: Any) -> Callable[[], int]:
    def read() -> int:
        value: int = ray.get(handle.clock.remote())
        return value

    return read


def _future(ref: Any) -> asyncio.Future[Any]:
    """A Ray object reference as a future of the running event loop."""
    future: Future[Any] = ref.future()
    return asyncio.wrap_future(future)


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()
