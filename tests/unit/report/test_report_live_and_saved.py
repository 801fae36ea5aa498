"""A live run and the same run saved are one `StoredRun` to the renderers: ``bench --json`` / ``--csv`` of the
live `BenchResult` equal ``report --format json|csv`` of it read back from a real results store (SQLite, and
PostgreSQL where there is one), and the report's data holds each step as both do.

The run is made by hand: summaries of hand-stamped requests (`tokometer.metrics.summarize`), recorded through the
run's own recorder (`tokometer.benchmark.recorder`) into the store."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from tokometer.benchmark.recorder import NoObserver, Recorder, SavedRun
from tokometer.benchmark.results import BenchResult, StepResult
from tokometer.benchmark.spec import BenchSpec
from tokometer.load.profiles import LoadStep
from tokometer.load.runner import StepLimits
from tokometer.load.selfcheck import ClientHealth
from tokometer.metrics import SLO, summarize
from tokometer.records import RequestRecord
from tokometer.report.csv_out import csv_text, write_csv
from tokometer.report.data import report_data
from tokometer.report.json_out import bench_json, run_json
from tokometer.store import ResultStore, StoredStep

MS = 1_000_000


def _records(step: int, n: int, ttft_ms: int) -> list[RequestRecord]:
    out = []
    for i in range(n):
        sent = (i + 1) * 10 * MS
        out.append(RequestRecord(index=i, step=step, due_ns=sent, sent_ns=sent, first_token_ns=sent + ttft_ms * MS,
                                 last_token_ns=sent + (ttft_ms + 8) * MS, end_ns=sent + (ttft_ms + 9) * MS,
                                 event_ns=[sent + ttft_ms * MS, sent + (ttft_ms + 4) * MS, sent + (ttft_ms + 8) * MS],
                                 event_tokens=[1.0, 1.0, 1.0], status=200, output_tokens=3,
                                 output_tokens_source="usage", input_tokens=16, input_tokens_source="usage"))
    out.append(RequestRecord(index=n, step=step, sent_ns=5, end_ns=6, error="http_5xx", error_detail="HTTP 500",
                             status=500))
    return out


def test_a_saved_run_renders_as_the_live_one(store_url: str, tmp_path: Path) -> None:
    spec = BenchSpec(url="http://127.0.0.1:9/v1", concurrency=[1, 4], repeat=2, slo_ttft_ms=30.0, label="hand")
    store = ResultStore(store_url)
    try:
        run_id = store.create_run(target=spec.url, api=spec.api, model="m", spec=spec.model_dump(mode="json"),
                                  engine={"engine": "vllm", "tensor_parallel_size": 2}, host={"cpu": "c"},
                                  label=spec.label, prompt_source="synthetic")
        recorder = Recorder(SavedRun(store, run_id), NoObserver())
        health = ClientHealth(loop_lag_p99_ms=0.5, loop_lag_max_ms=1.0, cpu_fraction=0.3, client_lag_p99_ms=0.2)
        steps = []
        for index, (concurrency, trial, ttft) in enumerate([(1, 1, 20), (4, 1, 40), (1, 2, 22), (4, 2, 45)]):
            load = LoadStep("concurrency", concurrency)
            started = f"2026-01-01T00:00:0{index}.000+00:00"
            recorder.step_started(index, load, trial, StepLimits(8), started)
            records = _records(index, 8, ttft)
            for r in records:
                recorder.request_done(r)
            step = StoredStep(index, load, started, summarize(records, SLO(ttft_ms=30.0)), health, False,
                              server={"gauges": {"requests_running": {"mean": 2.0}}},
                              gpu=({"index": 0, "power_mean_w": 300.0},) if index else (), trial=trial)
            result = StepResult(step, records)
            recorder.step_finished(result)
            steps.append(result)
        recorder.run_finished("completed", warnings=["w"])
        saved = store.run(run_id)
        rows = store.get_run(run_id)
    finally:
        store.close()
    assert saved is not None and rows is not None
    live = BenchResult.of(spec, run_id, "completed", saved.started_at, saved.finished_at or "", steps, model="m",
                          prompt_source="synthetic", engine={"engine": "vllm", "tensor_parallel_size": 2},
                          host={"cpu": "c"}, warnings=["w"])
    written = bench_json(live)
    assert written["schema"] == "tokometer.bench/2"
    assert run_json(saved) == written  # the store keeps the prompt source and the warnings too
    assert live.run == saved  # the store's own columns (its schema, the process) aside:
    assert dataclasses.replace(live.run, saved_by=saved.saved_by).to_json() == saved.to_json()
    assert written["steps"] == [{k: v for k, v in s.items() if k != "run_id"} for s in rows["steps"]]
    assert [s["health"] for s in written["steps"]] == [health.to_json()] * 4
    path = tmp_path / "live.csv"
    write_csv(live, path)
    assert path.read_bytes().decode() == csv_text(saved) and len(csv_text(saved).splitlines()) == 5
    data = report_data([(saved, [])], judge=False)["runs"][0]
    assert [{k: s[k] for k in written["steps"][0]} for s in data["steps"]] == written["steps"]
    assert data["find_max"] is None and [s["probe"] for s in data["steps"]] == [None] * 4
