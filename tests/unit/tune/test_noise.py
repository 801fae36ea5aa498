"""The noise floor of a tune, against truth: a drift the baseline itself shows between its two runs is never
called better or worse, a large real effect still is, and without a second baseline run nothing is.

The runs are hand-made as in test_answer.py (one request after another, TPOT drawn from a seeded normal
distribution): here the truth is known, which a real server on a shared 2-core host cannot give on demand (the
same judgement of real llama.cpp runs is in tests/integration/test_tune_noise.py).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from tokometer.tune.answer import judge
from tokometer.tune.noise import MEMORY_TIE, apply_floor, floor_of, memory_tie
from tokometer.tune.outcome import TuneRecord, Variant, VariantOutcome
from tokometer.tune.verdicts import MetricVerdict

from .test_answer import _again, _run, _Store


def _verdict(word: Any, change: float, interval: tuple[float, float] | None) -> MetricVerdict:
    return MetricVerdict("output_throughput", "output throughput", "tok/s", True, word, 100.0, 100.0 * (1 + change),
                         change, interval)


def test_the_floor_is_the_far_end_of_the_baselines_own_interval() -> None:
    assert floor_of(_verdict("no change", 0.02, (-0.10, 0.25))) == pytest.approx(0.25)
    assert floor_of(_verdict("no change", -0.04, None)) == pytest.approx(0.04)


@pytest.mark.parametrize(("word", "interval", "drift", "judged"), [
    ("better", (0.20, 0.40), (-0.05, 0.10), "better"),  # all of it beyond ±10 %
    ("better", (0.20, 0.40), (-0.10, 0.25), "cannot decide"),  # it reaches into ±25 %
    ("worse", (-0.40, -0.30), (-0.25, 0.05), "worse"),
    ("worse", (-0.40, -0.20), (-0.25, 0.05), "cannot decide"),
    ("no change", (-0.01, 0.01), (-0.30, 0.30), "no change"),  # compare's other words stand
    ("cannot decide", (-0.50, 0.90), (-0.01, 0.01), "cannot decide"),
])
def test_better_or_worse_only_beyond_the_floor(word: Any, interval: tuple[float, float],
                                                drift: tuple[float, float], judged: str) -> None:
    x = apply_floor(_verdict(word, sum(interval) / 2, interval), _verdict("no change", sum(drift) / 2, drift))
    assert (x.word, x.compare_word) == (judged, word)
    assert x.floor == pytest.approx(max(map(abs, drift)))
    if judged != word:
        assert x.reason is not None and "baseline's own drift" in x.reason


def test_without_a_floor_nothing_is_better_or_worse() -> None:
    x = apply_floor(_verdict("better", 0.9, (0.8, 1.0)), None)
    assert x.word == "cannot decide" and x.compare_word == "better" and "no noise floor" in (x.reason or "")


def _tune(again_tpot_ms: float | None, variants: dict[str, float], memory: dict[str, float | None] | None = None,
          seed: int = 1) -> tuple[TuneRecord, _Store]:
    """A baseline at TPOT 10 ms, its second run at ``again_tpot_ms`` (None: not run), and one variant per
    ``variants`` entry (name → its TPOT); memory readings in GiB by name (``again`` for the second run)."""
    memory = memory or {}
    names = ["baseline", *variants]
    tpots = [10.0, *variants.values()]
    listed = tuple(Variant(i, n, {"x": str(i)}, () if i == 0 else ("x",)) for i, n in enumerate(names))
    store = _Store([_run(i + 1, tpot, seed * 100 + i, memory.get(n)) for i, (n, tpot) in enumerate(zip(names, tpots,
                                                                                                      strict=True))])
    record = TuneRecord("t", "llamacpp", "f", 1, {}, listed,
                        tuple(VariantOutcome(v, "finished", run_id=v.index + 1) for v in listed))
    if again_tpot_ms is not None:
        record = _again(record, store, again_tpot_ms, memory.get("again"))
    return record, store


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("drift", [0.0, 0.06, 0.12, -0.08])
def test_a_variant_identical_to_the_baseline_is_never_better_or_worse(drift: float, seed: int) -> None:
    """The machine slows (or speeds up) by ``drift`` during the tune: the baseline's second run shows it, and a
    variant with the baseline's own settings, measured in between, moved by part of it. ``compare`` alone calls
    a move that large worse (or better); the tune does not."""
    record, store = _tune(10.0 * (1 + drift), {"same": 10.0 * (1 + drift * 0.8), "fast": 5.0}, seed=seed)
    answer = judge(record, store)
    same = answer.of(1)
    words = {x.word for x in same.verdicts.values()} | {x.word for _, v in same.loads for x in v.values()}
    assert words <= {"no change", "cannot decide"}
    if abs(drift) >= 0.12:  # large enough that compare alone would have called it
        assert same.verdicts["tpot_p50"].compare_word in ("better", "worse")
        assert "baseline's own drift" in (same.verdicts["tpot_p50"].reason or "")
    fast = answer.of(2)
    assert fast.verdicts["tpot_p50"].word == "better" and fast.verdicts["output_throughput"].word == "better"
    best = {b.objective: b for b in answer.best}
    assert best["decode_speed"].winner == "fast"


def test_without_the_second_baseline_run_no_winner_is_named() -> None:
    record, store = _tune(None, {"fast": 5.0})
    answer = judge(record, store)
    assert answer.floor is not None and not answer.floor.measured
    fast = answer.of(1).verdicts["tpot_p50"]
    assert (fast.word, fast.compare_word) == ("cannot decide", "better") and "no noise floor" in (fast.reason or "")
    assert not any(b.decided for b in answer.best)


def test_a_second_baseline_run_that_failed_is_no_floor() -> None:
    record, store = _tune(None, {"fast": 5.0})
    failed = VariantOutcome(record.again(), "failed to start", error="the engine exited with status 1")
    answer = judge(dataclasses.replace(record, baseline_again=failed), store)
    assert answer.floor is not None and "failed to start" in answer.floor.note
    assert answer.of(1).verdicts["tpot_p50"].word == "cannot decide"


def test_memory_is_told_apart_only_beyond_the_baselines_own_two_readings() -> None:
    assert memory_tie(8.0, 8.1) == MEMORY_TIE and memory_tie(8.0, 9.0) == pytest.approx(0.125)
    readings: dict[str, float | None] = {"baseline": 8.0, "again": 9.0, "small": 7.5, "big": 12.0}
    record, store = _tune(10.0, {"small": 10.0, "big": 10.0}, readings)
    best = {b.objective: b for b in judge(record, store).best}["memory"]
    assert best.winner is None and best.tied == ("small", "baseline") and "within 12%" in best.text
    readings["small"] = 6.0
    record, store = _tune(10.0, {"small": 10.0, "big": 10.0}, readings)
    best = {b.objective: b for b in judge(record, store).best}["memory"]
    assert best.winner == "small" and best.decided


def test_a_p99_of_too_few_requests_names_no_winner_and_says_why() -> None:
    """80 requests a load: a p99 is judged from 500; even a variant twice as fast is no winner on TTFT p99."""
    record, store = _tune(10.0, {"fast": 5.0})
    best = {b.objective: b for b in judge(record, store).best}["ttft_p99"]
    assert not best.decided and best.winner is None
    assert "80 values in a run; a p99 is judged from 500" in best.text


def test_the_floor_is_shown_on_the_console_and_in_json() -> None:
    import io
    import json

    from rich.console import Console

    from tokometer.tune.render import answer_json, render_answer

    record, store = _tune(11.5, {"same": 11.0, "fast": 5.0})
    answer = judge(record, store)
    out = io.StringIO()
    render_answer(Console(file=out, width=250, color_system=None), record, answer)
    text = out.getvalue()
    assert "Noise floor: the baseline run again after every variant" in text and "within noise ±" in text
    assert "its whole 95% interval lies beyond the floor" in text
    data = json.loads(json.dumps(answer_json(record, answer), allow_nan=False))
    floor = data["noise_floor"]
    assert floor["measured"] and floor["run_id"] == 100 and floor["metrics"]["tpot_p50"]["floor"] > 0.1
    same = data["variants"][1]["verdicts"]["tpot_p50"]
    assert (same["verdict"], same["compare_verdict"]) == ("cannot decide", "worse")
    assert same["floor"] == floor["metrics"]["tpot_p50"]["floor"]
    assert data["baseline_again"]["name"] == "baseline again" and data["baseline_again"]["run_id"] == 100
