"""`run_benchmark`: the library call behind ``tokometer bench``.

Checks that the endpoint answers, makes the prompts, then runs each load step
in turn (on this event loop, in ``--workers`` processes, or on Ray actors across a
cluster with ``--ray``), saving every finished request as it completes and each
step's summary as it ends. Ctrl-C (task cancellation) ends the run early: what finished is
kept, the step in progress is summarised as far as it got, and the result is
marked ``interrupted``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from time import perf_counter_ns
from typing import Any, Protocol

from tokometer.backends import create_backend
from tokometer.backends.client import StreamClient, Target, Timeouts
from tokometer.benchmark import findmax
from tokometer.benchmark.findmax import FindMax
from tokometer.benchmark.observation import RunObservation
from tokometer.benchmark.plan import StepPlan, plan_for
from tokometer.benchmark.prepare import Prepared, prepare
from tokometer.benchmark.spec import BenchSpec
from tokometer.datasets.base import Prompt
from tokometer.hostinfo import host_info
from tokometer.load.cluster import RayLoad
from tokometer.load.health import ClientHealth
from tokometer.load.profiles import LoadStep, load_entry
from tokometer.load.runner import StepLimits, run_step
from tokometer.load.sessions import run_session_step
from tokometer.load.share import WorkerSetup
from tokometer.load.workers import run_step_in_workers
from tokometer.metrics import SLO, StepSummary, summarize
from tokometer.metrics.textcheck import TextCheck, check_text
from tokometer.records import RequestRecord
from tokometer.store.store import ResultStore, now_iso
from tokometer.wire.base import GenerationParams

__all__ = ["BenchObserver", "BenchResult", "StepResult", "run_benchmark"]

_MISMATCH_LIMIT = 0.02


@dataclass(slots=True)
class StepResult:
    """One finished (or interrupted) load step."""

    index: int
    step: LoadStep
    summary: StepSummary
    health: ClientHealth
    interrupted: bool
    records: list[RequestRecord]
    warnings: list[str] = field(default_factory=list)
    server: dict[str, Any] | None = None
    """What the server did meanwhile (its /metrics, `tokometer.benchmark.observation`), if it was read."""
    gpu: list[dict[str, Any]] | None = None
    """Per GPU, what it did meanwhile, if it was read."""
    trial: int | None = None
    """Which pass of the sweep this was (1..N) with ``--repeat N``; None without."""

    @property
    def load_label(self) -> dict[str, Any]:
        return load_entry(self.step, self.trial)


@dataclass(slots=True)
class BenchResult:
    """A whole run, as saved and as reported."""

    spec: BenchSpec
    run_id: int | None
    status: str
    started_at: str
    finished_at: str
    steps: list[StepResult]
    model: str
    prompt_source: str
    engine: dict[str, Any] | None
    host: dict[str, Any]
    warnings: list[str]

    @property
    def failed_requests(self) -> int:
        return sum(s.summary.requests_failed for s in self.steps)

    def find_max(self) -> FindMax | None:
        """The answer of a ``--find-max`` run (None for a sweep), as `findmax.outcome` reads it from a saved run."""
        return findmax.outcome(self.spec.model_dump(mode="json"),
                               [(s.index, s.step, s.summary.to_json()) for s in self.steps])


class BenchObserver(Protocol):
    """Hooks for a live display; all are called on the event loop and must be quick."""

    def step_started(self, index: int, step: LoadStep, limits: StepLimits) -> None: ...

    def request_done(self, record: RequestRecord) -> None: ...

    def step_finished(self, result: StepResult) -> None: ...


class _NoObserver:
    def step_started(self, index: int, step: LoadStep, limits: StepLimits) -> None:
        pass

    def request_done(self, record: RequestRecord) -> None:
        pass

    def step_finished(self, result: StepResult) -> None:
        pass


CACHE_WARNING_SHARE = 0.10
"""Above this share of prompt tokens answered from the server's cache, a step is reported as not cold."""


def prompt_cache_warning(summary: StepSummary, server: dict[str, Any] | None) -> str | None:
    """A sentence when the server answered much of the step's prompts from its prompt cache."""
    rate, source = summary.prompt_cache_hit_rate, "the server's answers"
    if rate is None and server is not None and server.get("prefix_cache_hit_rate") is not None:
        rate, source = float(server["prefix_cache_hit_rate"]), "the server's /metrics"
    if rate is None or rate <= CACHE_WARNING_SHARE:
        return None
    return (f"{100 * rate:.0f}% of the prompt tokens came from the server's prompt cache ({source}): TTFT and "
            "prefill are faster than for new prompts. A repeated --seed, shared prefixes in the dataset or an "
            "earlier run's prompts do this; compare only runs with the same cache-hit rate")


