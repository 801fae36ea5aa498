"""``bench --find-max`` against the modelled simulator, whose capacity is known from the roofline.

Llama-3.1-8B (AWQ) on one H100-SXM, played 4 times slower (--time-scale 4), with at most 8 sequences in
a batch (--max-num-seqs 8). A decode step of 8 short sequences takes `decode_step_s` (~4.4 ms at the typical
efficiencies, ×4: 17.4 ms, about the 17 ms played step these searches were tuned at; 3.4 ms × 5 until the
efficiencies were chosen again on 2026-12-05, 4.0 ms × 4.2 until the eleventh session's refit), so:

- concurrency: up to 8 requests each get a slot at the next step (TTFT about one step); a 9th waits for a
  whole answer (OUTPUT = 20 steps). The highest concurrency with TTFT p99 within `CONCURRENCY_SLO_STEPS` (8) steps
  is exactly 8. (It was 4 steps: on a VM that wakes every process 6 ms late at p99, probes at 5 and 6 read 66-72 ms
  against 58; 8 steps keeps the same answer with room for a late host.)
- rate: a sequence holds its slot for OUTPUT steps (its prefill step gives the first token), so the engine
  finishes at most 8 / (OUTPUT × step) requests a second. With constant arrivals below that, nothing
  queues; above it, the queue grows through the probe. The rate found must be within 10 % of it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SimServer, run_cli
from tokometer.benchmark import findmax
from tokometer.perf import Deployment, Efficiency, decode_step_s, resolve_hardware, resolve_model
from tokometer.store import ResultStore

SCALE, SEQS, INPUT, OUTPUT = 4.0, 8, 8, 20


CONCURRENCY_SLO_STEPS = 8  # between the ~1 step a slotted request waits and the 20 steps a 9th one waits


def _step_s() -> float:
    d = Deployment(resolve_model("llama-3.1-8b"), resolve_hardware("H100-SXM"), weight_dtype="awq")
    return SCALE * decode_step_s(d, SEQS, SEQS * (INPUT + OUTPUT // 2), Efficiency())


@pytest.fixture
def modelled(sim_factory: Callable[..., SimServer]) -> SimServer:
    return sim_factory("--model", "llama-3.1-8b", "--hardware", "H100-SXM", "--dtype", "awq", "--time-scale",
                       str(SCALE), "--max-num-seqs", str(SEQS))


def _find(sim: SimServer, tmp_path: Path, *args: str) -> tuple[dict[str, Any], int]:
    out = tmp_path / "result.json"
    done = run_cli("bench", "--url", sim.openai_url, "--input-tokens", str(INPUT), "--output-tokens", str(OUTPUT),
                   "--ignore-eos", "--store", str(tmp_path / "runs.db"), "--json", str(out), *args, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Find max: highest load meeting" in done.stdout
    result = json.loads(out.read_text())
    return result, int(result["run_id"])


@pytest.mark.timing
def test_the_highest_concurrency_is_the_engines_batch(modelled: SimServer, tmp_path: Path) -> None:
    limit_ms = CONCURRENCY_SLO_STEPS * 1e3 * _step_s()
    result, run_id = _find(modelled, tmp_path, "--find-max", "concurrency", "-c", "4", "-n", "24",
                           "--slo", f"ttft_p99={limit_ms:.0f}ms")
    search = result["find_max"]
    assert isinstance(search, dict)
    assert search["best"] == SEQS and search["failed_at"] == SEQS + 1 and search["converged"]
    probes = [(p["load"], p["passed"]) for p in search["probes"]]
    assert probes[:3] == [(4, True), (8, True), (16, False)]  # doubled until a miss, then bisected
    assert [s["load"]["concurrency"] for s in result["steps"]] == [p for p, _ in probes]
    # The saved run carries the same answer: recomputed from its spec and steps.
    results = ResultStore(f"sqlite:///{tmp_path / 'runs.db'}", read_only=True)
    try:
        stored = results.run(run_id)
    finally:
        results.close()
    assert stored is not None
    again = findmax.outcome(stored.spec, [(s.index, s.load, s.summary) for s in stored.steps])
    assert again is not None and again.to_json() == search
    # The report marks the answer on the rate-vs-throughput chart and states it in the headline.
    from tokometer.report.data import report_data

    data = report_data([(stored, [])], judge=False)["runs"][0]
    # the answer's mark; one mark "knee and find-max: ..." when the knee is at the same load
    answer = next(m for m in data["annotations"] if m["kind"] in ("find_max", "knee_find_max"))
    assert answer["text"] in (f"find-max: {SEQS} concurrent requests", f"knee and find-max: {SEQS} concurrent requests")
    assert data["steps"][answer["step"]]["label"] == f"c={SEQS}"
    md = run_cli("report", str(run_id), "--store", str(tmp_path / "runs.db"), "--format", "md")
    assert md.returncode == 0, md.stderr
    assert f"Find max: highest load meeting ttft_p99 <= {limit_ms:.0f} ms" in md.stdout, md.stdout


@pytest.mark.timing
def test_the_highest_rate_is_the_engines_capacity(modelled: SimServer, tmp_path: Path) -> None:
    capacity = SEQS / (OUTPUT * _step_s())  # requests/s the batch can finish
    # started at 0.6 × capacity, the bisection's probes (0.6, 1.2, 0.9, 1.05, ...) never sit just under it, where a
    # probe of 60 requests passes or misses by chance (a fixed start of 16/s put one at 98 % once the model's
    # efficiencies changed, and a miss there left 80 %)
    result, _ = _find(modelled, tmp_path, "--find-max", "-r", f"{0.6 * capacity:.2f}", "-n", "60", "--arrival",
                      "constant",
                      "--slo", f"ttft_p99={10 * 1e3 * _step_s():.0f}ms")
    search = result["find_max"]
    assert isinstance(search, dict) and search["kind"] == "rate" and search["converged"]
    assert search["best"] == pytest.approx(capacity, rel=0.10), (search["best"], capacity)
    assert search["failed_at"] > search["best"]
    assert (search["failed_at"] - search["best"]) / search["best"] <= findmax.RESOLUTION + 1e-9
    first_miss = next(p for p in search["probes"] if not p["passed"])
    assert first_miss["saturated"], first_miss  # at twice the start the queue grew


@pytest.mark.timing
def test_a_rate_the_engine_cannot_sustain_is_never_the_answer(modelled: SimServer, tmp_path: Path) -> None:
    """Issue 26: a loose SLO (TTFT p99 within 2 s) holds for a while above capacity, since over 100 requests the
    queue grows too little to break it; the overload test must miss those probes anyway, so the answer is at
    most the engine's capacity, and the answer says a p99 of 100 requests is uncertain.

    The test's power is finite near capacity: over 100 requests it calls about 7 probes in 10 overloaded at
    105 % of capacity and 96 in 100 at 125 % (tests/unit/metrics/test_overload.py; docs/commands/bench.md).
    So what is pinned is what holds nearly always: the answer is within one bisection step (10 %) of the
    capacity, and every probe more than 15 % above it (the search's 32/s, 136 %, and any bisection probe past
    27/s) is missed as overloaded.

    The search starts at 16/s (70 % of the capacity: TTFT p99 about 0.3 s against the 2 s allowed, so it meets),
    doubles to 32/s and bisects down from there: the probes a start at 8/s made, less that first one, which took
    a quarter of the test's time (100 requests at 8/s: 12.7 s) and pinned nothing."""
    capacity = SEQS / (OUTPUT * _step_s())
    result, _ = _find(modelled, tmp_path, "--find-max", "-r", "16", "-n", "100", "--slo", "ttft_p99=2s")
    search = result["find_max"]
    assert isinstance(search, dict)
    assert search["best"] is not None and search["best"] <= 1.1 * capacity, (search["best"], capacity)
    above = [p for p in search["probes"] if p["load"] > 1.15 * capacity]
    assert above and all(not p["passed"] and p["saturated"] for p in above), above
    # The SLO alone would have met at least one of them: the overload test is what missed it.
    assert any(p["observed"]["ttft_p99"] <= 2000 for p in above), above
    assert all(any(m.startswith("overloaded: ") for m in p["misses"]) for p in above)
    assert search["requests_needed"] == 368 and "(-n 368)" in search["answer"]


def test_bad_objectives_are_one_line_errors(modelled: SimServer) -> None:
    cases = {
        ("--find-max", "--slo", "ttft_p99=fast"): "is not a time",
        ("--find-max", "--slo", "speed=1"): "unknown objective 'speed'",
        ("--find-max",): "--find-max needs objectives",
        ("--slo", "ttft_p99=1s"): "give --find-max too",
        ("--find-max", "--slo", "ttft_p99=1s", "--repeat", "2"): "--repeat and --find-max",
        ("--find-max", "--slo", "ttft_p99=1s", "-c", "4"): "leave out --concurrency",
        ("--find-max", "--slo", "goodput=2"): "is not a share",
    }
    for args, message in cases.items():
        done = run_cli("bench", "--url", modelled.openai_url, "--no-store", *args)
        assert done.returncode == 2, (args, done.stderr)
        assert message in done.stderr and done.stderr.count("\n") == 1, (args, done.stderr)
