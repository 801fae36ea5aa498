"""A run read back typed (`tokometer.store.runs`): a ``bench --json`` file of the schema before
(``tokometer.bench/1``, committed as bench wrote it: tests/fixtures/results/README.md) and of today's, both as the
`StoredRun` a saved run reads as, and written again in today's one schema of a step."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from tokometer.load.profiles import LoadStep
from tokometer.load.selfcheck import ClientHealth
from tokometer.metrics.summary import StepSummary
from tokometer.report.csv_out import csv_text
from tokometer.report.data import report_data
from tokometer.report.json_out import run_json
from tokometer.store.runs import BENCH_SCHEMA, StoredRun, StoredStep

RESULTS = Path(__file__).parents[2] / "fixtures" / "results"
STEP_KEYS = ["step", "load", "started_at", "summary", "health", "interrupted", "server", "gpu"]


def _v1() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((RESULTS / "bench-v1.json").read_text())
    assert data["schema"] == "tokometer.bench/1" and list(data["steps"][0])[:4] == ["index", "load", "summary",
                                                                                   "client"]
    return data


def _same_summary(now: dict[str, Any], then: dict[str, Any]) -> bool:
    """A summary written again: every figure the file had, unchanged; fields added since, empty (None)."""
    return {k: now.get(k) for k in then} == then and all(now[k] is None for k in now.keys() - then.keys())


def test_a_bench_v1_file_reads_as_the_run_it_was() -> None:
    """Each step of the file: ``index`` read as the step, ``client`` as the typed health, the summary as the
    `StepSummary` it was written from; the run's start stands in for the steps' (the file has none)."""
    data = _v1()
    run = StoredRun.from_bench_json(data)
    assert [s.index for s in run.steps] == [s["index"] for s in data["steps"]] == [0, 1, 2, 3]
    assert [(s.load, s.trial) for s in run.steps] == [(LoadStep("concurrency", 1), 1), (LoadStep("concurrency", 2), 1),
                                                      (LoadStep("concurrency", 1), 2), (LoadStep("concurrency", 2), 2)]
    for step, written in zip(run.steps, data["steps"], strict=True):
        assert isinstance(step.summary, StepSummary) and _same_summary(step.summary.to_json(), written["summary"])
        assert step.summary.requests_completed == 3
        assert isinstance(step.health, ClientHealth) and step.health.to_json() == written["client"]
        assert step.started_at == data["started_at"]
    assert run.prompt_source == data["prompt_source"] and list(run.warnings) == data["warnings"]


def test_a_bench_v1_file_is_written_again_in_todays_schema() -> None:
    """``report FILE --format json`` of a /1 file: the /2 object, each step in the store's names with the same
    values; its CSV is the rows bench --csv wrote for that run then (columns added since aside)."""
    data = _v1()
    run = StoredRun.from_bench_json(data)
    again = run_json(run)
    assert again["schema"] == BENCH_SCHEMA == "tokometer.bench/2"
    for step, old in zip(again["steps"], data["steps"], strict=True):
        assert list(step) == STEP_KEYS
        renamed = {"step": old["index"], "health": old["client"], "started_at": data["started_at"]}
        assert _same_summary(step.pop("summary"), old["summary"])
        assert step == {**{k: v for k, v in old.items() if k not in ("index", "client", "summary")}, **renamed}
    same = ("run_id", "status", "started_at", "finished_at", "target", "spec", "prompt_source", "engine", "host",
            "warnings", "find_max")
    assert {k: again[k] for k in same} == {k: data[k] for k in same}
    written = list(csv.DictReader(io.StringIO((RESULTS / "bench-v1.csv").read_text())))
    rows = [row for row in csv.DictReader(io.StringIO(csv_text(run))) if row["window"] == "step"]  # then windows
    assert len(rows) == len(written) == 4
    assert [{k: row[k] for k in old} for row, old in zip(rows, written, strict=True)] == written


def test_todays_file_round_trips_and_is_the_stores_shape() -> None:
    """A /2 file reads back and writes the same object again; its steps are `StoredStep.to_json` exactly, as
    the store's rows are (less their ``run_id``), and the report's data holds each step the same way."""
    first = run_json(StoredRun.from_bench_json(_v1()))
    run = StoredRun.from_bench_json(first)
    assert run_json(run) == first
    assert [s.to_json() for s in run.steps] == first["steps"]
    assert StoredRun.from_json(run.to_json()).to_json() == run.to_json()
    assert [{k: v for k, v in s.items() if k != "run_id"} for s in run.to_json()["steps"]] == first["steps"]
    data = report_data([(run, [])], judge=False)
    assert data["schema"] == "tokometer.report/2"
    steps = data["runs"][0]["steps"]
    assert [{k: s[k] for k in STEP_KEYS} for s in steps] == first["steps"]
    assert [s["label"] for s in steps] == ["c=1 #1", "c=2 #1", "c=1 #2", "c=2 #2"]


def test_a_step_without_a_summary_or_gpus_writes_nulls() -> None:
    step = StoredStep(4, LoadStep("rate", rate=2.0), "2026-01-01T00:00:00.000+00:00", interrupted=True)
    assert step.to_json() == {"step": 4, "load": {"rate": 2.0, "arrival": "poisson"},
                              "started_at": "2026-01-01T00:00:00.000+00:00", "summary": None, "health": None,
                              "interrupted": True, "server": None, "gpu": None}
    assert StoredStep.from_json(step.to_json()) == step