def _rejected_numbers_warning(summary: StepSummary) -> str:
    """A sentence when some of the server's counts were not believed (`tokometer.wire.numbers`)."""
    return (f"the server's numbers were not believed for {summary.server_numbers_rejected} request(s), for "
            f"example {summary.server_numbers_example}: their counts came from the next source down (the "
            "tokenizer, the engine's counters or the events received; see output_tokens.source)")


def _token_mismatch(records: list[RequestRecord], count: Callable[[str], int], check: TextCheck | None) -> str | None:
    server = local = 0
    short = {s.index for s in check.short} if check is not None else set()  # text lost on the way: warned of apart
    for r in records:
        # an answer with reasoning sent in a field of its own has less text than tokens: not comparable
        if r.ok and r.output_text and r.output_tokens_source in ("usage", "native") and r.output_tokens \
                and not r.reasoning_tokens and r.index not in short:
            server += r.output_tokens
            local += count(r.output_text)
    if server and abs(local - server) / server > _MISMATCH_LIMIT:
        return (f"the server counted {server} output tokens but the tokenizer counts {local} "
                f"({100 * (local - server) / server:+.1f}%): is the tokenizer the model's own?")
    return None


async def run_benchmark(
    spec: BenchSpec,
    *,
    store: ResultStore | None = None,
    observer: BenchObserver | None = None,
    engine: dict[str, Any] | None = None,
    engine_check: Callable[[], str | None] | None = None,
) -> BenchResult:
    """Run ``spec`` against its endpoint; see the module docstring."""
    obs: BenchObserver = observer or _NoObserver()
    spec = spec.with_seed()  # a fresh seed unless one was given; the run records it
    plan = plan_for(spec)
    prepared: Prepared = await prepare(spec, plan.expected_steps)
    params = GenerationParams(model=prepared.model, max_tokens=spec.output_tokens, ignore_eos=spec.ignore_eos,
                              temperature=spec.temperature, seed=spec.seed_value, include_usage=spec.include_usage)
    timeouts = Timeouts(connect=spec.connect_timeout_s, idle=spec.idle_timeout_s, total=spec.request_timeout_s,
                        max_event_bytes=spec.max_event_bytes)
    target = Target(spec.url, spec.api_key, dict(spec.headers), spec.tls())
    tokenizer = _portable(spec.tokenizer) if prepared.local_tokenizer else None
    setup = WorkerSetup(target, spec.api, params, timeouts, tokenizer,
                        sessions=prepared.sessions is not None)
    cluster = await RayLoad.connect(spec.ray, setup, spec.ray_actors) if spec.ray is not None else None
    try:
        return await _run_steps(spec, plan, prepared, setup, cluster, store, obs, engine, engine_check)
    finally:
        if cluster is not None:
            cluster.close()


