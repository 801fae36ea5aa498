"""Run one load step of agent sessions (``bench --agents``): each session's turns as its trace orders them.

A session (`tokometer.datasets.agentic.AgentSession`) starts at its own offset from the step's start (the
trace's ``start_ms``, open loop). Every turn runs as soon as the turns it waits for have all ended, plus its
tool latency (``tool_ms``, slept by the client: the tool's time, not the server's), and not before its fixed
send time where the trace gives one (``at_ms`` from the session's start); turns waiting on one turn
run concurrently (a fan-out), a turn waiting on several waits for the last (a join). A turn sends its agent's
conversation: the prefix as a system message, each earlier turn's input and the model's real answer
(``output_text``), then its new input followed by the answers of the other agents' turns it waited for.

A failed turn ends what depends on it (there is no answer to go on from); the rest of the session runs.
Each record carries ``session`` (the session's index in the step), ``turn`` (the turn's index in its
session), ``agent`` and ``ready_ns`` (when what it waited for had ended; for a session's first turns, the
session's start), so the metrics (`tokometer.metrics.agentic`) can tell the tool waits from the server's time.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Sequence
from time import perf_counter_ns

from tokometer.client.streamclient import StreamClient
from tokometer.datasets.agentic import AgentSession, session_offsets
from tokometer.datasets.agentic_workload import AgentWorkload, agent_sessions
from tokometer.load.profiles import LoadStep
from tokometer.load.runner import DISPATCH_SPIN_NS, START_LEAD_NS, StepOutcome, guarded
from tokometer.load.selfcheck import LoopMonitor
from tokometer.load.sessions import send_turn
from tokometer.prompt import Message, Prompt, chat_to_text
from tokometer.records import RequestRecord
from tokometer.util.clock import sleep_until

__all__ = ["AgentExecutor", "agent_step", "run_agent_share", "run_agent_step", "turn_messages"]

OnRecord = Callable[[RequestRecord], None]


def turn_messages(workload: AgentWorkload, index: int, k: int, history: Sequence[Message],
                  joined: Sequence[str]) -> tuple[Message, ...]:
    """What turn ``k`` of session ``index`` sends: its agent's ``history`` (the prefix, earlier inputs and
    answers), then its new input followed by the ``joined`` answers of the other agents it waited for."""
    text = "\n\n".join([workload.input_text(index, k), *joined])
    return (*history, Message("user", text))


def agent_step(value: str, seed: int, output_tokens: int | None = None) -> LoadStep:
    """The one step of ``--agents value``: every session once, each at its start (an open loop)."""
    sessions, name = agent_sessions(value, seed, output_tokens)
    return LoadStep("trace", offsets=session_offsets(sessions), trace=name, sessions=True)


class AgentExecutor:
    """Agent sessions on this event loop (`tokometer.benchmark.executors`): each step runs them all once."""

    def __init__(self, workload: AgentWorkload, client: StreamClient, on_record: OnRecord) -> None:
        self.workload, self.client, self.on_record = workload, client, on_record

    async def run(self, step: LoadStep, index: int, seed: int, limits: object = None) -> StepOutcome:
        """Run every session of the workload (``seed`` and ``limits`` do not apply: the sessions set both)."""
        return await run_agent_step(step, index, self.workload, self.client, self.on_record)

    async def close(self) -> None:
        await self.client.close()


async def run_agent_step(step: LoadStep, step_index: int, workload: AgentWorkload, client: StreamClient,
                         on_record: OnRecord, start_ns: int | None = None,
                         numbers: Sequence[int] | None = None) -> StepOutcome:
    """Run every session of ``workload`` once (or those ``numbers`` name), each at its offset (``step.offsets``);
    returns when all ended."""
    records: list[RequestRecord] = []
    counter = itertools.count()
    monitor = LoopMonitor()
    tasks: set[asyncio.Task[None]] = set()

    def done(record: RequestRecord) -> None:
        records.append(record)
        on_record(record)

    async def sessions(start: int) -> None:
        for number in numbers if numbers is not None else range(len(workload.sessions)):
            runner = _Session(workload, number, workload.sessions[number], client, step_index, counter, done)
            tasks.add(asyncio.create_task(runner.run(start + step.offsets[number])))
        await asyncio.gather(*tasks)

    start = start_ns if start_ns is not None else perf_counter_ns() + START_LEAD_NS
    interrupted = await guarded(sessions(start), tasks, client, monitor)
    health = monitor.health(step, records)
    records.sort(key=lambda r: r.index)
    return StepOutcome(records, health, interrupted)


async def run_agent_share(workload: AgentWorkload, step: LoadStep, step_index: int, client: StreamClient,
                          on_record: OnRecord, workers: int, w: int, start_ns: int) -> StepOutcome:
    """Load generator ``w`` of ``workers`` (``--workers`` processes or Ray actors, `tokometer.load.share`): whole
    sessions ``w, w + workers, ...``, each at its own offset from the common ``start_ns``. A session's turns stay
    in one process (they share its agents' conversations); each record is numbered by its turn's place in the trace
    (the sessions' turns in order), so the step's numbers are the same, and distinct, however many processes
    share it."""
    base = list(itertools.accumulate((len(s.turns) for s in workload.sessions), initial=0))

    def mine(record: RequestRecord) -> None:
        record.index = base[record.session or 0] + (record.turn or 0)
        on_record(record)

    return await run_agent_step(step, step_index, workload, client, mine, start_ns=start_ns,
                                numbers=range(w, len(workload.sessions), workers))


class _Session:
    """One session's turns, each a task that waits for its inputs, then its tool latency, then sends."""

    def __init__(self, workload: AgentWorkload, number: int, session: AgentSession, client: StreamClient,
                 step_index: int, counter: itertools.count[int], done: OnRecord) -> None:
        self.workload, self.number, self.session, self.client = workload, number, session, client
        self.step_index, self.counter, self.done = step_index, counter, done
        prefix = session.prefix
        opening = (Message("system", workload.prefix_text(prefix)),) if prefix is not None else ()
        self.history: dict[str, list[Message]] = {agent: list(opening) for agent in session.agents}
        self.finished: list[asyncio.Future[RequestRecord | None]] = []

    async def run(self, start_ns: int) -> None:
        """Wait for the session's start, then run its turns (each once what it waits for has ended)."""
        loop = asyncio.get_running_loop()
        self.finished = [loop.create_future() for _ in self.session.turns]
        await sleep_until(start_ns, DISPATCH_SPIN_NS)
        turns = [asyncio.create_task(self._turn(k, start_ns)) for k in range(len(self.session.turns))]
        try:
            await asyncio.gather(*turns)
        except asyncio.CancelledError:
            for task in turns:
                task.cancel()
            await asyncio.gather(*turns, return_exceptions=True)
            raise

    async def _turn(self, k: int, start_ns: int) -> None:
        turn = self.session.turns[k]
        waited = [await self.finished[i] for i in turn.after]
        if any(r is None or not r.ok for r in waited):
            self.finished[k].set_result(None)  # what it waits for failed: nothing to go on from
            return
        ready = max((r.end_ns for r in waited if r is not None), default=start_ns)
        due = ready + round(turn.tool_ms * 1e6)
        if turn.at_ms is not None:  # a fixed send time: not before it, nor before what it waits for
            due = max(due, start_ns + round(turn.at_ms * 1e6))
        await sleep_until(due, DISPATCH_SPIN_NS)
        joined = [r.output_text for i, r in zip(turn.after, waited, strict=True)
                  if r is not None and self.session.turns[i].agent != turn.agent]
        history = self.history[turn.agent]
        messages = turn_messages(self.workload, self.number, k, history, joined)
        # the turn's own answer length is the workload's, not a reference: it holds with --ignore-eos too
        prompt = Prompt(messages, chat_to_text(messages), None, turn.output_tokens, exact_length=True)
        record = RequestRecord(index=next(self.counter), step=self.step_index, due_ns=due, session=self.number,
                               turn=k, agent=turn.agent, ready_ns=ready)
        finished = await send_turn(self.client, prompt, record, self.done)
        if finished.ok:
            history.extend((messages[-1], Message("assistant", finished.output_text)))
        self.finished[k].set_result(finished)
