"""The answer of a tune on hand-made runs: compare's verdicts in the tune's words, the best per objective and
when it cannot be decided, the Pareto front, memory, quality beside speed, and a ``tune --json`` file read as
untrusted input.

The runs are written for the purpose (one request after another, TPOTs drawn from a seeded normal
distribution) and served by a small in-process store that answers ``run(id)`` and ``load_records(id)`` as the
results store does: what is tested is the judgement of given runs, not the store."""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path
from typing import Any, get_args

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

from tokometer.cli.report import _tune_file
from tokometer.compare import gate
from tokometer.load.profiles import LoadStep
from tokometer.records import RequestRecord
from tokometer.runs.stored_spec import StoredSpec
from tokometer.store import StoredRun, StoredStep
from tokometer.tune.answer import OBJECTIVES, WORDS, Candidate, judge, pick_best, quality_line, word_of
from tokometer.tune.outcome import TuneRecord, Variant, VariantOutcome
from tokometer.tune.render import answer_json, render_answer
from tokometer.util.errors import ConfigError

from ..report.test_report_knee import _summary

MS = 1_000_000
C1, C4 = LoadStep("concurrency", 1), LoadStep("concurrency", 4)


def test_every_verdict_of_compare_has_a_word() -> None:
    assert set(WORDS) == set(get_args(gate.Verdict))
    assert word_of("improvement") == "better" and word_of("regression") == "worse"
    assert word_of("no change") == word_of("within threshold") == "no change"
    assert word_of("cannot tell") == "cannot decide"


# -- the best per objective ------------------------------------------------------------------------------------

THROUGHPUT, TTFT = OBJECTIVES[0], OBJECTIVES[2]


def _never(a: str, b: str) -> None:
    raise AssertionError(f"{a} and {b} need not be compared directly")


@pytest.mark.parametrize(("candidates", "winner", "tied"), [
    # a variant better than the baseline, the others not: it is the best
    ([("baseline", 100.0, None), ("p=2", 130.0, "better"), ("p=4", 101.0, "no change")], "p=2", ()),
    # the best value is within noise of the baseline: no winner
    ([("baseline", 100.0, None), ("p=2", 103.0, "no change"), ("p=4", 99.0, "no change")], None, ("p=2", "baseline")),
    ([("baseline", 100.0, None), ("p=2", 140.0, "cannot decide")], None, ("p=2", "baseline")),
    # the baseline is best: decided only when every variant is worse
    ([("baseline", 100.0, None), ("p=2", 80.0, "worse"), ("p=4", 70.0, "worse")], "baseline", ()),
    ([("baseline", 100.0, None), ("p=2", 80.0, "worse"), ("p=4", 99.0, "cannot decide")], None,
     ("baseline", "p=4")),
    # a variant that did not run has no value and does not count
    ([("baseline", 100.0, None), ("p=2", None, None), ("p=4", 120.0, "better")], "p=4", ()),
])
def test_the_best_is_named_only_when_compare_tells_it_apart(candidates: list[Candidate], winner: str | None,
                                                           tied: tuple[str, ...]) -> None:
    best = pick_best(THROUGHPUT, "output_throughput", "tok/s", "baseline", candidates, _never)
    assert best.winner == winner and best.decided == (winner is not None)
    assert best.tied == tied
    assert best.text.startswith(winner or "cannot decide")


def test_two_variants_better_than_the_baseline_are_compared_with_each_other() -> None:
    candidates: list[Candidate] = [("baseline", 100.0, None), ("p=2", 130.0, "better"), ("p=4", 131.0, "better")]
    asked = []

    def tie(a: str, b: str) -> Any:
        asked.append((a, b))
        return "no change"

    best = pick_best(THROUGHPUT, "output_throughput", "tok/s", "baseline", candidates, tie)
    assert asked == [("p=4", "p=2")]
    assert best.winner is None and best.tied == ("p=4", "p=2") and "cannot decide between p=4 and p=2" in best.text
    best = pick_best(THROUGHPUT, "output_throughput", "tok/s", "baseline", candidates, lambda a, b: "better")
    assert best.winner == "p=4" and best.text == "p=4: better than the baseline and than p=2"


