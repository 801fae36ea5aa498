"""Run one load step of multi-turn chat sessions: each turn sends the whole conversation so far.

A session is a `SessionScript` (the user's messages and think times, `tokometer.datasets.conversations`).
Its first turn is due when the load profile says (a slot frees in a closed loop, the schedule's time in an
open loop); every later turn is due when the previous answer ended plus the user's think time, and sends
the history with the model's real answer appended (``output_text``: what the server streamed). So the
prompt grows turn by turn, as a chat client's does, and a server with a prefix cache can reuse the
history's KV; the per-turn TTFT shows whether it did.

The load profile counts sessions: ``concurrency`` is the number of live sessions (a session holds its slot
through its think times), ``rate`` the number of new sessions a second, ``--max-concurrency`` caps live
sessions, and the step's limits count sessions (``requests``: sessions, ``warmup``: warm-up sessions, whose
requests are all marked warm-up). After ``duration`` no session starts and no further turn is sent.

A failed turn ends its session (there is no answer to continue from). Each record carries its ``session``
(numbered within the step) and ``turn`` (from 0).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Awaitable, Callable, Iterator
from time import perf_counter_ns

from tokometer.client.streamclient import StreamClient
from tokometer.datasets.conversations import SessionScript
from tokometer.datasets.mix import mark_prompt
from tokometer.load.profiles import LoadStep
from tokometer.load.runner import (
    DISPATCH_SPIN_NS,
    START_LEAD_NS,
    Issuer,
    StepLimits,
    StepOutcome,
    dispatch,
    guarded,
    step_offsets,
)
from tokometer.load.selfcheck import LoopMonitor
from tokometer.prompt import Message, Prompt, chat_to_text
from tokometer.records import RequestRecord
from tokometer.util.clock import sleep_until

__all__ = ["run_session_step", "send_turn"]

OnRecordType = Callable[[RequestRecord], None]
SessionRunner = Callable[[int, SessionScript, int], Awaitable[None]]


async def run_session_step(
    step: LoadStep,
    step_index: int,
    limits: StepLimits,
    scripts: Iterator[SessionScript],
    client: StreamClient,
    on_record: OnRecordType,
    seed: int = 0,
    start_ns: int | None = None,
) -> StepOutcome:
    """Run one step of sessions; returns when every session has ended (or on cancellation)."""
    records: list[RequestRecord] = []
    issuer: Issuer[SessionScript] = Issuer(scripts, limits)
    counter = itertools.count()
    monitor = LoopMonitor()
    tasks: set[asyncio.Task[None]] = set()

    def done(record: RequestRecord) -> None:
        records.append(record)
        on_record(record)

    async def session(number: int, script: SessionScript, due_ns: int) -> None:
        history: list[Message] = list(script.system)
        warmup = number < limits.warmup
        for k, turn in enumerate(script.turns):
            if k:
                if issuer.expired(due_ns):
                    return
                await sleep_until(due_ns, DISPATCH_SPIN_NS)
            history.append(Message("user", turn.user))
            messages = tuple(history)
            prompt = Prompt(messages, chat_to_text(messages), None, turn.max_tokens)
            if script.tenant is not None:  # a mix's session: its tenant's model, headers and answer length
                prompt = mark_prompt(script.tenant, prompt)
            record = RequestRecord(index=next(counter), step=step_index, warmup=warmup, due_ns=due_ns,
                                   session=number, turn=k)
            if k == 0 and not script.system and turn.input_tokens is not None:
                record.input_tokens, record.input_tokens_source = turn.input_tokens, "prompt_spec"
            finished = await send_turn(client, prompt, record, done)
            if not finished.ok:
                return
            history.append(Message("assistant", finished.output_text))
            due_ns = finished.end_ns + round(turn_think_ns(script, k + 1))

    loop = (_open_loop(step, limits, issuer, session, tasks, seed, start_ns) if step.open_loop
            else _closed_loop(step.concurrency if step.mode == "concurrency" else 1, issuer, session, tasks))
    interrupted = await guarded(loop, tasks, client, monitor)
    health = monitor.health(step, records)
    records.sort(key=lambda r: r.index)
    return StepOutcome(records, health, interrupted)


def turn_think_ns(script: SessionScript, k: int) -> float:
    """The think time before turn ``k`` of ``script``, in ns (0 past its last turn)."""
    return script.turns[k].think_s * 1e9 if k < len(script.turns) else 0.0


async def send_turn(client: StreamClient, prompt: Prompt, record: RequestRecord,
                done: OnRecordType) -> RequestRecord:
    """Send one turn and wait for its parsed record; the record reaches ``done`` even when the wait is
    cancelled (the client finishes it in the background, and the step drains the client before it ends)."""
    finished: asyncio.Future[RequestRecord] = asyncio.get_running_loop().create_future()

    def finish(r: RequestRecord) -> None:
        done(r)
        if not finished.done():
            finished.set_result(r)

    await client.send(prompt, record, on_done=finish)
    return await finished


async def _closed_loop(concurrency: int, issuer: Issuer[SessionScript], session: SessionRunner,
                       tasks: set[asyncio.Task[None]]) -> None:
    issuer.start(perf_counter_ns())

    async def slot() -> None:
        while True:
            due = perf_counter_ns()
            item = issuer.take(due)
            if item is None:
                return
            await session(item[0], item[1], due)

    for _ in range(concurrency):
        tasks.add(asyncio.create_task(slot()))
    await asyncio.gather(*tasks)


async def _open_loop(step: LoadStep, limits: StepLimits, issuer: Issuer[SessionScript], session: SessionRunner,
                     tasks: set[asyncio.Task[None]], seed: int, start_ns: int | None) -> None:
    offsets = step_offsets(step, limits, seed)
    start = start_ns if start_ns is not None else perf_counter_ns() + START_LEAD_NS
    issuer.start(start)
    await dispatch(offsets, start, issuer, session, tasks, step.max_concurrency)
