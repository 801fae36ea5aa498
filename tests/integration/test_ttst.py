"""Time to second token against the simulator's script: it sends one token per event, the first ``--ttft-ms``
after the request and each next one ``--itl-ms`` later, so TTST is about TTFT + ITL in every output."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import SimServer, run_cli


@pytest.mark.timing
def test_ttst_is_ttft_plus_one_itl_of_the_simulator(sim_factory: Callable[..., SimServer], tmp_path: Path) -> None:
    sim = sim_factory("--ttft-ms", "60", "--itl-ms", "25")
    out, table = tmp_path / "run.json", tmp_path / "run.csv"
    done = run_cli("bench", "--url", sim.openai_url, "-c", "2", "-n", "8", "--input-tokens", "8",
                   "--output-tokens", "6", "--tokenizer", "none", "--time-slice", "1s", "--store",
                   str(tmp_path / "runs.db"), "--json", str(out), "--csv", str(table))
    assert done.returncode == 0, done.stderr
    assert "TTST (ms)" in done.stdout
    summary = json.loads(out.read_text())["steps"][0]["summary"]
    ttft, ttst, itl = (summary[k]["p50"] for k in ("ttft_ms", "ttst_ms", "itl_ms"))
    assert summary["ttst_ms"]["count"] == summary["ttft_ms"]["count"] == 8
    assert ttst == pytest.approx(ttft + itl, abs=5.0) and itl == pytest.approx(25.0, abs=5.0)
    assert all(sl["ttst_ms"]["count"] == sl["ttft_ms"]["count"] for sl in summary["time_slices"]["slices"])
    rows = list(csv.DictReader(io.StringIO(table.read_text())))
    assert float(rows[0]["ttst_ms_p50"]) == pytest.approx(ttst)
