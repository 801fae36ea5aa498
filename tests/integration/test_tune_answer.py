"""The answer of a tune, from real ``tokometer bench`` runs against ``tokometer sim`` servers of known speed
saved in a SQLite store: a variant twice as fast per token is ``better`` on throughput and the best; a run of
the very server the baseline ran on is never ``better`` or ``worse``; the baseline's second run on it gives the
noise floor; the console, the JSON and the report
(markdown and HTML, from the store and from a ``tune --json`` file) say so."""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from tests.conftest import SimServer, bench_stored, run_cli_here, start_sim
from tokometer.store import ResultStore
from tokometer.tune.answer import TuneAnswer, judge
from tokometer.tune.outcome import Startup, TuneRecord, Variant, VariantOutcome
from tokometer.tune.render import answer_json, render_answer

# its module setup benches five runs (100-135 s in the parallel lane); its premise, two runs of one server within
# compare's threshold, is a time: beside the other lanes the noise floor hid a server twice as fast (2026-12-05)
pytestmark = [pytest.mark.slow, pytest.mark.timing]

_LOAD = ("-c", "1,4", "-n", "40", "--warmup", "4", "--input-tokens", "16", "--output-tokens", "32", "--seed", "7")


def _bench(sim: SimServer, store: Path, name: str) -> int:
    return bench_stored(store, "--url", sim.openai_url, *_LOAD, "--label", f"tune t: {name}")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("tune") / "runs.db"


def _variants() -> tuple[Variant, ...]:
    return (Variant(0, "baseline", {"parallel": "1"}),
            Variant(1, "parallel=2", {"parallel": "2"}, ("parallel",)),
            Variant(2, "parallel=4", {"parallel": "4"}, ("parallel",)),
            Variant(3, "quantization=Q2_K", {"parallel": "1", "quantization": "Q2_K"}, ("quantization",)),
            Variant(4, "ctx-size=99999999", {"parallel": "1", "ctx-size": "99999999"}, ("ctx-size",)))


@pytest.fixture(scope="module")
def same_runs(store: Path) -> tuple[int, int, int]:
    """The runs of the server at 5 ms a token: the baseline, 'parallel=2' and the baseline again, one after another.
    TTFT is 200 ms and the simulator paces its events to microseconds: two runs of one server differ by far less
    than compare's threshold (see tests/integration/test_compare.py)."""
    same = start_sim("--ttft-ms", "200", "--itl-ms", "5", "--precise")
    try:
        return _bench(same, store, "baseline"), _bench(same, store, "parallel=2"), _bench(same, store, "baseline again")
    finally:
        same.stop()


@pytest.fixture(scope="module")
def fast_runs(store: Path) -> tuple[int, int]:
    """'parallel=4' and 'quantization=Q2_K', both on one server twice as fast per token (2.5 ms)."""
    fast = start_sim("--ttft-ms", "200", "--itl-ms", "2.5", "--precise")
    try:
        return _bench(fast, store, "parallel=4"), _bench(fast, store, "quantization=Q2_K")
    finally:
        fast.stop()


def _record(variants: tuple[Variant, ...], ids: tuple[int, ...], again_id: int, failed: bool) -> TuneRecord:
    quality = {"verdict": "different", "agreement": 0.4, "error": None}  # as tokometer.tune.quality writes it
    outcomes = tuple(VariantOutcome(v, "finished", run_id=i, startup=Startup(1.5, 0.9),
                                    command_line=("llama-server", "--parallel", v.settings["parallel"]),
                                    quality=quality if v.changes_weights else None)
                     for v, i in zip(variants, ids, strict=False))
    if failed:
        outcomes += (VariantOutcome(variants[4], "failed to start", startup=None, command_line=("llama-server",),
                                    engine_last_words="error: failed to allocate the KV cache: out of memory",
                                    error="the engine exited with status 1 before it answered"),)
    record = TuneRecord("t", "llamacpp", "abc", 7, {"concurrency": [1, 4]}, variants, outcomes,
                        started_at="2026-12-03T16:00:00Z")
    again = VariantOutcome(record.again(), "finished", run_id=again_id, startup=Startup(1.4, 0.9))
    return dataclasses.replace(record, baseline_again=again)


@pytest.fixture(scope="module")
def record(same_runs: tuple[int, int, int], fast_runs: tuple[int, int]) -> TuneRecord:
    """The baseline and 'parallel=2' on one server (5 ms a token), 'parallel=4' and 'quantization=Q2_K' on one
    twice as fast per token (2.5 ms), and a variant that failed to start."""
    baseline, parallel_2, again = same_runs
    return _record(_variants(), (baseline, parallel_2, *fast_runs), again, failed=True)


@pytest.fixture(scope="module")
def answer(store: Path, record: TuneRecord) -> TuneAnswer:
    results = ResultStore(f"sqlite:///{store}", read_only=True)
    try:
        return judge(record, results)
    finally:
        results.close()


def test_the_faster_server_is_better_on_throughput_and_the_best(answer: TuneAnswer) -> None:
    fast = answer.of(2)
    assert fast.headline == "c=4"
    assert fast.verdicts["output_throughput"].word == "better"
    assert fast.verdicts["tpot_p50"].word == "better"
    low, high = fast.verdicts["output_throughput"].interval or (0.0, 0.0)
    assert 0 < low <= high
    assert answer.floor is not None and answer.floor.measured
    assert low > (fast.verdicts["output_throughput"].floor or 1.0)  # beyond the baseline's own drift
    assert [label for label, _ in fast.loads] == ["c=1", "c=4"]
    best = {b.objective: b for b in answer.best}
    # parallel=4 and Q2_K ran on one server: better than the baseline both, not told apart from each other
    assert not best["throughput"].decided and set(best["throughput"].tied) == {"parallel=4", "quantization=Q2_K"}
    assert "cannot decide between" in best["throughput"].text
    assert answer.of(3).quality_text == "faster but different (40% of answers identical)"


