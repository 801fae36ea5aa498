"""``tokometer report --format csv|json`` for saved runs, and the typed reading of a run behind it.

Real runs of ``tokometer bench`` against ``tokometer sim`` on loopback, saved to a SQLite store and written with
``--json`` and ``--csv`` at the same time: the saved run, and the JSON file read back, must report exactly what
the live run wrote, and
every summary must read back as the typed `StepSummary` that wrote it."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SimServer, run_cli, run_cli_here, start_sim
from tokometer.metrics.summary import StepSummary
from tokometer.store import ResultStore, StoredRun


@pytest.fixture(scope="module")
def sim() -> Iterator[SimServer]:
    server = start_sim("--ttft-ms", "20", "--itl-ms", "2")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def saved(sim: SimServer, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int, dict[str, Any], str]:
    """One sweep of two steps (with --repeat 2 for trials, and --slo for goodput): the store, the run's id,
    bench's JSON and bench's CSV."""
    root = tmp_path_factory.mktemp("formats")
    store, out_json, out_csv = root / "runs.db", root / "out.json", root / "out.csv"
    done = run_cli("bench", "--url", sim.openai_url, "-c", "1,3", "-n", "6", "--input-tokens", "24",
                   "--output-tokens", "8", "--repeat", "2", "--slo-ttft-ms", "500", "--store", str(store),
                   "--json", str(out_json), "--csv", str(out_csv))
    assert done.returncode == 0, done.stderr
    data = json.loads(out_json.read_text())
    assert isinstance(data["run_id"], int)
    return store, data["run_id"], data, out_csv.read_bytes().decode()


def test_summaries_read_back_typed(saved: tuple[Path, int, dict[str, Any], str]) -> None:
    """bench's JSON and the store's rows hold the same summaries, and each reads as the StepSummary that
    wrote it: to_json(from_json(x)) == x."""
    store, run_id, data, _ = saved
    results = ResultStore(f"sqlite:///{store}", read_only=True)
    try:
        run = results.run(run_id)
    finally:
        results.close()
    assert run is not None and len(run.steps) == len(data["steps"]) == 4
    for stored, written in zip(run.steps, data["steps"], strict=True):
        typed = stored.summary
        assert isinstance(typed, StepSummary) and typed.requests_completed == 6
        assert typed.to_json() == written["summary"]
        assert typed.goodput_rps is not None and typed.text_check is not None
    from_file = StoredRun.from_bench_json(data)
    assert [s.to_json() for s in from_file.steps] == [s.to_json() for s in run.steps] == data["steps"]


def test_old_summary_reads_with_defaults() -> None:
    """A summary from before a metric existed reads with that metric empty, not an error."""
    old = StepSummary.from_json({"requests_completed": 2, "requests_failed": 0, "duration_s": 1.5,
                                 "ttft_ms": {"count": 2, "mean": 10.0, "p50": 10.0, "p99.9": 11.0},
                                 "output_tokens": {"total": 16, "source": {"usage": 2}}})
    assert (old.requests_completed, old.output_tokens_total, old.ttft_ms.p99_9) == (2, 16, 11.0)
    assert old.connect_ms.count == 0 and old.send_rate_rps is None and old.errors == {}


def test_report_csv_of_saved_run_is_bench_csv(saved: tuple[Path, int, dict[str, Any], str], tmp_path: Path) -> None:
    """``report ID --format csv`` and ``report FILE.json --format csv`` print the rows bench --csv wrote."""
    store, run_id, _, live_csv = saved
    done = run_cli_here("report", str(run_id), "--store", str(store), "--format", "csv")
    assert done.returncode == 0, done.stderr
    assert done.stdout.replace("\r\n", "\n") == live_csv.replace("\r\n", "\n")
    windows = [row["window"] for row in csv.DictReader(io.StringIO(live_csv))]
    assert windows.count("step") == 4 and set(windows) <= {"step", "steady"}  # a row per step, then its steady state
    out_json = tmp_path / "copy.json"
    out_json.write_text(json.dumps(saved[2]))
    written = tmp_path / "from-file.csv"
    done = run_cli_here("report", str(out_json), "--format", "csv", "-o", str(written))
    assert done.returncode == 0, done.stderr
    assert written.read_bytes().decode() == live_csv


def test_report_json_of_saved_run_is_bench_json(saved: tuple[Path, int, dict[str, Any], str], tmp_path: Path) -> None:
    """``report ID --format json`` gives bench's JSON back whole, and so does the file read back."""
    store, run_id, data, _ = saved
    done = run_cli_here("report", f"{run_id}", "--store", str(store), "--format", "json")
    assert done.returncode == 0, done.stderr
    from_store = json.loads(done.stdout)
    assert from_store == data and from_store["prompt_source"]  # the store keeps the prompt source and warnings too
    assert from_store["steps"] == data["steps"] and from_store["find_max"] is None
    copy = tmp_path / "copy.json"
    copy.write_text(json.dumps(data))
    done = run_cli_here("report", str(copy), "--format", "json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == data


@pytest.mark.parametrize(("content", "message"), [
    ("{not json", "not JSON"), ('{"schema": "other/1"}', "not a tokometer.bench/2 result"),
    ('{"schema": "tokometer.bench/1", "steps": []}', "malformed tokometer.bench/1"),
    ('{"schema": "tokometer.bench/2", "status": "completed", "steps": [{"index": 0}]}', "malformed tokometer.bench/2"),
])
def test_bad_result_file_is_one_line(tmp_path: Path, content: str, message: str) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    done = run_cli_here("report", str(bad), "--format", "csv")
    assert done.returncode == 2
    assert message in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_huge_or_deeply_nested_result_file_is_refused_in_one_line(tmp_path: Path) -> None:
    """A file larger than any result (sparse: it costs no disk) is refused after reading at most the limit
    and a byte; one nested too deep for the parser is a one-line error too."""
    from tokometer.cli.report import MAX_RESULT_BYTES

    huge = tmp_path / "huge.json"
    with huge.open("wb") as handle:
        handle.truncate(4 * MAX_RESULT_BYTES)
    done = run_cli("report", str(huge), "--format", "csv")
    assert done.returncode == 2 and "larger than 256 MiB" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 200_000 + "]" * 200_000)
    done = run_cli("report", str(deep), "--format", "json")
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_csv_takes_one_run_and_html_no_file(saved: tuple[Path, int, dict[str, Any], str], tmp_path: Path) -> None:
    store, run_id, _, _ = saved
    done = run_cli_here("report", str(run_id), str(run_id + 1), "--store", str(store), "--format", "json")
    assert done.returncode == 2 and "reports one run" in done.stderr
    done = run_cli_here("report", str(tmp_path / "x.json"), "--format", "md")
    assert done.returncode == 2 and "--format csv or json" in done.stderr


