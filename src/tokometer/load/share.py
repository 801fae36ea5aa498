"""One load step shared out between N load generators: worker processes (`workers`) or Ray actors (`ray_actor`).

Generator ``w`` of ``N`` runs `run_share`: its share of the step on its own event loop with a client of its
own. A rate ``r`` is split into ``r / N`` per generator (N independent Poisson streams add up to one Poisson
stream at ``r``; gamma streams add up to a smoother one, and constant ones are phase-shifted to interleave),
requests and warm-up requests evenly, and generator ``w``'s request ``i`` is the step's request
``i * N + w``; a trace's requests are dealt out the same way, each at its own time. A closed loop's ``c``
slots are split into near-equal counts over ``min(N, c)`` generators (the rest sit the step out), and the
step's request ``g`` belongs to slot ``g mod c``: a generator sends requests in proportion to its slots, so
all finish together (`Share.index`). Multi-turn sessions (`WorkerSetup.sessions`) are numbered the same
way, each generator running whole sessions; agent sessions (`WorkerSetup.agents`) are dealt out whole, each at
its own time (`tokometer.load.agentic.run_agent_share`). Either way the step's numbers run 0, 1, 2, ... with no gap
and its first ones are the warm-up, as in one process.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from dataclasses import dataclass, replace

from tokometer.client.streamclient import StreamClient, Target, Timeouts
from tokometer.datasets.agentic_workload import AgentWorkload
from tokometer.datasets.conversations import SessionScript
from tokometer.load.profiles import LoadStep
from tokometer.load.runner import StepLimits, StepOutcome, run_step
from tokometer.load.selfcheck import ClientHealth
from tokometer.prompt import Prompt
from tokometer.protocols.common.base import GenerationParams
from tokometer.protocols.registry import create_client
from tokometer.records import RequestRecord
from tokometer.util.clock import sleep_until

__all__ = ["Items", "Share", "WorkerSetup", "make_client", "run_share", "share", "split_evenly",
           "stopped_before_start"]


Items = list[Prompt] | list[SessionScript] | AgentWorkload
"""A step's prompts, or its sessions (`WorkerSetup.sessions`), or its agent sessions (`WorkerSetup.agents`)."""


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
    agents: bool = False
    """The step's items are agent sessions (an `AgentWorkload`), run by `tokometer.load.agentic`."""


def split_evenly(total: int, parts: int, index: int) -> int:
    """Part ``index`` of ``total`` split into ``parts`` near-equal whole shares."""
    return total // parts + (1 if index < total % parts else 0)


@dataclass(frozen=True, slots=True)
class Share:
    """Generator ``w``'s part of a step: its step and limits, its phase (ns) for constant-rate interleaving,
    and where its requests fall in the step's own numbering (`index`)."""

    step: LoadStep
    limits: StepLimits
    phase_ns: int
    generators: int
    """How many generators take part: all of them, but at most one per slot of a closed loop."""
    w: int
    concurrency: int = 0
    """A closed loop's slots in all (0: an open loop)."""
    first_slot: int = 0
    slots: int = 0
    """A closed loop's slots ``first_slot .. first_slot + slots - 1`` are this generator's (0: it sits out)."""

    @property
    def idle(self) -> bool:
        """A closed loop with fewer slots than generators leaves this one nothing to send."""
        return self.concurrency > 0 and self.slots == 0

    def index(self, i: int) -> int:
        """The step's number for this generator's ``i``-th request.

        Open loops deal requests in turn (``i * N + w``). A closed loop's slots are numbered across the
        generators and the step's request ``g`` belongs to slot ``g mod c``, so a generator with twice the
        slots sends twice the requests and the numbers still run 0, 1, 2, ... with no gap.
        """
        if not self.concurrency:
            return i * self.generators + self.w
        rounds, j = divmod(i, self.slots)
        return rounds * self.concurrency + self.first_slot + j


def _closed_count(total: int, c: int, first: int, slots: int) -> int:
    """How many of the step's numbers ``0 .. total - 1`` fall on slots ``first .. first + slots - 1`` of ``c``."""
    rounds, rest = divmod(total, c)
    return rounds * slots + max(0, min(rest - first, slots))