async def _run_steps(spec: BenchSpec, plan: StepPlan, prepared: Prepared, setup: WorkerSetup, cluster: RayLoad | None,
                     store: ResultStore | None, obs: BenchObserver, engine: dict[str, Any] | None,
                     engine_check: Callable[[], str | None] | None) -> BenchResult:
    """The steps of `run_benchmark`, each on this event loop, in worker processes, or on the Ray ``cluster``."""
    workers = min(spec.workers, os.cpu_count() or 1)  # prepare() warned when this cut it
    slo = SLO(spec.slo_ttft_ms, spec.slo_tpot_ms, spec.slo_e2e_ms)
    # Sessions: the limits count sessions (`tokometer.load.sessions`).
    limits = StepLimits(spec.sessions if spec.sessions is not None else spec.requests, spec.duration_s, spec.warmup)
    started = now_iso()
    run_id = None
    if store is not None:
        run_id = store.create_run(target=spec.url, api=spec.api, model=prepared.model,
                                  spec=spec.model_dump(mode="json"), engine=engine, host=host_info(),
                                  label=spec.label)
    results: list[StepResult] = []
    warnings = list(prepared.warnings)
    status = "completed"
    count = prepared.tokenizer.count if prepared.local_tokenizer and prepared.tokenizer else None

    def on_record(record: RequestRecord) -> None:
        if store is not None and run_id is not None:
            store.append(run_id, record)
        obs.request_done(record)

    prompts: Iterator[Prompt] = prepared.source.prompts()  # continues from step to step
    scripts = prepared.sessions.scripts() if prepared.sessions is not None else None  # likewise
    used = 0
    observation = await asyncio.to_thread(RunObservation.start, spec, warnings)
    async with contextlib.AsyncExitStack() as stack:
        if observation is not None:
            stack.callback(observation.stop)
        if store is not None and run_id is not None:  # a bug must not leave the run "running": it failed
            stack.push(lambda kind, exc, tb: _failed(store, run_id) if isinstance(exc, Exception) else None)
        client = await stack.enter_async_context(StreamClient(setup.target, create_backend(spec.api), setup.params,
                                                              setup.timeouts, count_tokens=count))
        while (planned := plan.next_step(results)) is not None:
            index, step = len(results), planned.load
            if store is not None and run_id is not None:
                store.start_step(run_id, index, load_entry(step, planned.trial))
            obs.step_started(index, step, limits if prepared.sessions is None else StepLimits(None, spec.duration_s))
            step_start = perf_counter_ns()
            seed = spec.seed_value + index
            if step.mode == "trace":
                used, prompts = 0, prepared.source.prompts()  # every trial replays the trace from its start
            if cluster is not None or workers > 1:
                items = (prepared.session_list(limits, used) if prepared.sessions is not None
                         else prepared.prompt_list(limits, used))
                outcome = (await cluster.run_step(step, index, limits, items, on_record, seed=seed)
                           if cluster is not None else
                           await run_step_in_workers(step, index, limits, items, setup, workers, on_record, seed=seed))
            elif scripts is not None:
                outcome = await run_session_step(step, index, limits, scripts, client, on_record, seed=seed)
            else:
                outcome = await run_step(step, index, limits, prompts, client, on_record, seed=seed)
            step_end = perf_counter_ns()
            used += len({r.session for r in outcome.records}) if scripts is not None else len(outcome.records)
            result = StepResult(index, step, summarize(outcome.records, slo), outcome.health, outcome.interrupted,
                                outcome.records, trial=planned.trial)
            if observation is not None:
                seen = await asyncio.to_thread(observation.step, step_start, step_end, result.summary)
                result.server, result.gpu = seen.server, seen.gpu
                result.warnings.extend(seen.findings)
            if result.summary.server_numbers_rejected:
                result.warnings.append(_rejected_numbers_warning(result.summary))
            counter = functools.cache(count) if count is not None else None  # each text counted once, for this step
            result.summary.text_check = check = check_text(outcome.records, counter)
            if check is not None and (short := check.warning()):
                result.warnings.append(short)
            if counter is not None and (mismatch := _token_mismatch(outcome.records, counter, check)):
                result.warnings.append(mismatch)
            # shared prefixes (--prefix-tokens), sessions' histories and a trace's shared blocks are there to be
            # cached: their effect is reported, not warned of
            if not spec.prefix_tokens and not step.sessions and step.mode != "trace" and (
                    warm := prompt_cache_warning(result.summary, result.server)):
                result.warnings.append(warm)
            if outcome.health.saturated:
                result.warnings.append(outcome.health.verdict)
            if outcome.health.note:
                result.warnings.append(outcome.health.note)
            results.append(result)
            if store is not None and run_id is not None:
                store.finish_step(run_id, index, result.summary.to_json(), outcome.health.to_json(),
                                  outcome.interrupted, server=result.server, gpu=result.gpu)
            obs.step_finished(result)
            problem = outcome.failure or (engine_check() if engine_check else None)
            if problem:
                warnings.append(problem)
                status = "failed"
                break
            if outcome.interrupted:
                status = "interrupted"
                break
    if store is not None and run_id is not None:
        store.finish_run(run_id, status)
    return BenchResult(spec=spec, run_id=run_id, status=status, started_at=started, finished_at=now_iso(),
                       steps=results, model=prepared.model, prompt_source=(prepared.sessions or prepared.source).name,
                       engine=engine, host=host_info(), warnings=warnings)


def _failed(store: ResultStore, run_id: int) -> None:
    with contextlib.suppress(Exception):
        store.finish_run(run_id, "failed")


def _portable(tokenizer: str | None) -> str | None:
    """``--tokenizer`` as another process (a worker, a Ray actor in another directory) can load it: a local
    file or folder by its absolute path, anything else as given."""
    if tokenizer and Path(tokenizer).expanduser().exists():
        return str(Path(tokenizer).expanduser().resolve())
    return tokenizer
