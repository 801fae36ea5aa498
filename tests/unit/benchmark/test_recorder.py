"""The run's recorder (`tokometer.benchmark.recorder`) against a real results store (SQLite, and PostgreSQL
where there is one) and an observer that writes down what it is told."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from tokometer.benchmark.recorder import Recorder, SavedRun, Unsaved
from tokometer.benchmark.results import StepResult
from tokometer.load.profiles import LoadStep
from tokometer.load.runner import StepLimits
from tokometer.load.selfcheck import ClientHealth
from tokometer.metrics import summarize
from tokometer.records import RequestRecord
from tokometer.store import ResultStore, StoredStep

STEP = LoadStep("concurrency", concurrency=2)


class Notes:
    """A `BenchObserver` that notes each call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []

    def step_started(self, index: int, step: LoadStep, limits: StepLimits) -> None:
        self.calls.append(("started", (index, step, limits)))

    def request_done(self, record: RequestRecord) -> None:
        self.calls.append(("request", record.index))

    def step_finished(self, result: StepResult) -> None:
        self.calls.append(("finished", result.step.index))


def _result(records: list[RequestRecord]) -> StepResult:
    health = ClientHealth(loop_lag_p99_ms=1.0, loop_lag_max_ms=2.0, cpu_fraction=0.2, client_lag_p99_ms=1.0)
    return StepResult(StoredStep(0, STEP, "", summarize(records), health, False, trial=2), records)


def _records() -> list[RequestRecord]:
    return [RequestRecord(index=i, sent_ns=1_000, first_token_ns=2_000, last_token_ns=3_000, end_ns=4_000,
                          status=200, output_tokens=3, output_tokens_source="usage") for i in range(3)]


def _saved(store: ResultStore) -> SavedRun:
    return SavedRun(store, store.create_run(target="http://x/v1", api="openai-chat", model="m", spec={}, engine=None,
                                            host=None))


@pytest.fixture
def store(store_url: str) -> Iterator[ResultStore]:
    """The store, closed after the test (an open PostgreSQL connection left to the collector is an error)."""
    opened = ResultStore(store_url)
    try:
        yield opened
    finally:
        opened.close()


def test_each_event_goes_to_the_store_and_to_the_observer(store: ResultStore) -> None:
    notes = Notes()
    recorder = Recorder(_saved(store), notes)
    assert recorder.run_id is not None
    limits = StepLimits(3)
    records = _records()
    with recorder:
        recorder.step_started(0, STEP, 2, limits, "2026-01-01T00:00:00+00:00")
        for record in records:
            recorder.request_done(record)
        recorder.step_finished(_result(records))
    recorder.run_finished("completed")
    assert notes.calls == [("started", (0, STEP, limits)), ("request", 0), ("request", 1), ("request", 2),
                           ("finished", 0)]
    saved = store.run(recorder.run_id)
    assert saved is not None and saved.status == "completed" and len(saved.steps) == 1
    assert saved.steps[0].trial == 2 and saved.steps[0].summary is not None
    assert saved.steps[0].summary.requests_completed == 3 and saved.steps[0].started_at == "2026-01-01T00:00:00+00:00"
    assert [r.index for r in store.load_records(recorder.run_id)] == [0, 1, 2]


def test_a_run_that_ends_by_a_bug_is_saved_failed_and_one_cancelled_is_not(store: ResultStore) -> None:
    broken, cancelled = Recorder(_saved(store), Notes()), Recorder(_saved(store), Notes())
    with pytest.raises(ZeroDivisionError), broken:
        _ = 1 / 0
    with pytest.raises(asyncio.CancelledError), cancelled:
        raise asyncio.CancelledError
    assert broken.run_id is not None and cancelled.run_id is not None
    statuses = {r.id: r.status for r in (store.run(broken.run_id), store.run(cancelled.run_id)) if r is not None}
    assert statuses == {broken.run_id: "failed", cancelled.run_id: "running"}


def test_without_a_store_only_the_observer_hears_of_the_run() -> None:
    notes = Notes()
    recorder = Recorder(Unsaved(), notes)
    records = _records()
    with recorder:
        recorder.step_started(0, STEP, None, StepLimits(3), "2026-01-01T00:00:00+00:00")
        recorder.request_done(records[0])
        recorder.step_finished(_result(records[:1]))
    recorder.run_finished("completed")
    assert recorder.run_id is None
    assert [kind for kind, _ in notes.calls] == ["started", "request", "finished"]