def share(step: LoadStep, limits: StepLimits, workers: int, w: int) -> Share:
    """Generator ``w`` of ``workers``: its part of ``step`` (see `Share`).

    Requests and warm-up requests are counted together, so that each generator's first ones are exactly
    the step's warm-up; an open loop splits them evenly, a closed loop in proportion to its slots.
    """
    total = None if limits.requests is None else limits.requests + limits.warmup
    if step.open_loop:
        cap = None
        if step.max_concurrency is not None:  # a cap below the generator count holds as 1 each
            cap = max(1, split_evenly(step.max_concurrency, workers, w))
        warmup = split_evenly(limits.warmup, workers, w)
        requests = None if total is None else split_evenly(total, workers, w) - warmup
        mine = StepLimits(requests, limits.duration_s, warmup)
        if step.mode == "trace":
            return Share(replace(step, offsets=step.offsets[w::workers], max_concurrency=cap), mine, 0, workers, w)
        assert step.rate is not None
        phase = int(w * 1e9 / step.rate) if step.arrival == "constant" else 0
        return Share(replace(step, rate=step.rate / workers, max_concurrency=cap), mine, phase, workers, w)
    c = step.concurrency if step.mode == "concurrency" else 1
    generators = min(workers, c)
    slots = split_evenly(c, generators, w) if w < generators else 0
    first = sum(split_evenly(c, generators, k) for k in range(min(w, generators)))
    warmup = _closed_count(limits.warmup, c, first, slots)
    requests = None if total is None else _closed_count(total, c, first, slots) - warmup
    return Share(replace(step, mode="concurrency", concurrency=max(1, slots)),
                 StepLimits(requests, limits.duration_s, warmup), 0, generators, w, c, first, slots)


def stopped_before_start() -> StepOutcome:
    """The outcome of a generator told to stop before its share began: nothing sent, interrupted."""
    return StepOutcome([], ClientHealth(0.0, 0.0, 0.0, None), interrupted=True)


def make_client(setup: WorkerSetup) -> StreamClient:
    """A client of the generator's own, on the running event loop, counting tokens as the run's does."""
    count = None
    if setup.tokenizer_path:  # whatever --tokenizer named: bundled, a .gguf, tokenizer.json, tiktoken:, an id
        from tokometer.tokens.loader import load_tokenizer

        count = load_tokenizer(setup.tokenizer_path).count
    return StreamClient(setup.target, create_client(setup.api), setup.params, setup.timeouts, count)


async def run_share(setup: WorkerSetup, client: StreamClient, step: LoadStep, step_index: int, limits: StepLimits,
                    items: Items, seed: int, workers: int, w: int, start_ns: int,
                    on_record: Callable[[RequestRecord], None]) -> StepOutcome:
    """Run generator ``w``'s share of ``step`` with ``client``; each record, renumbered, goes to ``on_record``.

    ``start_ns`` is the common start moment on this generator's own clock: an open loop's schedule starts
    there, a closed loop waits for it, so that all the generators begin together.
    """
    part = share(step, limits, workers, w)

    def mine(record: RequestRecord) -> None:
        record.index = part.index(record.index)
        if record.session is not None:
            record.session = part.index(record.session)
        on_record(record)

    start = start_ns + part.phase_ns if step.open_loop else None
    if start is None:
        try:
            await sleep_until(start_ns)
        except asyncio.CancelledError:
            if (current := asyncio.current_task()) is not None:
                current.uncancel()
            return stopped_before_start()
    if part.idle:
        return StepOutcome([], ClientHealth(0.0, 0.0, 0.0, None))
    if isinstance(items, AgentWorkload):  # whole agent sessions, dealt out in turn
        from tokometer.load.agentic import run_agent_share

        return await run_agent_share(items, step, step_index, client, on_record, workers, w, start_ns)
    if setup.sessions:
        from tokometer.load.sessions import run_session_step

        sessions = [s for s in items if isinstance(s, SessionScript)]
        scripts = (sessions[part.index(i) % len(sessions)] for i in itertools.count())
        return await run_session_step(part.step, step_index, part.limits, scripts, client, mine, seed * 1000 + w,
                                      start_ns=start)
    prompts = [p for p in items if isinstance(p, Prompt)]
    stream = (prompts[part.index(i) % len(prompts)] for i in itertools.count())
    return await run_step(part.step, step_index, part.limits, stream, client, mine, seed * 1000 + w, start_ns=start)
