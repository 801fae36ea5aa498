"""The sweep's loop: order, saving after every variant, failed starts, Ctrl-C, resume, a store that fails, quality.

The launcher and the workload are in-process stand-ins here (the loop's decisions are what is tested; an engine
that refuses to start on cue, a Ctrl-C at an exact variant, a store failing at an exact save are not things a real
server produces on demand); the store is a real SQLite one. The same sweep against real servers on loopback is
tests/integration/test_tune_sweep.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from tokometer.store import ResultStore
from tokometer.tune.launch import LaunchedVariant, VariantStartFailed
from tokometer.tune.outcome import Startup, TuneRecord, Variant, VariantOutcome
from tokometer.tune.saved import load_tune
from tokometer.tune.sweep import WorkloadRun, run_tune, still_to_run
from tokometer.tune.variants import parse_vary, plan_variants
from tokometer.util.errors import StoreError


class _Handle:
    """Stands for a started engine: its URL, whether it lives, its log, its stop."""

    def __init__(self, variant: Variant) -> None:
        self.variant = variant
        self.openai_url = f"http://127.0.0.1:1/{variant.index}/v1"
        self.model = "m"
        self.identity: dict[str, Any] = {"engine": "stand-in", "argv": ["engine", variant.name]}
        self.stopped = False
        self.dead = False
        self.process = None  # not a process of ours: no peak memory to read

    def alive(self) -> bool:
        return not self.dead

    def log_tail(self, lines: int = 20) -> str:
        return "last line of the log"

    def stop(self) -> None:
        self.stopped = True

    def __enter__(self) -> _Handle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _Engines:
    """A launcher: records what it started; a variant named in ``refuse`` does not start."""

    def __init__(self, refuse: tuple[str, ...] = ()) -> None:
        self.refuse = refuse
        self.started: list[str] = []
        self.handles: list[_Handle] = []

    def __call__(self, variant: Variant) -> LaunchedVariant:
        self.started.append(variant.name)
        if variant.name in self.refuse:
            raise VariantStartFailed(f"variant {variant.name} did not start: it exited", "error: unknown flag",
                                     ("engine", "--bad"))
        handle = _Handle(variant)
        self.handles.append(handle)
        return LaunchedVariant(handle, Startup(1.0 + variant.index, 0.5), ("engine", variant.name))  # type: ignore[arg-type]


class _Workload:
    """The workload: a run id per variant; ``interrupt`` (a variant's name) is Ctrl-C there, ``die`` an engine
    that dies during the run."""

    def __init__(self, interrupt: str | None = None, die: str | None = None) -> None:
        self.interrupt, self.die = interrupt, die
        self.ran: list[str] = []

    async def __call__(self, launched: LaunchedVariant, variant: Variant) -> WorkloadRun:
        self.ran.append(variant.name)
        if variant.name == self.interrupt:
            raise KeyboardInterrupt
        if variant.name == self.die:
            launched.handle.dead = True  # type: ignore[attr-defined]
            return WorkloadRun(100 + variant.index, "failed", "the engine exited during the run")
        return WorkloadRun(100 + variant.index, "completed")


class _Seen:
    """The observer: what it was told, and the tune as the store held it when each variant finished."""

    def __init__(self, store: ResultStore | None = None, name: str = "t") -> None:
        self.store, self.name = store, name
        self.events: list[str] = []
        self.saved_outcomes: list[int] = []

    def variant_started(self, variant: Variant, done: int, total: int) -> None:
        self.events.append(f"start {variant.name} {done}/{total}")

    def variant_finished(self, outcome: VariantOutcome) -> None:
        self.events.append(f"end {outcome.variant.name} {outcome.status}")
        if self.store is not None:
            saved = load_tune(self.store, self.name)
            self.saved_outcomes.append(len(saved.outcomes) if saved else 0)

    def note(self, message: str) -> None:
        self.events.append(f"note {message}")


def _record(vary: str = "parallel=2,4,8", name: str = "t") -> TuneRecord:
    variants = plan_variants({"parallel": "1"}, vary=parse_vary([vary]))
    return TuneRecord(name, "llamacpp", "f", 7, {"requests": 4}, variants)


@pytest.fixture
def store(tmp_path: Path) -> Any:
    opened = ResultStore(f"sqlite:///{tmp_path / 'runs.db'}")
    yield opened
    opened.close()


def test_each_variant_in_order_stopped_whole_and_saved_after_each(store: ResultStore) -> None:
    engines, workload, seen = _Engines(), _Workload(), _Seen(store)
    end = run_tune(_record(), launch=engines, run_workload=workload, store=store, observer=seen)
    assert engines.started == workload.ran == ["baseline", "parallel=2", "parallel=4", "parallel=8", "baseline again"]
    assert all(h.stopped for h in engines.handles)
    assert seen.saved_outcomes == [1, 2, 3, 4, 4]  # saved before the next variant starts
    again = end.record.baseline_again
    assert again is not None and (again.status, again.variant.settings) == ("finished", {"parallel": "1"})
    assert not end.interrupted and end.store_error is None and end.record.finished_at
    assert [(o.status, o.run_id, o.startup) for o in end.record.outcomes] == [
        ("finished", 100 + i, Startup(1.0 + i, 0.5)) for i in range(4)]
    assert load_tune(store, "t") == end.record


def test_a_variant_that_does_not_start_is_a_row_and_the_sweep_goes_on(store: ResultStore) -> None:
    engines, workload = _Engines(refuse=("parallel=4",)), _Workload()
    end = run_tune(_record(), launch=engines, run_workload=workload, store=store, observer=_Seen())
    assert workload.ran == ["baseline", "parallel=2", "parallel=8", "baseline again"]
    failed = end.record.outcomes[2]
    assert (failed.status, failed.run_id, failed.engine_last_words, failed.command_line) == \
        ("failed to start", None, "error: unknown flag", ("engine", "--bad"))
    assert "did not start" in (failed.error or "")


def test_an_engine_that_dies_in_its_run_is_run_failed_with_its_last_words(store: ResultStore) -> None:
    end = run_tune(_record(), launch=_Engines(), run_workload=_Workload(die="parallel=2"), store=store,
                   observer=_Seen())
    died = end.record.outcomes[1]
    assert (died.status, died.run_id, died.engine_last_words) == ("run failed", 101, "last line of the log")
    assert died.error == "the engine exited during the run" and end.record.outcomes[2].status == "finished"


def test_ctrl_c_keeps_what_finished_and_a_resume_runs_only_the_rest_in_order(store: ResultStore) -> None:
    engines = _Engines()
    end = run_tune(_record(), launch=engines, run_workload=_Workload(interrupt="parallel=4"), store=store,
                   observer=_Seen())
    assert end.interrupted and engines.started == ["baseline", "parallel=2", "parallel=4"]
    assert all(h.stopped for h in engines.handles)
    saved = load_tune(store, "t")
    assert saved is not None and [o.status for o in saved.outcomes] == ["finished", "finished", "interrupted"]
    assert saved.finished_at is None
    assert [v.name for v in still_to_run(saved)] == ["parallel=4", "parallel=8", "baseline again"]
    again_engines, again = _Engines(), _Workload()
    resumed = run_tune(saved, launch=again_engines, run_workload=again, store=store, observer=_Seen())
    assert again_engines.started == again.ran == ["parallel=4", "parallel=8", "baseline again"]
    assert still_to_run(resumed.record) == []
    assert [o.status for o in resumed.record.outcomes] == ["finished"] * 4
    assert [o.run_id for o in resumed.record.outcomes] == [100, 101, 102, 103]  # the first two are the first runs'
    assert resumed.record.seed == 7 and load_tune(store, "t") == resumed.record


def test_ctrl_c_while_an_engine_starts_ends_the_sweep_there(store: ResultStore) -> None:
    class _Interrupted(_Engines):
        def __call__(self, variant: Variant) -> LaunchedVariant:
            if variant.index == 1:
                raise KeyboardInterrupt
            return super().__call__(variant)

    end = run_tune(_record(), launch=_Interrupted(), run_workload=_Workload(), store=store, observer=_Seen())
    assert end.interrupted and [o.status for o in end.record.outcomes] == ["finished", "interrupted"]


def test_a_store_that_cannot_save_ends_the_sweep_with_its_error(store: ResultStore) -> None:
    class _Full:
        saves = 0

        def save_tune(self, record: TuneRecord) -> None:
            self.saves += 1
            if self.saves == 2:
                raise StoreError("writing to the results store failed: disk full")

    engines = _Engines()
    end = run_tune(_record(), launch=engines, run_workload=_Workload(), store=_Full(),  # type: ignore[arg-type]
                   observer=_Seen())
    assert end.store_error == "writing to the results store failed: disk full" and not end.interrupted
    assert engines.started == ["baseline", "parallel=2"] and all(h.stopped for h in engines.handles)
    assert len(end.record.outcomes) == 2  # kept, for --json


def test_a_variant_that_changes_the_weights_gets_quality_against_the_baseline(store: ResultStore) -> None:
    calls: list[tuple[str, str]] = []

    def quality(baseline: Any, variant: Any) -> Mapping[str, Any]:
        calls.append((baseline.variant.name, variant.variant.name))
        assert not baseline.stopped and not variant.stopped  # both up
        return {"agreement": 0.9}

    engines = _Engines()
    end = run_tune(_record("quantization=Q8_0,Q2_K"), launch=engines, run_workload=_Workload(), store=store,
                   observer=_Seen(), quality=quality)
    assert calls == [("baseline", "quantization=Q8_0"), ("baseline", "quantization=Q2_K")]
    assert [o.quality for o in end.record.outcomes] == [None, {"agreement": 0.9}, {"agreement": 0.9}]
    assert engines.started[3:] == ["baseline again", "baseline", "quantization=Q8_0", "quantization=Q2_K"]
    assert all(h.stopped for h in engines.handles)
    assert load_tune(store, "t") == end.record


def test_without_a_quality_check_it_is_said_and_the_tune_ends(store: ResultStore) -> None:
    seen = _Seen()
    end = run_tune(_record("quantization=Q8_0"), launch=_Engines(), run_workload=_Workload(), store=store,
                   observer=seen)
    assert end.record.outcomes[1].quality is None and end.record.finished_at
    assert any(e.startswith("note quality against the baseline skipped") for e in seen.events)
