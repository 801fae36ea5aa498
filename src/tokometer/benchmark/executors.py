"""Where a load step runs: one `StepExecutor` per kind, chosen once per run by `executor_for`.

- `LocalExecutor`: prompts on this event loop, through one `StreamClient` (`tokometer.load.runner`);
- `SessionExecutor`: chat sessions on this event loop (`tokometer.load.sessions`);
- `WorkerExecutor`: prompts or sessions in ``--workers`` processes (`tokometer.load.processes`);
- `RayExecutor`: prompts or sessions on Ray actors across a cluster (``--ray``, `tokometer.load.cluster`).

Each runs one step at a time and returns the step's `StepOutcome`; between steps it keeps its place in
the prompts (or sessions), so that the next step goes on with new ones. A trace step starts the trace
again from its beginning, so that every trial replays it whole.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Protocol

from tokometer.benchmark.prepare import Prepared
from tokometer.benchmark.spec import BenchSpec
from tokometer.client.streamclient import StreamClient
from tokometer.datasets.conversations import SessionScript
from tokometer.load.agentic import AgentExecutor
from tokometer.load.cluster import RayLoad
from tokometer.load.processes import run_step_in_workers
from tokometer.load.profiles import LoadStep
from tokometer.load.runner import StepLimits, StepOutcome, run_step
from tokometer.load.sessions import run_session_step
from tokometer.load.share import Items, WorkerSetup
from tokometer.prompt import Prompt
from tokometer.protocols.registry import create_client
from tokometer.records import RequestRecord

__all__ = ["LocalExecutor", "RayExecutor", "SessionExecutor", "StepExecutor", "WorkerExecutor", "executor_for"]

OnRecord = Callable[[RequestRecord], None]


class StepExecutor(Protocol):
    """Runs a run's steps one at a time, handing each finished request to the run's ``on_record``."""

    async def run(self, step: LoadStep, index: int, seed: int, limits: StepLimits | None = None) -> StepOutcome:
        """Run ``step`` (the run's ``index``-th) with ``seed`` until ``limits`` (None: the run's); returns when it
        has ended or was cancelled."""
        ...

    async def close(self) -> None:
        """Release what the executor holds (its client's connections); the run is over."""
        ...


class LocalExecutor:
    """Prompts on this event loop; the prompts go on from step to step."""

    def __init__(self, prepared: Prepared, limits: StepLimits, client: StreamClient, on_record: OnRecord) -> None:
        self.prepared, self.limits, self.client, self.on_record = prepared, limits, client, on_record
        self.prompts: Iterator[Prompt] = prepared.source.prompts()

    async def run(self, step: LoadStep, index: int, seed: int, limits: StepLimits | None = None) -> StepOutcome:
        if step.mode == "trace":
            self.prompts = self.prepared.source.prompts()  # every trial replays the trace from its start
        return await run_step(step, index, limits or self.limits, self.prompts, self.client, self.on_record, seed=seed)

    async def close(self) -> None:
        await self.client.close()


class SessionExecutor:
    """Chat sessions on this event loop; the sessions go on from step to step."""

    def __init__(self, scripts: Iterator[SessionScript], limits: StepLimits, client: StreamClient,
                 on_record: OnRecord) -> None:
        self.scripts, self.limits, self.client, self.on_record = scripts, limits, client, on_record

    async def run(self, step: LoadStep, index: int, seed: int, limits: StepLimits | None = None) -> StepOutcome:
        return await run_session_step(step, index, limits or self.limits, self.scripts, self.client, self.on_record,
                                      seed=seed)

    async def close(self) -> None:
        await self.client.close()


class _Handout:
    """The prompts (or sessions) a step elsewhere gets, as a list, after those the earlier steps used."""

    def __init__(self, prepared: Prepared, limits: StepLimits) -> None:
        self.prepared, self.limits = prepared, limits
        self.used = 0

    def items(self, step: LoadStep) -> Items:
        if step.mode == "trace":
            self.used = 0  # every trial replays the trace from its start
        if self.prepared.agents is not None:  # every session, every step: a worker picks out its own
            return self.prepared.agents
        if self.prepared.sessions is not None:
            return self.prepared.session_list(self.limits, self.used)
        return self.prepared.prompt_list(self.limits, self.used)

    def count(self, outcome: StepOutcome) -> StepOutcome:
        """Note what ``outcome`` used (sessions, or prompts), and return it."""
        records = outcome.records
        self.used += len({r.session for r in records}) if self.prepared.sessions is not None else len(records)
        return outcome


class WorkerExecutor:
    """Prompts or sessions in ``workers`` processes, each with a client of its own."""

    def __init__(self, prepared: Prepared, limits: StepLimits, setup: WorkerSetup, workers: int,
                 on_record: OnRecord) -> None:
        self.handout, self.limits, self.setup, self.workers, self.on_record = (
            _Handout(prepared, limits), limits, setup, workers, on_record)

    async def run(self, step: LoadStep, index: int, seed: int, limits: StepLimits | None = None) -> StepOutcome:
        items = self.handout.items(step)
        return self.handout.count(await run_step_in_workers(step, index, limits or self.limits, items, self.setup,
                                                            self.workers, self.on_record, seed=seed))

    async def close(self) -> None:
        pass


class RayExecutor:
    """Prompts or sessions on the actors of a Ray ``cluster`` (which `run_benchmark` connects and closes)."""

    def __init__(self, prepared: Prepared, limits: StepLimits, cluster: RayLoad, on_record: OnRecord) -> None:
        self.handout, self.limits, self.cluster, self.on_record = _Handout(prepared, limits), limits, cluster, on_record

    async def run(self, step: LoadStep, index: int, seed: int, limits: StepLimits | None = None) -> StepOutcome:
        items = self.handout.items(step)
        return self.handout.count(await self.cluster.run_step(step, index, limits or self.limits, items, self.on_record,
                                                              seed=seed))

    async def close(self) -> None:
        pass


def executor_for(spec: BenchSpec, prepared: Prepared, setup: WorkerSetup, cluster: RayLoad | None,
                 limits: StepLimits, on_record: OnRecord, count: Callable[[str], int] | None) -> StepExecutor:
    """The executor ``spec`` asks for: Ray with a ``cluster``, else worker processes with ``--workers`` over 1
    (cut to the CPUs there are; `prepare` warned when it cut it), else this event loop. ``count``: the local
    tokenizer the client counts output tokens with, if there is one."""
    if cluster is not None:
        return RayExecutor(prepared, limits, cluster, on_record)
    workers = min(spec.workers, os.cpu_count() or 1)
    if workers > 1:
        return WorkerExecutor(prepared, limits, setup, workers, on_record)
    client = StreamClient(setup.target, create_client(spec.api), setup.params, setup.timeouts, count_tokens=count)
    if prepared.agents is not None:
        return AgentExecutor(prepared.agents, client, on_record)
    if prepared.sessions is not None:
        return SessionExecutor(prepared.sessions.scripts(), limits, client, on_record)
    return LocalExecutor(prepared, limits, client, on_record)
