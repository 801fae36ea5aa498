"""llm-d's Benchmark Report v0.2 from a saved run: hand-made records with known timings, a server window, time
slices, sessions and a timed start-up, so every number is known in advance; every report is checked against
the published schema's facts (`tests.llmd_schema`)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.llmd_schema import problems
from tokometer.engines.startup import EngineStartup
from tokometer.metrics import summarize
from tokometer.metrics.window import time_slices
from tokometer.records import RequestRecord
from tokometer.report.llmd_v02 import LLMD_V02_VERSION, llmd_v02_reports
from tokometer.store.runs import StoredRun

MS = 1_000_000


def _record(i: int, ttft_ms: int) -> RequestRecord:
    """Sent at i + 1 s; first of 5 one-token events ``ttft_ms`` later, then one every 10 ms; closed at the last."""
    sent = (i + 1) * 1000 * MS
    events = [sent + ttft_ms * MS + k * 10 * MS for k in range(5)]
    return RequestRecord(index=i, due_ns=sent, sent_ns=sent, first_token_ns=events[0], last_token_ns=events[-1],
                         end_ns=events[-1], event_ns=events, event_tokens=[1.0] * 5, input_tokens=20,
                         input_tokens_source="usage", output_tokens=5, output_tokens_source="usage", status=200)


_SERVER = {"source": "vllm", "samples": 5, "gaps": 0, "duration_s": 3.0,
           "gauges": {"requests_running": {"mean": 1.5, "max": 3.0}, "requests_waiting": {"mean": 0.25, "max": 1.0},
                      "kv_cache_usage": {"mean": 0.2, "max": 0.5}},
           "prefix_cache_hit_rate": 0.75}
_SESSIONS = {"sessions": 2, "completed": 2, "failed": 0,
             "turns": {"count": 2, "mean": 2.5, "std": 0.5, "min": 2.0, "p50": 2.5, "max": 3.0}}


def _run(steps: int = 1, *, startup: EngineStartup | None = None, extras: bool = True) -> StoredRun:
    records = [_record(i, 100 + 100 * i) for i in range(3)]
    summary = summarize(records).to_json()
    if extras:
        summary["time_slices"] = time_slices(records, 1.0, lambda _t: 1.0)
        summary["session_stats"] = _SESSIONS
        summary["per_turn"] = [{"turn": 1, "requests": 2}]
    engine: dict[str, Any] = {"engine": "llama.cpp", "engine_version": "b11434", "argv": ["llama-server", "-m", "x"]}
    if startup is not None:
        engine["startup"] = startup.to_json()
    step_rows = [{"step": s, "load": {"concurrency": s + 1}, "started_at": f"2026-01-01T00:0{s}:00+00:00",
                  "summary": summary, "server": _SERVER if extras else None} for s in range(steps)]
    return StoredRun.from_json({"id": 7, "status": "completed", "started_at": "2026-01-01T00:00:00+00:00",
                                "target": "http://x/v1", "api": "openai-chat", "model": "m", "spec": {},
                                "engine": engine, "prompt_source": "synthetic(20 tokens)", "steps": step_rows})


def test_one_step_is_one_report_that_conforms_with_tokometer_s_numbers() -> None:
    report = llmd_v02_reports(_run(startup=EngineStartup("llamacpp", 2.5, 1.25)))
    assert isinstance(report, dict) and report["version"] == LLMD_V02_VERSION == "0.2"
    assert problems(report) == []
    aggregate = report["results"]["request_performance"]["aggregate"]
    ttft = aggregate["latency"]["time_to_first_token"]
    assert (ttft["units"], ttft["min"], ttft["p50"], ttft["max"]) == ("ms", 100.0, 200.0, 300.0)
    assert aggregate["latency"]["time_per_output_token"] == pytest.approx(
        {**aggregate["latency"]["time_per_output_token"], "units": "ms/token", "mean": 10.0})
    assert aggregate["latency"]["request_latency"]["mean"] == 240.0
    assert aggregate["requests"]["total"] == 3 and aggregate["requests"]["output_length"]["mean"] == 5.0
    load = report["scenario"]["load"]["standardized"]
    assert (load["tool"], load["source"], load["stage"], load["concurrency"]) == ("tokometer", "random", 0, 1)
    assert load["input_seq_len"] == {"distribution": "fixed", "value": 20.0, "min": 20, "max": 20}
    assert load["multi_turn"]["max_turns"]["value"] == 2.5
    assert report["run"]["time"]["start"] == "2026-01-01T00:00:00Z"


def test_the_server_sessions_and_start_up_are_where_v0_2_holds_them() -> None:
    report = llmd_v02_reports(_run(startup=EngineStartup("llamacpp", 2.5, 1.25)))
    assert isinstance(report, dict)
    observability = report["results"]["observability"]
    engine = observability["components"][0]
    assert engine["aggregate"]["running_requests"] == {"units": "count", "mean": 1.5, "max": 3.0}
    assert engine["aggregate"]["kv_cache_usage"]["units"] == "fraction"
    assert engine["aggregate"]["cache_hit_rate"] == {"units": "fraction", "mean": 0.75}
    assert engine["time_series"]["kv_cache_usage"]["series"] == [{"ts": "2026-01-01T00:00:00Z", "mean": 0.2,
                                                                  "max": 0.5}]
    pods = observability["pod_startup_times"]["pods"]
    assert [(p["role"], p["startup_seconds"]) for p in pods] == [("cold start", 2.5), ("warm start", 1.25)]
    assert observability["sessions"]["summary"]["sessions"] == 2
    assert report["scenario"]["stack"][0]["standardized"]["startup"]["cold_s"] == 2.5
    series = report["results"]["request_performance"]["time_series"]
    ttft_points = series["latency"]["time_to_first_token"]["series"]
    assert [p["ts"] for p in ttft_points] == ["2026-01-01T00:00:00Z", "2026-01-01T00:00:01Z",
                                              "2026-01-01T00:00:02Z"]
    assert [p["mean"] for p in ttft_points] == [100.0, 200.0, 300.0]


def test_a_sweep_is_a_list_of_conforming_reports_and_a_bare_run_conforms_too() -> None:
    reports = llmd_v02_reports(_run(3))
    assert isinstance(reports, list) and [r["scenario"]["load"]["standardized"]["stage"] for r in reports] == [0, 1, 2]
    assert all(problems(r) == [] for r in reports)
    bare = llmd_v02_reports(_run(extras=False))
    assert problems(bare) == [] and "observability" not in bare["results"]  # type: ignore[call-overload]


@pytest.mark.parametrize(("edit", "said"), [
    (lambda r: r["run"].pop("uid"), "report.run.uid: required"),
    (lambda r: r["results"]["request_performance"]["aggregate"]["latency"]["time_to_first_token"]
     .update(units="ms/token"), "units: 'ms/token' is not one of"),
    (lambda r: r["scenario"]["load"]["standardized"].update(source="synthetic"), "source"),
    (lambda r: r["results"].update(extra=1), "report.results.extra: not a field of Results"),
    (lambda r: r["run"]["time"].update(start="yesterday"), "report.run.time.start"),
    (lambda r: r["results"]["observability"]["pod_startup_times"]["pods"][0].update(startup_seconds=-1.0),
     "startup_seconds"),
])
def test_the_checker_itself_catches_what_the_schema_refuses(edit: Any, said: str) -> None:
    report = llmd_v02_reports(_run(startup=EngineStartup("llamacpp", 2.5)))
    broken = copy.deepcopy(report)
    edit(broken)
    assert any(said in problem for problem in problems(broken)), problems(broken)