def test_every_optional_block_reads_back(sim_factory: Any, tmp_path: Path) -> None:
    """Reasoning, shared prefixes and multi-turn sessions fill the summary's optional blocks: each reads back
    as the type and writes the same JSON again."""
    sim = sim_factory("--ttft-ms", "10", "--itl-ms", "1", "--reasoning-tokens", "6")
    runs = [("--prefix-tokens", "16", "--prefix-groups", "2", "-c", "2", "-n", "8"),
            ("--sessions", "2", "--turns", "2", "-c", "2")]
    seen: set[str] = set()
    for i, args in enumerate(runs):
        out = tmp_path / f"{i}.json"
        done = run_cli("bench", "--url", sim.openai_url, "--input-tokens", "24", "--output-tokens", "12",
                       "--no-store", "--json", str(out), *args)
        assert done.returncode == 0, done.stderr
        data = json.loads(out.read_text())
        assert data["run_id"] is None
        run = StoredRun.from_bench_json(data)
        for step, written in zip(run.steps, data["steps"], strict=True):
            typed = step.summary
            assert typed is not None and typed.to_json() == written["summary"]
            seen |= {name for name in ("reasoning", "ttft_cold_prefix_ms", "per_turn", "session_stats")
                     if getattr(typed, name) is not None}
    assert seen == {"reasoning", "ttft_cold_prefix_ms", "per_turn", "session_stats"}
