"""llm-d's Benchmark Report imported (v0.1 and v0.2): a report tokometer wrote comes back as the run it was (its
numbers, server, sessions and start-up), a report in llm-d-benchmark's own shape is read in its units, and
hostile files are refused in one line (exit 2) with nothing saved.

``llmd-0.2-harness.json`` (tests/fixtures/imports) is written by hand in the shape of llm-d-benchmark's
published example report (``br_v0_2_example.yaml``): an ``inference_engine`` and a router in the stack, times in
seconds, KV-cache use in percent, two pods' start-up times. It conforms to the schema (`tests.llmd_schema`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.llmd_schema import problems
from tests.unit.report.test_llmd_v02 import _run
from tokometer.cli import main
from tokometer.engines.startup import MEASURED, EngineStartup, startup_of
from tokometer.imports import read_import, save_import
from tokometer.report.llmd import llmd_reports
from tokometer.report.llmd_v02 import llmd_v02_reports
from tokometer.store import ResultStore, StoredRun

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "imports"
HARNESS = FIXTURES / "llmd-0.2-harness.json"
OURS = FIXTURES / "llmd-0.2-tokometer.json"
"""``report --format llmd`` of a real run of the embedded llama.cpp engine (its start-up timed)."""


def _round_trip(reports: Any, tmp_path: Path) -> StoredRun:
    path = tmp_path / "report.json"
    path.write_text(json.dumps(reports))
    store = ResultStore(f"sqlite:///{tmp_path / 'runs.db'}")
    try:
        run_id, _ = save_import(store, read_import(path))
        run = store.run(run_id)
    finally:
        store.close()
    assert run is not None
    return run


def test_a_v0_2_export_comes_back_as_the_run_it_was(tmp_path: Path) -> None:
    original = _run(2, startup=EngineStartup("llamacpp", 2.5, 1.25))
    back = _round_trip(llmd_v02_reports(original), tmp_path)
    assert len(back.steps) == 2 and back.model == "m" and back.target == "http://x/v1"
    for was, now in zip(original.steps, back.steps, strict=True):
        assert was.summary is not None and now.summary is not None
        for name in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "input_tokens", "output_tokens"):
            a, b = getattr(was.summary, name), getattr(now.summary, name)
            assert (a.mean, a.min, a.p50, a.p90, a.p99, a.max) == pytest.approx((b.mean, b.min, b.p50, b.p90, b.p99,
                                                                                 b.max)), name
        assert now.summary.requests_completed == was.summary.requests_completed
        assert now.summary.output_throughput_tok_s == pytest.approx(was.summary.output_throughput_tok_s)
        assert now.summary.duration_s == pytest.approx(was.summary.duration_s)
        assert now.summary.session_stats is not None and now.summary.session_stats["sessions"] == 2
        assert now.server is not None and now.server["gauges"]["requests_running"] == {"mean": 1.5, "max": 3.0}
        assert now.server["prefix_cache_hit_rate"] == 0.75
        assert now.load is not None and now.load.concurrency == was.load.concurrency  # type: ignore[union-attr]
    assert startup_of(back.engine.facts if back.engine else None) == EngineStartup("llama.cpp", 2.5, 1.25)
    again = llmd_v02_reports(back)  # and out again: still the schema's
    assert isinstance(again, list) and all(problems(r) == [] for r in again)


def test_a_v0_1_export_comes_back_too(tmp_path: Path) -> None:
    original = _run(1)
    back = _round_trip(llmd_reports(original), tmp_path)
    assert back.target == "http://x/v1" and back.steps[0].summary is not None
    was = original.steps[0].summary
    assert was is not None
    assert back.steps[0].summary.ttft_ms.p50 == pytest.approx(was.ttft_ms.p50)
    assert back.steps[0].summary.e2e_ms.mean == pytest.approx(was.e2e_ms.mean)


def test_a_report_in_llm_d_s_own_shape_is_read_in_its_units(tmp_path: Path) -> None:
    assert problems(json.loads(HARNESS.read_text())) == []
    run = read_import(HARNESS)
    step = run.steps[0]
    assert run.model == "Qwen/Qwen3-0.6B" and run.started_at == "2026-11-05T18:00:42.000+00:00"
    assert step.summary is not None and step.load == {"rate": 10.0}
    assert step.summary["ttft_ms"]["p50"] == pytest.approx(36.2) and step.summary["tpot_ms"]["mean"] == 12.1
    assert step.summary["requests_completed"] == 498 and step.summary["requests_failed"] == 2
    assert step.server is not None and step.server["gauges"]["kv_cache_usage"] == {"mean": 0.41, "max": 0.63}
    startup = startup_of(run.engine)
    assert startup is not None and startup.cold_s == 81.6 and startup.warm_s is None  # the slowest pod
    assert startup.measured != MEASURED and "pod" in startup.measured


def test_tokometer_s_own_report_of_a_real_llamacpp_run_conforms_and_reads_back() -> None:
    report = json.loads(OURS.read_text())
    assert problems(report) == []
    run = read_import(OURS)
    startup = startup_of(run.engine)
    saved = report["results"]["observability"]["pod_startup_times"]["pods"]
    assert startup is not None and startup.measured == MEASURED
    assert (startup.cold_s, startup.warm_s) == (saved[0]["startup_seconds"], saved[1]["startup_seconds"])
    summary = run.steps[0].summary
    assert summary is not None and summary["ttft_ms"]["p50"] == pytest.approx(
        report["results"]["request_performance"]["aggregate"]["latency"]["time_to_first_token"]["p50"])


def _refused(path: Path, store: Path, says: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["import", str(path), "--store", str(store)])
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert exited.value.code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert says in lines[0] and str(path) in lines[0], lines[0]
    assert not store.exists() or ResultStore(f"sqlite:///{store}", read_only=True).list_runs(5) == []


def _at(*keys: Any, value: Any) -> Callable[[Any], Any]:
    def change(data: Any) -> Any:
        target = data
        for key in keys[:-1]:
            target = target[key]
        target[keys[-1]] = value
        return data
    return change


_AGG = ("results", "request_performance", "aggregate")
CASES = [
    (_at("version", value="0.3"), "version '0.3'"),
    (_at("version", value=["0.2"]), "version"),
    (lambda d: [d, {**d, "version": "0.1"}], "not 0.2 like the first"),
    (lambda d: [], "not a result tokometer can import"),
    (_at(*_AGG, "requests", "total", value=-1), "requests: total"),
    (_at(*_AGG, "requests", "total", value=True), "total"),
    (_at(*_AGG, "requests", "failures", value=10**6), "more than the 500 requests"),
    (_at(*_AGG, "latency", "time_to_first_token", "units", value="furlongs"), "time_to_first_token.units"),
    (_at(*_AGG, "latency", "time_to_first_token", "units", value="tokens/s"), "time_to_first_token.units"),
    (_at(*_AGG, "latency", "time_to_first_token", "mean", value="fast"), "time_to_first_token: mean"),
    (_at(*_AGG, "latency", "time_to_first_token", "mean", value=float("nan")), "mean"),
    (_at(*_AGG, "latency", "request_latency", "max", value=1e300), "request_latency: max"),
    (_at(*_AGG, "latency", "time_to_first_token", "p99", value=-0.5), "time_to_first_token: p99"),
    (_at(*_AGG, "throughput", "output_token_rate", "mean", value=float("inf")), "output_token_rate"),
    (_at(*_AGG, "latency", value=[1, 2]), "latency"),
    (_at("run", "time", "duration", value="PT-5S"), "run.time.duration"),
    (_at("run", "time", "duration", value="PTfiveS"), "run.time.duration"),
    (_at("run", "time", "duration", value="P" + "9" * 5000 + "S"), "run.time.duration"),
    (_at("run", "time", "start", value="yesterday"), "run.time.start"),
    (_at("results", "observability", "pod_startup_times", "pods", 0, "startup_seconds", value=-3), "startup_seconds"),
    (_at("results", "observability", "pod_startup_times", "pods", value={"a": 1}), "pods"),
    (_at("results", "observability", "pod_startup_times", "pods", 0, "role", value=[4]), "pods[0].role"),
    (_at("results", "observability", "components", 0, "aggregate", "kv_cache_usage", "mean", value=250.0),
     "kv_cache_usage: mean"),
    (_at("results", "observability", "components", 0, "aggregate", "running_requests", "units", value="percent"),
     "running_requests.units"),
    (_at("results", "observability", "sessions", value={"summary": {"sessions": "many"}}), "summary.sessions"),
    (_at("results", "observability", "sessions", value={"summary": {}, "per_turn": [{"ttft_ms": {"p50": "x"}}]}),
     "per_turn[0].ttft_ms: p50"),
    (_at("scenario", "stack", value="vllm"), "scenario.stack"),
    (_at("scenario", "stack", 0, "standardized", "model", "name", value=7), "model.name"),
    (lambda d: [d] + [{}] * 100_001, "reports: from 1 to"),
]


@pytest.mark.parametrize(("change", "says"), CASES)
def test_hostile_reports_are_refused_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 change: Callable[[Any], Any], says: str) -> None:
    data = json.loads(HARNESS.read_text())
    data["results"]["observability"]["sessions"] = {"summary": {"sessions": 2}, "per_turn": []}
    data = change(data)
    path = tmp_path / "report.json"
    path.write_text(json.dumps(data))  # NaN and Infinity as Python's json writes them
    _refused(path, tmp_path / "runs.db", says, capsys)
