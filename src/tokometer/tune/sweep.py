"""The sweep of a tune: each variant started, timed, measured with the tune's workload, saved and stopped.

`run_tune` walks the variants of a `TuneRecord` in order, skipping those a resumed tune finished already
(`still_to_run`), and then runs the baseline once more (`TuneRecord.baseline_again`: A, B, C, A), so that the
answer knows how far the baseline moves between two runs of its own (`tokometer.tune.noise`). For each:
``launch`` starts the engine with its settings (`tokometer.tune.launch.start_variant` by default: the process
started to its first answer is the start-up time), ``run_workload`` runs the tune's workload against it
(`bench_workload`: one ``bench`` run saved in the store like any other, labelled ``tune NAME: VARIANT`` and
carrying the engine's exact command line), the engine's peak resident memory is read
(`tokometer.engines.peak_memory`), and the engine is stopped whole before the next one starts. The record is
saved in the store after every variant, so a cut tune keeps every finished variant.

What can go wrong is an outcome, not the end of the tune: a variant whose engine does not start is ``failed to
start`` with the engine's last words, one whose engine dies during its run is ``run failed``; the sweep goes on.
Ctrl-C (or SIGTERM) ends it: the variant in progress is ``interrupted`` (its run keeps what finished), the record
is saved, and `SweepEnd.interrupted` says so (the command exits 130, as ``bench`` does). A store that cannot take
the record ends it too, with `SweepEnd.store_error`.

After the variants, each finished variant that serves other weights than the baseline (another quantisation, model
file or dtype) is compared with the baseline by ``quality`` (`tokometer.tune.quality.quality_against_baseline`):
both engines up, the same evaluation prompts to each; its dict is the outcome's ``quality``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from tokometer.tune.outcome import BASELINE_AGAIN, TuneRecord, Variant, VariantOutcome, VariantStatus
from tokometer.util.errors import StoreError, TokometerError

if TYPE_CHECKING:
    from tokometer.benchmark.recorder import BenchObserver
    from tokometer.engines.handle import EngineHandle
    from tokometer.engines.peak_memory import GroupMemory
    from tokometer.store import ResultStore
    from tokometer.tune.launch import LaunchedVariant

__all__ = ["Launch", "Quality", "RunWorkload", "SweepEnd", "TuneObserver", "WorkloadRun", "bench_workload",
           "run_tune", "still_to_run", "tune_block"]

DONE_STATUSES = ("finished", "failed to start")
"""Outcomes a resumed tune keeps; a variant ``interrupted`` or whose run failed is tried again."""
_STATUS_OF_RUN: dict[str, VariantStatus] = {"completed": "finished", "interrupted": "interrupted"}
"""A variant's status from its run's (any other: ``run failed``)."""


@dataclass(frozen=True)
class WorkloadRun:
    """What one variant's workload gave: its run in the store and how the run ended."""

    run_id: int | None
    status: str
    """The run's status: ``completed``, ``interrupted`` or ``failed``."""
    error: str | None = None
    """Why it failed (one line), when it did."""


Launch = Callable[[Variant], "LaunchedVariant"]
"""Start the engine with a variant's settings, ready: `tokometer.tune.launch.start_variant` with the tune's
options; raises `tokometer.tune.launch.VariantStartFailed` when it does not come up (nothing left running)."""
RunWorkload = Callable[["LaunchedVariant", Variant], Coroutine[Any, Any, WorkloadRun]]
"""Run the tune's workload against a started variant (`bench_workload`)."""
Quality = Callable[["EngineHandle", "EngineHandle"], Mapping[str, Any]]
"""Compare the answers of the variant's engine (second) with the baseline's (first)."""


class TuneObserver(Protocol):
    """Hooks for what a user sees of the sweep (`tokometer.tune.progress`)."""

    def variant_started(self, variant: Variant, done: int, total: int) -> None:
        """``variant`` is starting; ``done`` of the ``total`` variants this sweep runs are behind it."""

    def variant_finished(self, outcome: VariantOutcome) -> None: ...

    def note(self, message: str) -> None:
        """One line worth saying (a step skipped, a quality check that could not run)."""


@dataclass(frozen=True)
class SweepEnd:
    """How a sweep ended: the record as saved, and what cut it short (nothing, Ctrl-C, the store)."""

    record: TuneRecord
    interrupted: bool = False
    store_error: str | None = None


