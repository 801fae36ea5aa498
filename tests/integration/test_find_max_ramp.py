"""``bench --find-max rate --search ramp`` against the modelled simulator, whose capacity is known from the roofline.

The simulator is tests/integration/test_find_max.py's (Llama-3.1-8B AWQ on one H100-SXM, played `SCALE` times
slower, at most 8 sequences in a batch), so the engine finishes at most 8 / (OUTPUT × decode step) requests a
second (about 22.9/s). The ramp search runs one ramp from 4 to 40 req/s over 6 s, judged slice by slice, then steady
probes; the same search by bisection runs beside it on the same server. The ramp's answer must be a steady probe
that met, within the bisection test's 10 % of the capacity (or, on a crowded host, no farther than bisection's own
answer and one step); below, no farther than its failing slice may lie (15 %) and one step, since three steady
probes may end at that slice's load (the candidate under it, then the slice's load itself, confirming it, then one
above). The ramp must take fewer probes and fewer requests than the bisection.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SimServer, bench_stored, run_cli
from tests.integration.test_find_max import CONCURRENCY_SLO_STEPS, INPUT, OUTPUT, SCALE, SEQS, _step_s
from tokometer.benchmark import findmax
from tokometer.store import ResultStore

SLO = f"ttft_p99={10 * 1e3 * _step_s():.0f}ms"  # ten decode steps: met below capacity, broken by a growing queue


@pytest.fixture
def modelled(sim_factory: Callable[..., SimServer]) -> SimServer:
    return sim_factory("--model", "llama-3.1-8b", "--hardware", "H100-SXM", "--dtype", "awq", "--time-scale",
                       str(SCALE), "--max-num-seqs", str(SEQS))


def _search(sim: SimServer, tmp_path: Path, name: str, *args: str) -> tuple[dict[str, Any], str, int]:
    out = tmp_path / f"{name}.json"
    done = run_cli("bench", "--url", sim.openai_url, "--input-tokens", str(INPUT), "--output-tokens", str(OUTPUT),
                   "--ignore-eos", "--store", str(tmp_path / "runs.db"), "--json", str(out), "-n", "60",
                   "--arrival", "constant", "--find-max", "rate", "--slo", SLO, *args, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(out.read_text())
    return result, done.stdout, int(result["run_id"])


def _requests(result: dict[str, Any]) -> int:
    return sum(int(s["summary"]["requests_completed"]) + int(s["summary"]["requests_failed"]) for s in result["steps"])


@pytest.mark.timing
def test_one_ramp_then_steady_probes_finds_the_capacity_with_less(modelled: SimServer, tmp_path: Path) -> None:
    capacity = SEQS / (OUTPUT * _step_s())
    ramp, printed, run_id = _search(modelled, tmp_path, "ramp", "--search", "ramp", "-r", "40", "--ramp-from", "4",
                                    "--ramp-time", "6s")
    search = ramp["find_max"]
    assert search["search"] == "ramp" and search["ramp"]["step"] == 0
    # The answer is a steady probe that met, within the bisection test's tolerance of the capacity.
    steady = {p["load"]: p for p in search["probes"]}
    assert search["best"] in steady and steady[search["best"]]["passed"], search
    assert ramp["steps"][0]["load"]["ramp"] == {"strategy": "linear", "from": 4.0, "to": 40.0, "duration_s": 6.0}
    assert all("ramp" not in s["load"] for s in ramp["steps"][1:])
    # The ramp found where it broke, and says which slice and why.
    failed = search["ramp"]["failed_slice"]
    assert failed is not None, search["ramp"]
    slice_ = next(s for s in search["ramp"]["slices"] if s["index"] == failed)
    # Within 15 % below the capacity counted from the decode step alone: the simulator's steps also carry each
    # request's prefill, so TTFT starts to climb a little below it (a slice at 20.2/s of 22.9 counted, sustaining
    # 19.6/s, was seen to miss there on a quiet host; the steady probes then find the capacity itself).
    assert not slice_["passed"] and slice_["misses"] and slice_["load"] > capacity * 0.85, slice_
    assert f"first lasting miss slice {failed} (" in printed and "first steady probe" in printed
    assert search["failed_at"] is not None and search["failed_at"] > search["best"]
    # The saved run carries the same answer, recomputed from its spec and steps.
    results = ResultStore(f"sqlite:///{tmp_path / 'runs.db'}", read_only=True)
    try:
        stored = results.run(run_id)
    finally:
        results.close()
    assert stored is not None
    again = findmax.outcome(stored.spec, [(s.index, s.load, s.summary) for s in stored.steps])
    assert again is not None and again.to_json() == search

    # The same search by bisection, on the same server.
    bisect, _, _ = _search(modelled, tmp_path, "bisect", "-r", "16")
    other = bisect["find_max"]
    ramp_probes, bisect_probes = len(ramp["steps"]), len(bisect["steps"])
    ramp_requests, bisect_requests = _requests(ramp), _requests(bisect)
    print(f"ramp: {ramp_probes} steps, {ramp_requests} requests, best {search['best']:g}; bisection: "
          f"{bisect_probes} steps, {bisect_requests} requests, best {other['best']}; capacity {capacity:.4g}")
    assert other["search"] == "bisect" and other["converged"], other
    # Within bisection's tolerance of the capacity (test_find_max.py: 10 %); on a crowded host, where the simulator's
    # steps run late and both searches err low (docs/status.md), no farther from it than bisection's answer and
    # one bisection step. Below, the failing slice may lie 15 % under the decode-only capacity (above), and the cap
    # of three steady probes can stop at its load: before its miss was confirmed steadily, the search answered
    # 19.53/s against 23.08 counted three runs in a row here (its slice at 20.2), where bisection met 22.0; with the
    # confirmation it answered 22, as bisection did, in 4 steps and 312 requests.
    slack = max(0.10, abs(other["best"] - capacity) / capacity + findmax.RESOLUTION)
    under = max(slack, 0.15 + findmax.RESOLUTION)
    assert -under * capacity <= search["best"] - capacity <= slack * capacity, (search["answer"], other["answer"],
                                                                               capacity)
    assert ramp_probes < bisect_probes and ramp_requests < bisect_requests, (ramp_probes, bisect_probes,
                                                                              ramp_requests, bisect_requests)


def test_a_ramp_search_is_refused_without_its_ramp(modelled: SimServer) -> None:
    cases = {
        ("--find-max", "--slo", "ttft_p99=1s", "--search", "ramp", "-r", "40"): "give all three",
        ("--search", "ramp", "-r", "40", "--ramp-from", "2", "--ramp-time", "5s"): "give --find-max too",
        ("--find-max", "--slo", "ttft_p99=1s", "--ramp", "linear", "--ramp-from", "2", "--ramp-time", "5s",
         "-r", "40"): "give --search ramp",
    }
    for args, message in cases.items():
        done = run_cli("bench", "--url", modelled.openai_url, "--no-store", *args)
        assert done.returncode == 2, (args, done.stderr)
        assert message in done.stderr and done.stderr.count("\n") == 1, (args, done.stderr)


def test_the_report_timeline_draws_the_ramps_target(sim_factory: Callable[..., SimServer], tmp_path: Path) -> None:
    """A rate ramped from 2 to 20 req/s over 2 s, then held, on the plain simulator; ``tokometer report`` opened
    in a real Chromium offline (tests/integration/test_report.py's `open_offline`): the timeline carries the
    ramp's target on its second axis, rising from 2 to 20 over the ramp's 2 s and held to the last send."""
    from tests.integration.test_report import open_offline

    sim = sim_factory()
    store = tmp_path / "runs.db"
    run_id = bench_stored(store, "--url", sim.openai_url, "--input-tokens", "8", "--output-tokens", "8", "-r", "20",
                          "--ramp", "linear", "--ramp-from", "2", "--ramp-time", "2s", "-n", "40")
    out = tmp_path / "report.html"
    done = run_cli("report", str(run_id), "--store", str(store), "-o", str(out))
    assert done.returncode == 0, done.stderr
    page = open_offline(out)
    assert not page.errors and not page.requests, (page.errors, page.requests)
    targets = [t for t in page.traces[f"chart-timeline-run-{run_id}"] if (t["meta"] or {}).get("ramp")]
    assert len(targets) == 1, page.traces[f"chart-timeline-run-{run_id}"]
    x, y = targets[0]["x"], targets[0]["y"]
    assert y[:2] == [2.0, 20.0] and x[1] - x[0] == pytest.approx(2.0), (x, y)
    sends = page.data["runs"][0]["timeline"]["columns"]["sent_s"]
    assert x[0] <= min(sends) + 0.05 and (len(x) == 2 or (y[2] == 20.0 and x[2] == pytest.approx(max(sends), abs=0.05)))


@pytest.mark.timing
def test_a_concurrency_ramp_finds_the_engines_batch(modelled: SimServer, tmp_path: Path) -> None:
    """Over concurrency: up to 8 requests each get a slot at the next decode step; a 9th waits for a whole answer
    (20 steps), so with TTFT p99 within 8 steps the highest concurrency that meets is exactly 8
    (test_find_max.py's bisection finds the same). One ramp of slots from 2 to 16 over 6 s, then at most three
    steady probes of 24 requests: the answer is a steady probe that met and never above 8. It may be below: a p99 of
    24 requests is nearly their maximum, so one decode step the simulator runs 40 ms late on a shared host (seen
    here: the steady probes at 8 and 7 both missed once, where bisection's test misses the same way) fails a probe
    below the batch; at least 6 is required. Each probe starts with 8 warm-up requests: without them the first steady
    probe could meet a simulator still finishing the ramp's last 16 answers (probes at 8, 6 and 5 all missed once,
    TTFT p99 81-118 ms); the search adds no warm-up of its own (docs/status.md)."""
    limit_ms = CONCURRENCY_SLO_STEPS * 1e3 * _step_s()
    out = tmp_path / "ramp.json"
    done = run_cli("bench", "--url", modelled.openai_url, "--input-tokens", str(INPUT), "--output-tokens", str(OUTPUT),
                   "--ignore-eos", "--store", str(tmp_path / "runs.db"), "--json", str(out), "-n", "24",
                   "--warmup", "8", "--find-max", "concurrency", "--slo", f"ttft_p99={limit_ms:.0f}ms",
                   "--search", "ramp", "-c", "16", "--ramp-from", "2", "--ramp-time", "6s", timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(out.read_text())
    search = result["find_max"]
    steady = {p["load"]: p for p in search["probes"]}
    assert search["best"] in steady and steady[search["best"]]["passed"], search
    assert SEQS - 2 <= search["best"] <= SEQS, search["answer"]
    failed = search["ramp"]["failed_slice"]
    assert failed is not None and search["failed_at"] is not None and search["failed_at"] > search["best"]
    assert len(result["steps"]) <= 4  # the ramp and at most three steady probes
