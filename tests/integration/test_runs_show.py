"""``tokometer runs --id N`` prints the document ``bench --json`` wrote for run N (``tokometer.bench/2``), and so
does ``report N --format json``: a real bench against the simulator, saved to a store and to a file, then shown
from the store."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from tests.conftest import SimServer, run_cli


def test_runs_id_prints_the_document_bench_json_wrote(sim_factory: Callable[..., SimServer], tmp_path: Path) -> None:
    sim = sim_factory("--ttft-ms", "2", "--itl-ms", "2")
    store, written = tmp_path / "runs.db", tmp_path / "run.json"
    done = run_cli("bench", "--url", sim.openai_url, "--model", "sim-model", "--tokenizer", "none", "-c", "1,2",
                   "-n", "6", "--input-tokens", "8", "--output-tokens", "8", "--time-slice", "0.05",
                   "--slo-ttft-ms", "50", "--label", "shown", "--store", str(store), "--json", str(written))
    assert done.returncode == 0, done.stderr
    shown = run_cli("runs", "--store", str(store), "--id", "1")
    assert shown.returncode == 0, shown.stderr
    document = json.loads(written.read_text())
    assert document["schema"] == "tokometer.bench/2" and document["run_id"] == 1 and len(document["steps"]) == 2
    assert document["prompt_source"] and document["warnings"]  # what the store did not keep before
    assert document["steps"][0]["summary"]["time_slices"] and document["spec"]["label"] == "shown"
    assert json.loads(shown.stdout) == document
    assert shown.stdout == written.read_text()  # the same text, too
    reported = run_cli("report", "1", "--store", str(store), "--format", "json")
    assert reported.returncode == 0 and reported.stdout == shown.stdout, reported.stderr