class _Stop(Exception):
    """Ends the sweep: Ctrl-C, or the store could not save (``store_error``)."""

    def __init__(self, store_error: str | None = None) -> None:
        super().__init__(store_error or "interrupted")
        self.store_error = store_error


def still_to_run(record: TuneRecord) -> list[Variant]:
    """The variants of ``record`` a sweep (a resumed one too) still has to try, in order, and last the baseline
    again (`TuneRecord.again`) unless it has run."""
    todo = [v for v in record.variants if (o := record.outcome_of(v)) is None or o.status not in DONE_STATUSES]
    again = record.baseline_again
    if record.variants and (again is None or again.status not in DONE_STATUSES):
        todo.append(record.again())
    return todo


def run_tune(record: TuneRecord, *, launch: Launch, run_workload: RunWorkload, store: ResultStore | None,
             observer: TuneObserver, quality: Quality | None = None) -> SweepEnd:
    """Try every variant of ``record`` not finished yet, then the quality of those that change the weights;
    see the module docstring. The record is saved after every variant and at the end."""
    import uvloop

    state = _Sweep(record, store)
    todo = still_to_run(record)
    try:
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            for done, variant in enumerate(todo):
                observer.variant_started(variant, done, len(todo))
                outcome = _try_variant(variant, launch, lambda w: runner.run(w), run_workload)
                state.keep(outcome, again=variant.name == BASELINE_AGAIN)
                observer.variant_finished(outcome)
                if outcome.status == "interrupted":
                    raise _Stop()
        _quality_step(state, launch, quality, observer)
        state.finish()
    except (_Stop, KeyboardInterrupt) as stop:
        return state.stopped(stop.store_error if isinstance(stop, _Stop) else None)
    return SweepEnd(state.record)


class _Sweep:
    """The record as the sweep goes, saved after every change."""

    def __init__(self, record: TuneRecord, store: ResultStore | None) -> None:
        self.record = record
        self.store = store

    def keep(self, outcome: VariantOutcome, *, again: bool = False) -> None:
        """``outcome`` replaces its variant's (a resumed variant's earlier try), in the variants' order; with
        ``again``, it is the baseline's second run."""
        if again:
            self.record = dataclasses.replace(self.record, baseline_again=outcome)
            self.save()
            return
        others = [o for o in self.record.outcomes if o.variant.index != outcome.variant.index]
        ordered = tuple(sorted([*others, outcome], key=lambda o: o.variant.index))
        self.record = dataclasses.replace(self.record, outcomes=ordered)
        self.save()

    def save(self) -> None:
        if self.store is None:
            return
        try:
            self.store.save_tune(self.record)
        except StoreError as exc:
            raise _Stop(str(exc)) from None

    def finish(self) -> None:
        from tokometer.store.store import now_iso

        self.record = dataclasses.replace(self.record, finished_at=now_iso())
        self.save()

    def stopped(self, store_error: str | None) -> SweepEnd:
        """The end of a cut sweep: saved once more if the store still takes it."""
        if store_error is None:
            with contextlib.suppress(_Stop):
                self.save()
        return SweepEnd(self.record, interrupted=store_error is None, store_error=store_error)


def _try_variant(variant: Variant, launch: Launch, run: Callable[[Coroutine[Any, Any, WorkloadRun]], WorkloadRun],
                 run_workload: RunWorkload) -> VariantOutcome:
    """Start ``variant``, run the workload on it and stop it whole; what happened as its outcome."""
    from tokometer.tune.launch import VariantStartFailed

    try:
        launched = launch(variant)
    except VariantStartFailed as exc:
        return VariantOutcome(variant, "failed to start", command_line=tuple(exc.command_line),
                              engine_last_words=exc.last_words, error=_line(str(exc)))
    except KeyboardInterrupt:
        return VariantOutcome(variant, "interrupted", error="interrupted while the engine started")
    with launched.handle:
        try:
            ran = run(run_workload(launched, variant))
        except KeyboardInterrupt:
            ran = WorkloadRun(None, "interrupted")
        except TokometerError as exc:
            ran = WorkloadRun(None, "failed", _line(str(exc)))
        alive = launched.handle.alive()
        memory = _peak_memory(launched.handle)
        last_words = None if alive and ran.status != "failed" else _last_words(launched.handle)
    status = _STATUS_OF_RUN.get(ran.status, "run failed")
    return VariantOutcome(variant, status, run_id=ran.run_id, startup=launched.startup,
                          command_line=tuple(launched.command_line), engine_last_words=last_words,
                          error=ran.error if status == "run failed" else None,
                          peak_memory_bytes=memory.peak_bytes, peak_memory_note=memory.note)