def test_lower_is_better_for_latency() -> None:
    candidates: list[Candidate] = [("baseline", 200.0, None), ("p=2", 150.0, "better"), ("p=4", 260.0, "worse")]
    best = pick_best(TTFT, "ttft_p99", "ms", "baseline", candidates, _never)
    assert best.winner == "p=2" and best.value == 150.0


def test_nothing_to_rank() -> None:
    best = pick_best(THROUGHPUT, "output_throughput", "tok/s", "baseline", [("baseline", 100.0, None)], _never)
    assert best.winner is None and not best.decided and "at least one variant" in best.text


@pytest.mark.parametrize(("speed", "quality", "line"), [
    ("better", {"verdict": {"kind": "different"}, "exact_match": 0.4},
     "faster but different (40% of answers identical)"),
    ("better", {"verdict": "same", "agreement": 1.0, "error": None}, "faster, answers the same"),
    ("better", {"verdict": "different", "agreement": 0.25, "error": None},
     "faster but different (25% of answers identical)"),
    ("worse", {"verdict": "worse"}, "slower but less accurate"),
    ("no change", {"verdict": {"kind": "close"}, "exact_match": 0.95},
     "no faster, answers mostly the same (95% of answers identical)"),
    ("cannot decide", None, "speed within noise; quality not measured"),
    (None, {"error": "the evaluation set could not be read"}, "speed not compared; quality not judged: the "
     "evaluation set could not be read"),
])
def test_quality_stands_beside_speed(speed: Any, quality: Any, line: str) -> None:
    assert quality_line(speed, quality) == line


# -- judging hand-made runs ------------------------------------------------------------------------------------


def _records(step: int, tpot_ms: np.ndarray, start_s: float) -> list[RequestRecord]:
    """One request per TPOT, one after another: 21 tokens, the first 50 ms after sending."""
    out, clock = [], int(start_s * 1e9)
    for i, tpot in enumerate(tpot_ms):
        first = clock + 50 * MS
        stamps = [first + round(k * tpot * MS) for k in range(21)]
        out.append(RequestRecord(index=1000 * step + i, step=step, sent_ns=clock, first_token_ns=first,
                                 last_token_ns=stamps[-1], end_ns=stamps[-1] + MS, event_ns=stamps,
                                 event_tokens=[1.0] * 21, output_tokens=21, status=200))
        clock = stamps[-1] + MS
    return out


def _run(run_id: int, tpot_ms: float, seed: int, memory_gib: float | None,
         loads: tuple[tuple[LoadStep, float], ...] = ((C1, 1.0), (C4, 1.0)),
         spec: dict[str, Any] | None = None) -> tuple[StoredRun, list[RequestRecord]]:
    """A load of 80 requests for each of ``loads`` (a load, and its TPOT as a multiple of ``tpot_ms``), TPOT
    drawn around it (2 % spread)."""
    rng = np.random.default_rng(seed)
    records, steps = [], []
    for i, (load, factor) in enumerate(loads):
        tpot = tpot_ms * factor
        records += _records(i, rng.normal(tpot, tpot * 0.02, 80), 100.0 * i)
        gpu = ({"memory_used_max_bytes": memory_gib * 2**30},) if memory_gib is not None else ()
        steps.append(StoredStep(i, load, "t", summary=_summary(21 * 1000 / (50 + 20 * tpot), 1000 / tpot), gpu=gpu))
    run = StoredRun(id=run_id, status="completed", started_at="t", finished_at="t", target="http://x/v1",
                    api="openai-chat", model="m", label=None, spec=StoredSpec(spec or {}), engine=None, host=None,
                    steps=tuple(steps))
    return run, records


class _Store:
    """Answers ``run`` and ``load_records`` from hand-made runs, as `ResultStore` does from its tables."""

    def __init__(self, runs: list[tuple[StoredRun, list[RequestRecord]]]) -> None:
        self.runs = {run.id: (run, records) for run, records in runs}

    def run(self, run_id: int) -> StoredRun | None:
        return self.runs[run_id][0] if run_id in self.runs else None

    def load_records(self, run_id: int) -> list[RequestRecord]:
        return self.runs[run_id][1]


