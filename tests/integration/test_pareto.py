"""The Pareto front of two real runs (issue 26): ``bench`` against two ``tokometer sim`` servers, one of them
twice as fast in every respect (half the TTFT and half the time per token), so its front dominates by
construction: at each load it gives about twice the throughput at about twice the per-request speed.

Real servers on loopback (the simulator, as a subprocess); the runs are read back from the store by ``report``
and ``compare`` as a user runs them."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import SimServer, bench_stored, run_cli, run_cli_here

_LOAD = ("-c", "1,4", "-n", "24", "--input-tokens", "16", "--output-tokens", "32", "--seed", "1")


@pytest.mark.slow  # 45-55 s in the parallel lane
def test_the_twice_as_fast_servers_front_dominates(sim_factory: Callable[..., SimServer], tmp_path: Path) -> None:
    store = tmp_path / "runs.db"
    slow = sim_factory("--ttft-ms", "40", "--itl-ms", "8", "--load-slowdown", "0.2")
    fast = sim_factory("--ttft-ms", "20", "--itl-ms", "4", "--load-slowdown", "0.2")
    base = bench_stored(store, "--url", slow.openai_url, *_LOAD)
    new = bench_stored(store, "--url", fast.openai_url, *_LOAD)

    done = run_cli_here("compare", str(base), str(new), "--store", str(store), "--json")
    assert done.returncode in (0, 1), done.stderr
    front = json.loads(done.stdout)["pareto"]
    assert front["verdict"] == "new dominates", front
    assert front["basis"] == "total" and "per GPU unknown" in front["note"]  # the simulator names no GPUs
    assert front["base_front"] and all(p["dominated_by"] is not None for p in front["base_front"])
    assert all(p["dominated_by"] is None for p in front["new_front"])
    # twice as fast: each load's decode speed about doubles (the client's own delays keep it from exactly 2)
    speeds = {(p["run"], p["load"]): p["decode_speed_p50"] for p in front["base_front"] + front["new_front"]}
    for (run, load), speed in speeds.items():
        if run == new and (base, load) in speeds:
            assert 1.6 < speed / speeds[(base, load)] < 2.4, speeds
    table = run_cli("compare", str(base), str(new), "--store", str(store))
    assert f"Pareto: run {new}'s front dominates run {base}'s" in table.stdout, table.stdout

    md = run_cli_here("report", str(base), str(new), "--store", str(store), "--format", "md")
    assert md.returncode == 0, md.stderr
    rows = [line for line in md.stdout.splitlines() if re.match(r"\| #\d+ \|", line)]
    assert len(rows) == 4, md.stdout  # two loads of each run
    # the fast run's two loads are a trade-off (the slowdown per request in flight): both on the front
    assert all("on the front" in row for row in rows if f"| run {new} |" in row), md.stdout
    assert all("dominated by" in row and f"(run {new} " in row for row in rows if f"| run {base} |" in row), md.stdout


def test_gpus_stated_with_bench_make_a_url_run_per_gpu(sim_factory: Callable[..., SimServer], tmp_path: Path) -> None:
    """``bench --gpus 2`` against a URL (the simulator names no GPUs): each step's throughput per GPU is half its
    total, the spec keeps it, and the report's and compare's Pareto fronts are per GPU with it as the source."""
    store, out = tmp_path / "runs.db", tmp_path / "run.json"
    sim = sim_factory("--ttft-ms", "20", "--itl-ms", "4")
    run = bench_stored(store, "--url", sim.openai_url, *_LOAD, "--gpus", "2", "--json", str(out))
    data = json.loads(out.read_text())
    assert data["spec"]["gpus"] == 2
    for step in data["steps"]:
        s = step["summary"]
        assert s["output_throughput_per_gpu_tok_s"] == s["output_throughput_tok_s"] / 2
    md = run_cli_here("report", str(run), "--store", str(store), "--format", "md")
    assert md.returncode == 0 and "against output tok/s per GPU" in md.stdout, md.stdout
    done = run_cli_here("compare", str(run), str(run), "--store", str(store), "--json")
    front = json.loads(done.stdout)["pareto"]
    assert front["basis"] == "per GPU" and "2 GPUs from bench --gpus" in front["note"], front
    bad = run_cli("bench", "--url", sim.openai_url, "-c", "1", "-n", "1", "--gpus", "0", "--no-store")
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == [
        "tokometer: error: Invalid value for '--gpus': 0 is not in the range 1<=x<=65536. "
        "(see 'tokometer bench --help')"]
