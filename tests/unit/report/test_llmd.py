"""llm-d's Benchmark Report (v0.1) from a saved run: hand-made records with known timings, so every number
in the report is known in advance."""

from __future__ import annotations

from tokometer.metrics import summarize
from tokometer.records import RequestRecord
from tokometer.report.llmd import LLMD_REPORT_VERSION, llmd_reports
from tokometer.runs.stored_spec import StoredSpec
from tokometer.store.runs import StoredRun

MS = 1_000_000


def _record(i: int, ttft_ms: int) -> RequestRecord:
    """Sent at i + 1 s; first of 5 one-token events ``ttft_ms`` later, then one every 10 ms; closed at the last."""
    sent = (i + 1) * 1000 * MS  # 0 would mean "never sent"
    events = [sent + ttft_ms * MS + k * 10 * MS for k in range(5)]
    return RequestRecord(index=i, due_ns=sent, sent_ns=sent, first_token_ns=events[0], last_token_ns=events[-1],
                         end_ns=events[-1], event_ns=events, event_tokens=[1.0] * 5, input_tokens=20,
                         input_tokens_source="usage", output_tokens=5, output_tokens_source="usage", status=200)


def _run(steps: int) -> StoredRun:
    step_rows = []
    for s in range(steps):
        summary = summarize([_record(i, 100 + 100 * i) for i in range(3)])
        step_rows.append({"step": s, "load": {"concurrency": s + 1}, "started_at": "2026-01-01T00:00:00",
                          "summary": summary.to_json()})
    return StoredRun.from_json({"id": 7, "status": "completed", "started_at": "2026-01-01T00:00:00",
                                "target": "http://x/v1", "api": "openai-chat", "model": "m", "spec": {},
                                "steps": step_rows})


def test_one_step_is_one_report_with_tokometer_s_numbers() -> None:
    report = llmd_reports(_run(1))
    assert isinstance(report, dict) and report["version"] == LLMD_REPORT_VERSION == "0.1"
    assert report["scenario"]["load"] == {"name": "tokometer", "args": {"concurrency": 1}}
    latency = report["metrics"]["latency"]
    assert latency["time_to_first_token"]["units"] == "ms"
    assert (latency["time_to_first_token"]["min"], latency["time_to_first_token"]["p50"],
            latency["time_to_first_token"]["max"]) == (100.0, 200.0, 300.0)
    assert latency["time_per_output_token"]["mean"] == 10.0 and latency["time_per_output_token"]["units"] == "ms/token"
    assert latency["inter_token_latency"]["p99p9"] == 10.0
    assert latency["request_latency"]["mean"] == 240.0  # TTFT 200 on average + 4 gaps of 10 ms
    assert report["metrics"]["requests"] == {
        "total": 3, "failures": 0,
        "input_length": report["metrics"]["requests"]["input_length"],
        "output_length": report["metrics"]["requests"]["output_length"]}
    assert report["metrics"]["requests"]["output_length"]["mean"] == 5.0
    assert report["metrics"]["throughput"]["total_tokens_per_sec"] > 0


def test_a_sweep_is_a_list_of_reports_in_step_order() -> None:
    reports = llmd_reports(_run(3))
    assert isinstance(reports, list)
    assert [r["scenario"]["load"]["args"] for r in reports] == [{"concurrency": 1}, {"concurrency": 2},
                                                                  {"concurrency": 3}]


def test_an_import_entry_that_is_not_a_mapping_is_no_import() -> None:
    import dataclasses

    run = dataclasses.replace(_run(1), spec=StoredSpec({"import": ["x"]}))  # edited by hand: this raised AttributeError
    report = llmd_reports(run)
    assert isinstance(report, dict) and report["scenario"]["load"]["name"] == "tokometer"
    assert "imported_from" not in report["scenario"]["metadata"]


def _strict(text: str) -> object:
    import json

    def refuse(name: str) -> object:
        raise AssertionError(f"{name} in the JSON")

    return json.loads(text, parse_constant=refuse)


def test_report_refuses_a_bench_json_file_with_non_finite_numbers_naming_the_field(tmp_path: object) -> None:
    """A bench --json file whose summary holds NaN or Infinity (Python's json writes them; tokometer never does)
    is input that fails its types: ``report`` in every format says which field, in one line, exit 2, and
    writes nothing half-made."""
    import json
    from pathlib import Path

    from click.testing import CliRunner

    from tokometer.cli.report import command
    from tokometer.report.json_out import run_json
    from tokometer.util.errors import ConfigError

    run = _run(1)
    data = run_json(run)
    data["spec"] = {"import": ["x"]}
    summary = data["steps"][0]["summary"]
    summary["duration_s"] = float("nan")
    summary["output_throughput_tok_s"] = float("inf")
    path = Path(str(tmp_path)) / "run.json"
    path.write_text(json.dumps(data))
    for fmt in ("llmd", "json"):
        done = CliRunner().invoke(command, [str(path), "--format", fmt])
        assert isinstance(done.exception, ConfigError), done.output  # the CLI's entry point: one line, exit 2
        assert "steps[0].summary.duration_s: not a finite number" in str(done.exception)
        assert "\n" not in str(done.exception) and done.output == ""