def _again(record: TuneRecord, store: _Store, tpot_ms: float, memory_gib: float | None = None,
           loads: tuple[tuple[LoadStep, float], ...] = ((C1, 1.0), (C4, 1.0)),
           spec: dict[str, Any] | None = None) -> TuneRecord:
    """``record`` with the baseline's second run (run 100, TPOT ``tpot_ms``, another draw) in ``store``."""
    store.runs[100] = _run(100, tpot_ms, 100, memory_gib, loads, spec)
    return dataclasses.replace(record, baseline_again=VariantOutcome(record.again(), "finished", run_id=100))


def _tune() -> tuple[TuneRecord, _Store]:
    """baseline (TPOT 10 ms, 8 GiB; again: 10 ms, another draw, 8 GiB), same (10 ms again, another draw; 8.1 GiB),
    fast (5 ms, 12 GiB), a variant that failed to start, one whose run is gone from the store and one not tried
    yet."""
    names = ["baseline", "same", "fast", "broken", "gone", "later"]
    variants = tuple(Variant(i, name, {"parallel": str(i + 1)}, () if i == 0 else ("parallel",))
                     for i, name in enumerate(names))
    store = _Store([_run(1, 10.0, 1, 8.0), _run(2, 10.0, 2, 8.1), _run(3, 5.0, 3, 12.0)])
    outcomes = [VariantOutcome(v, "finished", run_id=v.index + 1) for v in variants[:3]]
    outcomes += [VariantOutcome(variants[3], "failed to start", engine_last_words="unknown argument: --x",
                                error="the engine exited with status 1"),
                 VariantOutcome(variants[4], "finished", run_id=99)]
    return _again(TuneRecord("t", "llamacpp", "f", 1, {}, variants, tuple(outcomes)), store, 10.0, 8.0), store


@pytest.fixture(scope="module")
def judged() -> Any:
    record, store = _tune()
    return record, judge(record, store)


def test_within_noise_is_never_better_or_worse(judged: Any) -> None:
    _, answer = judged
    same = answer.of(1)
    assert same.headline == "c=4" and [load for load, _ in same.loads] == ["c=1", "c=4"]
    assert {x.word for _, verdicts in same.loads for x in verdicts.values()} <= {"no change", "cannot decide"}
    fast = answer.of(2)
    assert fast.verdicts["tpot_p50"].word == "better" and fast.verdicts["output_throughput"].word == "better"
    low, high = fast.verdicts["tpot_p50"].interval or (0.0, 0.0)
    assert -0.55 < low <= high < -0.45
    assert answer.of(0).verdicts == {} and answer.of(0).headline == "c=4"


def test_the_best_per_objective(judged: Any) -> None:
    _, answer = judged
    best = {b.objective: b for b in answer.best}
    assert best["throughput"].winner == "fast" and best["decode_speed"].winner == "fast"
    assert best["throughput"].text == "fast: better than the baseline"
    assert not best["ttft_p99"].decided  # 80 requests: a p99 is judged from 500
    # memory: 8 and 8.1 GiB are within 5 % of each other
    assert best["memory"].winner is None and best["memory"].tied == ("baseline", "same")
    assert answer.of(0).memory == 8.0 * 2**30 and "GPU memory" in answer.of(0).memory_note


def test_the_front_and_the_variants_without_a_run(judged: Any) -> None:
    record, answer = judged
    on_front = {(answer.front.points[i].variant, answer.front.points[i].point.load) for i in answer.front.front}
    assert on_front == {("fast", "c=1"), ("fast", "c=4")} or {name for name, _ in on_front} == {"fast"}
    assert len(answer.front.points) == 6
    assert answer.of(3).status == "failed to start" and answer.of(3).notes == ("the engine exited with status 1",)
    assert answer.of(4).notes == ("its run 99 is not in the store",)
    assert answer.of(5).status == "not run" and answer.of(5).notes == ("not tried yet",)
    out = io.StringIO()
    render_answer(Console(file=out, width=250, color_system=None), record, answer)
    text = out.getvalue()
    last_words = "broken: failed to start: the engine exited with status 1\n  the engine's last words:\n    unknown"
    assert last_words in text
    data = answer_json(record, answer)
    json.dumps(data, allow_nan=False)
    assert [row["status"] for row in data["variants"]] == ["finished"] * 3 + ["failed to start", "finished",
                                                                             "not run"]
    assert data["variants"][2]["verdicts"]["tpot_p50"]["verdict"] == "better"
    # estimate needs to know the model: a hand-made run does not say
    assert data["variants"][0]["estimate"]["allowed"] is None
    assert "--model is required for run 1" in data["variants"][0]["estimate"]["reason"]