@pytest.fixture(scope="module")
def same_answer(store: Path, same_runs: tuple[int, int, int]) -> TuneAnswer:
    """The judgement of a tune of the baseline and 'parallel=2' alone. `judge` holds each variant against the
    baseline and the baseline's second run (the noise floor) only, so 'parallel=2' is judged as in `answer`
    without the faster server's runs: the timing lane, where this test runs alone, benches 3 times, not 5."""
    baseline, parallel_2, again = same_runs
    results = ResultStore(f"sqlite:///{store}", read_only=True)
    try:
        return judge(_record(_variants()[:2], (baseline, parallel_2), again, failed=False), results)
    finally:
        results.close()


@pytest.mark.timing  # its premise: two runs of one server differ by less than compare's threshold, as on a quiet host
def test_the_same_server_twice_is_never_better_or_worse(same_answer: TuneAnswer) -> None:
    same = same_answer.of(1)
    assert same.variant.name == "parallel=2" and same.run is not None and same_answer.floor is not None
    for _, verdicts in same.loads:
        for key, x in verdicts.items():
            assert x.word in ("no change", "cannot decide"), (key, x)


def test_a_failed_variant_and_the_front(answer: TuneAnswer) -> None:
    failed = answer.of(4)
    assert failed.status == "failed to start" and failed.run is None and not failed.verdicts
    names = {p.variant for p in answer.front.points}
    assert names == {"baseline", "parallel=2", "parallel=4", "quantization=Q2_K"}
    on_front = {answer.front.points[i].variant for i in answer.front.front}
    assert on_front & {"parallel=4", "quantization=Q2_K"}
    assert not on_front & {"baseline", "parallel=2"} or len(on_front) > 1


def test_console_and_json(record: TuneRecord, answer: TuneAnswer) -> None:
    out = io.StringIO()
    render_answer(Console(file=out, width=250, color_system=None), record, answer)
    text = out.getvalue()
    assert "parallel=4" in text and "better" in text and "failed to start" in text
    assert "out of memory" in text and "faster but different" in text
    data = json.loads(json.dumps(answer_json(record, answer)))
    assert data["schema"] == "tokometer.tune/1"
    rows = {row["name"]: row for row in data["variants"]}
    assert rows["parallel=4"]["verdicts"]["output_throughput"]["verdict"] == "better"
    assert rows["parallel=2"]["verdicts"]["output_throughput"]["verdict"] in ("no change", "cannot decide")
    assert rows["baseline"]["verdicts"] == {}
    assert set(rows["parallel=4"]["estimate"]) == {"allowed", "reason"}
    assert {b["objective"] for b in data["best"]} == {"throughput", "decode_speed", "ttft_p99", "memory"}
    assert data["pareto"]["front"]


def _report(store: Path, *args: str) -> Any:
    """``tokometer report`` in this process: nine of them were 14 s of this timing-lane module in subprocesses."""
    return run_cli_here("report", "--store", str(store), *args)


def test_the_report_of_a_tune_json_file(tmp_path: Path, store: Path, record: TuneRecord,
                                        answer: TuneAnswer) -> None:
    path = tmp_path / "tune.json"
    path.write_text(json.dumps(answer_json(record, answer)))
    done = _report(store, "--tune-json", str(path), "--format", "md")
    assert done.returncode == 0, done.stderr
    assert "| parallel=4 |" in done.stdout and "better" in done.stdout and "out of memory" in done.stdout
    page = tmp_path / "tune.html"
    done = _report(store, "--tune-json", str(path), "-o", str(page))
    assert done.returncode == 0, done.stderr
    html = page.read_text()
    assert "<table>" in html and "parallel=4" in html and "tokometer-tune" in html
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "tokometer.bench/2"}')
    refused = _report(store, "--tune-json", str(bad), "--format", "md")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and "tokometer.tune/1" in refused.stderr


def test_the_report_of_a_tune_in_the_store(tmp_path: Path, store: Path, record: TuneRecord) -> None:
    results = ResultStore(f"sqlite:///{store}")
    try:
        results.save_tune(record)
    finally:
        results.close()
    done = _report(store, "--tune", "t", "--format", "md")
    assert done.returncode == 0, done.stderr
    assert "## tune t" in done.stdout and "### Best per objective" in done.stdout
    assert "faster but different" in done.stdout and "cannot decide" in done.stdout
    page = tmp_path / "t.html"
    assert _report(store, "--tune", "t", "-o", str(page)).returncode == 0
    embedded = page.read_text().split('id="tokometer-tune">')[1].split("</script>")[0]
    assert json.loads(embedded)["variants"][2]["verdicts"]["output_throughput"]["verdict"] == "better"
    missing = _report(store, "--tune", "nope", "--format", "md")
    assert missing.returncode == 2 and "no tune 'nope'" in missing.stderr
    both = _report(store, "--tune", "t", "3", "--format", "md")
    assert both.returncode == 2 and both.stderr.count("\n") == 1
    nothing = _report(store)
    assert nothing.returncode == 2 and "give the runs to report" in nothing.stderr and nothing.stderr.count("\n") == 1
