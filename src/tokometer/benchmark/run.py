"""`run_benchmark`: the library call behind ``tokometer bench``.

Checks that the endpoint answers, makes the prompts, then runs each load step
in turn (on this event loop, in ``--workers`` processes, or on Ray actors across a
cluster with ``--ray``: `tokometer.benchmark.executors`), saving every finished request as it
completes and each step's summary as it ends (`tokometer.benchmark.recorder`). Ctrl-C (task
cancellation) ends the run early: what finished is kept, the step in progress is summarised as far
as it got, and the result is marked ``interrupted``. Where an embedded engine has died before the steps (its
tokenizer, model list or check request failed with it), the run fails naming the engine's exit and its last log
lines (`RunFailed`, exit 1), not what failed because of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Callable
from pathlib import Path
from time import perf_counter_ns
from typing import Any

from tokometer.benchmark.executors import StepExecutor, executor_for
from tokometer.benchmark.observation import RunObservation
from tokometer.benchmark.plan import PlannedStep, StepPlan, plan_for
from tokometer.benchmark.prepare import Prepared, prepare
from tokometer.benchmark.recorder import BenchObserver, open_recorder
from tokometer.benchmark.results import BenchResult, StepResult
from tokometer.benchmark.spec import BenchSpec
from tokometer.benchmark.step_warnings import step_warnings
from tokometer.benchmark.volume import step_cap
from tokometer.client.streamclient import Target, Timeouts
from tokometer.engines.identity import published_identity
from tokometer.gpu_count import gpu_count
from tokometer.load.cluster import RayLoad
from tokometer.load.probes import Prober, prober_for
from tokometer.load.runner import StepLimits, StepOutcome
from tokometer.load.share import WorkerSetup
from tokometer.metrics import SLO
from tokometer.metrics.probes import summarize_probes
from tokometer.protocols.common.base import GenerationParams
from tokometer.runs.finish import check_step_text, finish_step
from tokometer.store.runs import StoredStep
from tokometer.store.store import ResultStore, now_iso
from tokometer.util.errors import RunFailed, TokometerError
from tokometer.util.hostinfo import host_info

__all__ = ["BenchObserver", "BenchResult", "StepResult", "run_benchmark"]


async def run_benchmark(
    spec: BenchSpec,
    *,
    store: ResultStore | None = None,
    observer: BenchObserver | None = None,
    engine: dict[str, Any] | None = None,
    engine_check: Callable[[], str | None] | None = None,
) -> BenchResult:
    """Run ``spec`` against its endpoint; see the module docstring."""
    spec = spec.with_seed()  # a fresh seed unless one was given; the run records it
    if engine is None and spec.url:  # an engine `tokometer serve` runs on this host: the run keeps its identity
        engine = published_identity(spec.url)
    plan = plan_for(spec)
    try:
        prepared: Prepared = await prepare(spec, plan.expected_steps)
    except TokometerError as exc:  # the server's tokenizer, its model list, the check request: all need the engine
        if engine_check is not None and (dead := engine_check()) is not None:
            raise RunFailed(dead) from exc  # its exit and last log lines, not what failed because of it
        raise
    params = GenerationParams(model=prepared.model, max_tokens=spec.output_tokens, ignore_eos=spec.ignore_eos,
                              temperature=spec.temperature, seed=spec.seed_value, include_usage=spec.include_usage,
                              **spec.tool_params())
    timeouts = Timeouts(connect=spec.connect_timeout_s, idle=spec.idle_timeout_s, total=spec.request_timeout_s,
                        max_event_bytes=spec.max_event_bytes, max_response_bytes=spec.max_response_bytes or 0)
    target = Target(spec.url, spec.api_key, dict(spec.headers), spec.tls())
    tokenizer = _portable(spec.tokenizer) if prepared.local_tokenizer else None
    setup = WorkerSetup(target, spec.api, params, timeouts, tokenizer,
                        sessions=prepared.sessions is not None, agents=prepared.agents is not None)
    cluster = await RayLoad.connect(spec.ray, setup, spec.ray_actors) if spec.ray is not None else None
    try:
        return await _run_steps(spec, plan, prepared, setup, cluster, store, observer, engine, engine_check)
    finally:
        if cluster is not None:
            cluster.close()


async def _run_steps(spec: BenchSpec, plan: StepPlan, prepared: Prepared, setup: WorkerSetup, cluster: RayLoad | None,
                     store: ResultStore | None, observer: BenchObserver | None, engine: dict[str, Any] | None,
                     engine_check: Callable[[], str | None] | None) -> BenchResult:
    """The steps of `run_benchmark`, one after another on the executor ``spec`` asks for, until the plan ends."""
    # Sessions: the limits count sessions (`tokometer.load.sessions`); the display counts only time.
    # A closed loop given only a duration ends, too, once its records would outgrow memory (`step_cap`).
    counted = spec.requests if spec.requests is not None else step_cap(spec)
    limits = StepLimits(spec.sessions if spec.sessions is not None else counted, spec.duration_s, spec.warmup)
    shown = StepLimits(spec.requests, spec.duration_s, spec.warmup) if prepared.sessions is None else \
        StepLimits(None, spec.duration_s)
    started, host, source = now_iso(), host_info(), (prepared.sessions or prepared.source).name
    recorder = open_recorder(spec, prepared, store, observer, engine, started_at=started, host=host,
                             prompt_source=source)
    results: list[StepResult] = []
    warnings = list(prepared.warnings)
    status = "completed"
    count = prepared.tokenizer.count if prepared.local_tokenizer and prepared.tokenizer else None
    observation = await asyncio.to_thread(RunObservation.start, spec, warnings)
    gpus, _ = gpu_count(engine, spec.gpus)
    async with contextlib.AsyncExitStack() as stack:
        if observation is not None:
            stack.callback(observation.stop)
        stack.enter_context(recorder)  # a bug must not leave the saved run "running": it failed
        executor = executor_for(spec, prepared, setup, cluster, limits, recorder.request_done, count)
        stack.push_async_callback(executor.close)
        prober = prober_for(spec.probe_rate, setup)
        if prober is not None:
            stack.push_async_callback(prober.close)
        while (planned := plan.next_step(results)) is not None:
            index, step_at = len(results), now_iso()
            recorder.step_started(index, planned.load, planned.trial, planned.limits or shown, step_at)
            result, outcome = await _step(spec, planned, index, step_at, executor, observation, count, gpus, prober)
            results.append(result)
            recorder.step_finished(result)
            if problem := outcome.failure or (engine_check() if engine_check else None):
                warnings.append(problem)
                status = "failed"
                break
            if outcome.interrupted:
                status = "interrupted"
                break
    done = BenchResult.of(spec, recorder.run_id, status, started, now_iso(), results, model=prepared.model,
                          prompt_source=source, engine=engine, host=host, warnings=warnings)
    recorder.run_finished(status, done.run.finished_at, list(done.run.warnings))  # saved as bench --json writes it
    return done


async def _step(spec: BenchSpec, planned: PlannedStep, index: int, started_at: str, executor: StepExecutor,
                observation: RunObservation | None,
                count: Callable[[str], int] | None, gpus: int | None = None,
                prober: Prober | None = None) -> tuple[StepResult, StepOutcome]:
    """Run one planned step and make its result: summary, the server's account of it, warnings."""
    step = planned.load
    step_start = perf_counter_ns()
    work = executor.run(step, index, seed=spec.seed_value + index, limits=planned.limits)
    outcome, probes = await prober.beside(work, index, spec.seed_value + index) if prober else (await work, None)
    step_end = perf_counter_ns()
    summary = finish_step(outcome.records, slo=SLO(spec.slo_ttft_ms, spec.slo_tpot_ms, spec.slo_e2e_ms),
                          load=step, steady_tolerance=spec.steady_tolerance,
                          time_slice_s=planned.time_slice_s or spec.time_slice_s, gpus=gpus,
                          mix=spec.mix.model_dump() if spec.mix is not None else None)
    if prober is not None and probes is not None:
        summary.probe = summarize_probes(probes.records, prober.rate, skipped=probes.skipped)
    if observation is not None:
        await asyncio.to_thread(observation.close_window, step_start, step_end, summary.requests_completed)
    counter = functools.cache(count) if count is not None else None  # each text counted once, for this step
    check_step_text(summary, outcome.records, counter)
    seen = await asyncio.to_thread(observation.step, step_start, step_end, summary) if observation else None
    server = seen.server if seen is not None else None
    warnings = [*(seen.findings if seen is not None else ()),
                *step_warnings(step, summary, outcome.health, outcome.records, server=server,
                               check=summary.text_check, count=counter, shared_prefix=bool(spec.prefix_tokens))]
    saved = StoredStep(index, step, started_at, summary, outcome.health, outcome.interrupted, server,
                       tuple(seen.gpu or ()) if seen is not None else (), planned.trial)
    return StepResult(saved, outcome.records, tuple(warnings)), outcome


def _portable(tokenizer: str | None) -> str | None:
    """``--tokenizer`` as another process (a worker, a Ray actor in another directory) can load it: a local
    file or folder by its absolute path, anything else as given."""
    if tokenizer and Path(tokenizer).expanduser().exists():
        return str(Path(tokenizer).expanduser().resolve())
    return tokenizer