def test_without_a_baseline_run_nothing_is_compared() -> None:
    record, store = _tune()
    store.runs.pop(1)
    answer = judge(record, store)
    assert answer.of(0).notes == ("its run 1 is not in the store",)
    assert answer.of(2).verdicts == {}
    assert answer.of(2).notes == ("the baseline has no run: nothing to compare against",)
    assert all(not b.decided for b in answer.best if b.objective != "memory")


def _all_finished(names: list[str], runs: list[tuple[StoredRun, list[RequestRecord]]],
                  again_tpot_ms: float = 10.0) -> Any:
    variants = tuple(Variant(i, n, {}, () if i == 0 else ("x",)) for i, n in enumerate(names))
    record = TuneRecord("x", "llamacpp", "f", 1, {}, variants,
                        tuple(VariantOutcome(v, "finished", run_id=v.index + 1) for v in variants))
    store = _Store(runs)
    return judge(_again(record, store, again_tpot_ms), store)


def test_two_variants_better_than_the_baseline_are_compared_directly() -> None:
    """'a' and 'b' both decode at 5 ms against the baseline's 10: each better, not told apart; 'c' at 4 ms is
    better than both, compared with each directly."""
    runs = [_run(1, 10.0, 1, None), _run(2, 5.0, 2, None), _run(3, 5.0, 3, None)]
    best = {b.objective: b for b in _all_finished(["baseline", "a", "b"], runs).best}
    assert best["decode_speed"].winner is None and set(best["decode_speed"].tied) == {"a", "b"}
    best = {b.objective: b for b in _all_finished(["baseline", "a", "b", "c"], [*runs, _run(4, 4.0, 4, None)]).best}
    assert best["decode_speed"].winner == "c" and best["decode_speed"].text.endswith("and than a, b")


def test_runs_cut_short_are_judged_where_they_can_be() -> None:
    """'empty' saved no step, 'partial' only c=1 (not the baseline's heaviest load: compared, not ranked), 'gap'
    ran c=4 twice as fast but no request of its c=1 was measured: it is compared at c=4, ranked, and best."""
    base = _run(1, 5.0, 1, None)
    empty: tuple[StoredRun, list[RequestRecord]] = (dataclasses.replace(base[0], id=2, steps=()), [])
    partial = (dataclasses.replace(base[0], id=3, steps=base[0].steps[:1]), [r for r in base[1] if r.step == 0])
    fast = _run(4, 2.5, 4, None)
    gap = (fast[0], [r for r in fast[1] if r.step == 1])
    variants = tuple(Variant(i, n, {}, () if i == 0 else ("x",))
                     for i, n in enumerate(["baseline", "empty", "partial", "gap"]))
    record = TuneRecord("x", "llamacpp", "f", 1, {}, variants,
                        tuple(VariantOutcome(v, "finished", run_id=v.index + 1) for v in variants))
    store = _Store([base, empty, partial, gap])
    answer = judge(_again(record, store, 5.0), store)
    assert answer.of(1).verdicts == {} and answer.of(1).headline is None
    assert answer.of(1).notes[-1] == "no load in common with the baseline: nothing compared"
    assert answer.of(2).headline == "c=1" and not answer.of(2).ranked
    assert "not at the baseline's c=4: not ranked" in answer.of(2).notes[-1]
    assert answer.of(3).ranked and [load for load, _ in answer.of(3).loads] == ["c=4"]
    assert answer.of(3).notes == ("c=1 not compared: no requests measured in NEW",)
    assert {b.objective: b.winner for b in answer.best}["throughput"] == "gap"


