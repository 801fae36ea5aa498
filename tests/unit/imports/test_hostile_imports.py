"""Hostile numbers and shapes inside otherwise real files: ``tokometer import FILE`` (in-process, through the CLI's
own error handling) exits 2 with one line naming the file and the field, and nothing is saved.

Each case starts from a real file of the tool (tests/fixtures/imports) and changes one value: a time or a count
beyond anything a run holds (beyond SQLite's 64-bit integers, or too large for a float), a rate that is not a
number, a nested value of the wrong type, a count that is a bool.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tokometer.cli import main
from tokometer.imports import source
from tokometer.store import ResultStore

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "imports"
VLLM = FIXTURES / "vllm-bench-serve-0.32.0.json"
GUIDELLM = FIXTURES / "guidellm-0.8.1.json"
AIPERF = FIXTURES / "aiperf-0.13.0"

Change = Callable[[Any], None]


def _set(*keys: Any, value: Any) -> Change:
    """A change that sets ``data[k1][k2]...`` to ``value``."""

    def change(data: Any) -> None:
        for key in keys[:-1]:
            data = data[key]
        data[keys[-1]] = value

    return change


def _errored_guidellm(data: Any) -> None:
    """GuideLLM's first request moved to ``errored``, started at 1e12 s (1e21 ns: beyond SQLite's integers)."""
    requests = data["benchmarks"][0]["requests"]
    moved = requests["successful"].pop(0)
    moved["info"]["timings"]["request_start"] = 1e12
    requests["errored"] = [moved]


def _vllm_error_latency(data: Any) -> None:
    data["errors"][0] = "Bad Gateway"
    data["latencies"][0] = 1e300


VLLM_CASES = [
    (_set("start_times", 0, value=1e300), "start_times[0]"),
    (_set("ttfts", 0, value=10**400), "ttfts[0]"),
    (_set("itls", 0, 0, value=float("nan")), "itls[0]"),
    (_set("itls", 0, value=[500_000.0, 500_000.0]), "request 0"),  # each gap under a week, the request not
    (_vllm_error_latency, "latencies[0]"),
    (_set("output_lens", 0, value=10**12), "output_lens[0]"),
    (_set("input_lens", 0, value=True), "input_lens[0]"),
    (_set("median_ttft_ms", value=10**400), "median_ttft_ms"),
    (_set("output_throughput", value=float("inf")), "output_throughput"),
    (_set("request_rate", value=float("nan")), "request_rate"),
    (_set("request_rate", value=float("inf")), "request_rate"),
    (_set("request_rate", value=-2), "request_rate"),
    (_set("max_concurrency", value=True), "max_concurrency"),
    (_set("max_concurrency", value=-3), "max_concurrency"),
    (_set("model_id", value={"a": 1}), "model_id"),
]
GUIDELLM_CASES = [
    (_errored_guidellm, "request_start"),
    (_set("benchmarks", 0, "requests", "successful", 0, "info", "timings", "request_end", value=1e300),
     "request_end"),
    (_set("benchmarks", 0, "requests", "successful", 0, "info", "timings", "token_iterations", value=10**400),
     "token_iterations"),
    (_set("benchmarks", 0, "requests", "successful", 0, "output_tokens", value=True), "output_tokens"),
    (_set("benchmarks", 0, "config", value=[1]), "config"),
    (_set("benchmarks", 0, "config", "backend", value="x"), "backend"),
    (_set("benchmarks", 0, "config", "backend", "model", value=7), "model"),
    (_set("benchmarks", 0, "config", "strategy", "streams", value=True), "streams"),
    (_set("benchmarks", 0, "config", "strategy", value={"type_": "poisson", "rate": float("nan")}), "rate"),
    (_set("benchmarks", 0, "config", "strategy", value={"type_": "constant", "rate": 1e300}), "rate"),
    (_set("benchmarks", 0, "metrics", "time_to_first_token_ms", "successful", "median", value=10**400), "median"),
    (_set("benchmarks", 0, "metrics", "request_latency", value=[]), "request_latency"),
    (_set("metadata", "guidellm_version", value=[8]), "guidellm_version"),
]


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return tmp_path / "runs.db"


def _refused(path: Path, store: Path, says: str, capsys: pytest.CaptureFixture[str]) -> None:
    """``tokometer import PATH`` exits 2 with one line naming ``says``, and saves no run."""
    with pytest.raises(SystemExit) as exited:
        main(["import", str(path), "--store", str(store)])
    err = capsys.readouterr().err
    assert exited.value.code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tokometer: error: ") and "Traceback" not in err, err
    assert says in lines[0] and str(path) in lines[0], lines[0]
    if store.exists():
        results = ResultStore(f"sqlite:///{store}", read_only=True)
        try:
            assert results.list_runs(5) == []
        finally:
            results.close()


def _changed(fixture: Path, change: Change, out: Path) -> Path:
    data = json.loads(fixture.read_text())
    change(data)
    out.write_text(json.dumps(data))  # NaN and Infinity as Python's json writes them
    return out


@pytest.mark.parametrize(("change", "says"), VLLM_CASES)
def test_vllm_files(tmp_path: Path, store: Path, capsys: pytest.CaptureFixture[str], change: Change,
                    says: str) -> None:
    _refused(_changed(VLLM, change, tmp_path / "vllm.json"), store, says, capsys)


@pytest.mark.parametrize(("change", "says"), GUIDELLM_CASES)
def test_guidellm_files(tmp_path: Path, store: Path, capsys: pytest.CaptureFixture[str], change: Change,
                        says: str) -> None:
    _refused(_changed(GUIDELLM, change, tmp_path / "guidellm.json"), store, says, capsys)


def _aiperf_line(change: Change) -> Callable[[list[Any]], None]:
    """A change to the first record of ``profile_export.jsonl``."""
    return lambda rows: change(rows[0])


AIPERF_RECORD_CASES = [
    (_set("metadata", "request_start_ns", value=10**20), "request_start_ns"),
    (_set("metadata", "request_end_ns", value=1e300), "request_end_ns"),
    (_set("metrics", "time_to_first_token", "value", value=1e300), "time_to_first_token"),
    (_set("metrics", "request_latency", "value", value=10**400), "request_latency"),
    (_set("metrics", "inter_chunk_latency", "value", value=[1.0, float("nan")]), "inter_chunk_latency"),
    (_set("metrics", "usage_completion_tokens", "value", value=True), "usage_completion_tokens"),
    (_set("metadata", "benchmark_phase", value=5), "benchmark_phase"),
]
AIPERF_SUMMARY_CASES = [
    (_set("input_config", "endpoint", "urls", value=5), "urls"),
    (_set("input_config", "models", "items", value=7), "items"),
    (_set("input_config", "phases", value=3), "phases"),
    (_set("input_config", "phases", 0, "concurrency", value=-4), "concurrency"),
    (_set("input_config", "phases", 0, "concurrency", value=True), "concurrency"),
    (_set("time_to_first_token", "p50", value=10**400), "p50"),
    (_set("output_token_throughput", "avg", value=1e300), "avg"),
    (_set("aiperf_version", value={"v": 1}), "aiperf_version"),
]


def _aiperf_copy(tmp_path: Path) -> Path:
    folder = tmp_path / "aiperf"
    shutil.copytree(AIPERF, folder)
    return folder


@pytest.mark.parametrize(("change", "says"), AIPERF_RECORD_CASES)
def test_aiperf_records(tmp_path: Path, store: Path, capsys: pytest.CaptureFixture[str], change: Change,
                        says: str) -> None:
    jsonl = _aiperf_copy(tmp_path) / "profile_export.jsonl"
    rows = [json.loads(line) for line in jsonl.read_text().splitlines() if line.strip()]
    change(rows[0])
    jsonl.write_text("\n".join(json.dumps(r) for r in rows))
    _refused(jsonl, store, says, capsys)


@pytest.mark.parametrize(("change", "says"), AIPERF_SUMMARY_CASES)
def test_aiperf_summary_beside(tmp_path: Path, store: Path, capsys: pytest.CaptureFixture[str], change: Change,
                               says: str) -> None:
    folder = _aiperf_copy(tmp_path)
    summary = folder / "profile_export_aiperf.json"
    _changed(summary, change, summary)
    with pytest.raises(SystemExit):
        main(["import", str(folder / "profile_export.jsonl"), "--store", str(store)])
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and says in lines[0] and str(summary) in lines[0], err


def test_events_are_bounded_across_the_whole_file(tmp_path: Path, store: Path, capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """24 requests of 64 chunk gaps each: no list is long, but 24 + 24 * 64 events are more than 1,000."""
    monkeypatch.setattr(source, "MAX_EVENTS", 1_000)
    data = json.loads(VLLM.read_text())
    data["itls"] = [[0.001] * 64 for _ in data["itls"]]
    path = tmp_path / "vllm.json"
    path.write_text(json.dumps(data))
    _refused(path, store, "more than 1,000 requests and chunk gaps", capsys)
    guidellm = json.loads(GUIDELLM.read_text())
    guidellm["benchmarks"] = guidellm["benchmarks"] * 42  # 42 steps of 24 requests
    path = tmp_path / "guidellm.json"
    path.write_text(json.dumps(guidellm))
    _refused(path, store, "more than 1,000 requests and chunk gaps", capsys)


@pytest.mark.parametrize("fixture", [VLLM, GUIDELLM, AIPERF / "profile_export.jsonl"])
def test_the_real_files_still_import(fixture: Path, store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["import", str(fixture), "--store", str(store)])
    assert exited.value.code == 0 and "-> run 1" in capsys.readouterr().out


def test_events_are_bounded_across_the_files_of_one_command(tmp_path: Path, store: Path,
                                                             capsys: pytest.CaptureFixture[str],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Each file alone holds fewer than 500 requests and chunk gaps (24 + 24 * 17), the two together more."""
    monkeypatch.setattr(source, "MAX_EVENTS", 500)
    second = tmp_path / "second.json"
    shutil.copy(VLLM, second)
    with pytest.raises(SystemExit) as exited:
        main(["import", str(VLLM), str(second), "--store", str(store)])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and "more than 500 requests and chunk gaps together" in err and str(second) in err
    with pytest.raises(SystemExit) as exited:
        main(["import", str(VLLM), "--store", str(store)])
    assert exited.value.code == 0
