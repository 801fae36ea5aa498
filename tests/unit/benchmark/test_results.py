"""A live run's result (`tokometer.benchmark.results`) is the run as it is saved with only what is never saved
beside it: its steps are the run's steps, its warnings the run's own, its id None when it was not saved."""

from __future__ import annotations

import pytest

from tokometer.benchmark.results import BenchResult, StepResult
from tokometer.benchmark.spec import BenchSpec
from tokometer.load.profiles import LoadStep
from tokometer.load.selfcheck import ClientHealth
from tokometer.metrics import summarize
from tokometer.records import RequestRecord
from tokometer.report.json_out import bench_json, run_json
from tokometer.store import StoredRun, StoredStep

HEALTH = ClientHealth(loop_lag_p99_ms=1.0, loop_lag_max_ms=2.0, cpu_fraction=0.2, client_lag_p99_ms=1.0)


def _records() -> list[RequestRecord]:
    return [RequestRecord(index=i, sent_ns=1_000, first_token_ns=2_000, last_token_ns=3_000, end_ns=4_000,
                          status=200, output_tokens=3, output_tokens_source="usage") for i in range(3)]


def _step(index: int, warnings: tuple[str, ...]) -> StepResult:
    records = _records()
    saved = StoredStep(index, LoadStep("concurrency", concurrency=index + 1), "2026-01-01T00:00:00+00:00",
                       summarize(records), HEALTH, False, server={"source": "sim"})
    return StepResult(saved, records, warnings)


def _result(run_id: int | None) -> BenchResult:
    spec = BenchSpec(url="http://127.0.0.1:9/v1", concurrency=[1, 2], label="l", headers={"Authorization": "x"})
    return BenchResult.of(spec, run_id, "completed", "2026-01-01T00:00:00+00:00", "2026-01-01T00:01:00+00:00",
                          [_step(0, ("first step's",)), _step(1, ())], model="m", prompt_source="synthetic",
                          engine={"engine": "llama.cpp", "model_file": "/m.gguf"}, host={"cpu": "c"},
                          warnings=["the run's"])


def test_the_live_run_is_the_saved_run_with_its_records_beside() -> None:
    result = _result(4)
    run = result.run
    assert isinstance(run, StoredRun) and run.steps == tuple(s.step for s in result.steps)
    assert (result.run_id, result.status, run.model, run.label, run.prompt_source) == \
        (4, "completed", "m", "l", "synthetic")
    assert run.warnings == ("the run's", "first step's") and result.warnings == ("the run's",)
    assert run.spec["headers"] == {"Authorization": "<redacted>"}  # saved as the store saves it
    assert run.engine is not None and run.engine.is_llamacpp and run.engine.model_file == "/m.gguf"
    assert [s.summary.requests_completed for s in result.steps] == [3, 3] and result.failed_requests == 0
    assert result.steps[0].server == {"source": "sim"} and result.steps[1].load.concurrency == 2
    assert result.find_max() is None
    assert bench_json(result) == run_json(StoredRun.from_json(run.to_json()))  # what the store reads back


def test_a_run_not_saved_has_no_id() -> None:
    result = _result(None)
    assert result.run_id is None and result.run.id == 0 and bench_json(result)["run_id"] is None


def test_a_live_step_has_its_load_summary_and_health() -> None:
    with pytest.raises(ValueError, match="a live step"):
        StepResult(StoredStep(0, LoadStep("concurrency", concurrency=1), ""), [])