def test_find_max_runs_are_judged_at_their_answers() -> None:
    """``--find-max concurrency --slo tpot_p50=8ms``: the baseline (TPOT 5 ms at c=1, 10 ms at c=2) meets it
    up to c=1; the variant (2.5, 4, 10 ms at c=1, 2, 4) up to c=2. The headline compares the answers, c=2
    against c=1; the loads both probed (c=1, c=2) are compared load by load."""
    spec = {"find_max": "concurrency", "slo": "tpot_p50=8ms", "concurrency": [1]}
    c2 = LoadStep("concurrency", 2)
    base = _run(1, 5.0, 1, None, ((C1, 1.0), (c2, 2.0)), spec)
    new = _run(2, 5.0, 2, None, ((C1, 0.5), (c2, 0.8), (C4, 2.0)), spec)
    variants = (Variant(0, "baseline", {"parallel": "1"}), Variant(1, "parallel=2", {"parallel": "2"}, ("parallel",)))
    record = TuneRecord("f", "llamacpp", "f", 1, {}, variants,
                        tuple(VariantOutcome(v, "finished", run_id=v.index + 1) for v in variants))
    store = _Store([base, new])
    answer = judge(_again(record, store, 5.0, None, ((C1, 1.0), (c2, 2.0)), spec), store)
    assert answer.of(0).headline == "find-max answer c=1"
    variant = answer.of(1)
    assert variant.headline == "find-max answer c=2 (baseline c=1)"
    assert variant.verdicts["tpot_p50"].word == "better" and 0.75 < (variant.verdicts["tpot_p50"].new or 0) / 5 < 0.85
    assert [load for load, _ in variant.loads] == ["c=1", "c=2"]
    assert not any("load 1" in note for note in variant.notes)
    best = {b.objective: b for b in answer.best}
    assert best["throughput"].label == "throughput under the SLO (output tok/s at the find-max answer)"
    assert best["throughput"].winner == "parallel=2"


# -- a tune --json file is untrusted input ----------------------------------------------------------------------

_SCALAR = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5)
_JSON = _SCALAR | st.lists(_SCALAR, max_size=3) | st.dictionaries(st.text(max_size=5), _SCALAR, max_size=3)
_KEYS = ("schema", "name", "engine", "fingerprint", "seed", "workload", "variants", "index", "settings",
         "changed", "status", "run_id", "startup_s", "warm_startup_s", "quality", "command_line", "baseline_again",
         "peak_memory_bytes", "peak_memory_note")


def _document(tmp: Path, data: Any) -> Path:
    path = tmp / "tune.json"
    path.write_text(json.dumps(data))
    return path


@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(base=st.dictionaries(st.sampled_from(_KEYS), _JSON, max_size=3),
       row=st.dictionaries(st.sampled_from(_KEYS), _JSON, max_size=3))
def test_a_tune_file_is_read_or_refused_in_one_line(tmp_path_factory: pytest.TempPathFactory, base: dict[str, Any],
                                                   row: dict[str, Any]) -> None:
    """Any JSON with the record's keys holding any values: a `TuneRecord`, or one `ConfigError` line."""
    good: dict[str, Any] = {
        "schema": "tokometer.tune/1", "name": "t", "engine": "llamacpp", "fingerprint": "f", "seed": 1,
        "workload": {}, "variants": [{"index": 0, "name": "baseline", "settings": {}, "status": "not run"}]}
    data = {**good, **base, "variants": [{**good["variants"][0], **row}]}
    path = _document(tmp_path_factory.mktemp("fuzz"), data)
    try:
        record = _tune_file(path)
    except ConfigError as exc:
        assert "\n" not in str(exc) and "tune" in str(exc)
        return
    assert isinstance(record, TuneRecord) and record.variants


@pytest.mark.parametrize("data", [[], "x", {"schema": "tokometer.bench/2"}, {"schema": "tokometer.tune/1"},
                                  {"schema": "tokometer.tune/1", "name": "t", "engine": "e", "fingerprint": "f",
                                   "seed": 1e400, "workload": {}, "variants": []}])
def test_hostile_tune_files(tmp_path: Path, data: Any) -> None:
    path = tmp_path / "tune.json"
    path.write_text(json.dumps(data) if data != "x" else "{not json")
    with pytest.raises(ConfigError, match=r"tokometer\.tune/1"):
        _tune_file(path)