def _peak_memory(handle: EngineHandle) -> GroupMemory:
    """The engine's peak resident memory as its run ends, before it is stopped (`group_peak_memory`)."""
    from tokometer.engines.peak_memory import GroupMemory, group_peak_memory

    if handle.process is None:
        return GroupMemory(None, 0, "no peak memory: the engine was not started by the tune")
    return group_peak_memory(handle.process.pid)


def _last_words(handle: EngineHandle, lines: int = 8) -> str | None:
    return handle.log_tail(lines).strip() or None


def _line(text: str) -> str:
    return " ".join(text.split())


def _quality_step(state: _Sweep, launch: Launch, quality: Quality | None, observer: TuneObserver) -> None:
    """For each finished variant that serves other weights: quality against the baseline, both engines up."""
    record = state.record
    wanted = [o for o in record.outcomes if o.status == "finished" and o.variant.changes_weights and o.quality is None]
    if not wanted:
        return
    if quality is None:
        observer.note("quality against the baseline skipped: it is not available in this build")
        return
    try:
        baseline = launch(record.baseline)
    except TokometerError as exc:
        observer.note(f"quality against the baseline skipped: the baseline did not start again ({_line(str(exc))})")
        return
    with baseline.handle:
        for outcome in wanted:
            state.keep(dataclasses.replace(outcome, quality=_quality_of(outcome.variant, baseline, launch, quality)))


def _quality_of(variant: Variant, baseline: LaunchedVariant, launch: Launch, quality: Quality) -> dict[str, Any]:
    """``quality`` of ``variant`` against the running baseline; what stopped it, as ``{"error": ...}``."""
    try:
        with launch(variant).handle as handle:
            return dict(quality(baseline.handle, handle))
    except TokometerError as exc:
        return {"error": _line(str(exc))}


def tune_block(record: TuneRecord, variant: Variant) -> dict[str, Any]:
    """What a variant's run carries of its tune, in its engine identity (``tune``)."""
    return {"name": record.name, "variant": variant.name, "index": variant.index, "settings": dict(variant.settings)}


def bench_workload(record: TuneRecord, *, store: ResultStore | None, observer: BenchObserver | None = None,
                   guard: Callable[[Coroutine[Any, Any, Any]], Coroutine[Any, Any, Any]] | None = None) -> RunWorkload:
    """The tune's workload as one ``bench`` run per variant: ``record.workload`` (`BenchSpec` fields) against the
    variant's engine, with the tune's seed, saved in ``store``; ``guard`` wraps the run (SIGTERM as Ctrl-C)."""

    async def run(launched: LaunchedVariant, variant: Variant) -> WorkloadRun:
        from tokometer.benchmark.run import run_benchmark

        spec = workload_spec(record, variant, url=launched.handle.openai_url, model=launched.handle.model)
        engine = {**launched.handle.identity, "argv": list(launched.command_line),
                  "tune": tune_block(record, variant), "startup_s": launched.startup.first_s,
                  "warm_startup_s": launched.startup.second_s}
        said: list[str] = []
        work = run_benchmark(spec, store=store, observer=observer, engine=engine,
                             engine_check=_engine_check(launched.handle, said))
        result = await (guard(work) if guard is not None else work)
        if result.status != "failed":
            return WorkloadRun(result.run_id, result.status)
        why = said[-1] if said else f"the run failed: 'tokometer runs --id {result.run_id}' shows its warnings"
        return WorkloadRun(result.run_id, result.status, _line(why))

    return run


def _engine_check(handle: EngineHandle, said: list[str]) -> Callable[[], str | None]:
    """`tokometer.benchmark.embedded.engine_check` of ``handle``, keeping what it says in ``said``."""
    from tokometer.benchmark.embedded import engine_check

    check = engine_check(handle)

    def checked() -> str | None:
        problem = check()
        if problem is not None:
            said.append(problem)
        return problem

    return checked


def workload_spec(record: TuneRecord, variant: Variant, *, url: str, model: str) -> Any:
    """The `BenchSpec` of ``variant``'s run: the tune's workload, against ``url``, with the tune's seed."""
    from tokometer.benchmark.spec import BenchSpec

    return BenchSpec(**{**record.workload, "url": url, "model": model, "seed": record.seed,
                        "label": f"tune {record.name}: {variant.name}"})
