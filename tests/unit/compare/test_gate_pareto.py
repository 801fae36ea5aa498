"""``compare`` on the Pareto fronts of two hand-made stored runs (issue 26).

The runs' summaries and requests are written for the purpose (`tests.unit.report.test_report_knee`'s
builders: one request per TPOT given, 11 tokens); each test works out its front and verdict in its docstring.
"""

from __future__ import annotations

import io
from typing import Any

import pytest
from rich.console import Console

from tokometer.compare.gate import compare_runs
from tokometer.load.profiles import LoadStep
from tokometer.records import RequestRecord
from tokometer.report.compare import render_compare, render_markdown
from tokometer.runs.stored_spec import StoredSpec
from tokometer.store import StoredRun, StoredStep

from ..report.test_report_knee import _records, _summary

C1, C4, C8 = LoadStep("concurrency", 1), LoadStep("concurrency", 4), LoadStep("concurrency", 8)


def _run(run_id: int, steps: list[StoredStep]) -> StoredRun:
    return StoredRun(id=run_id, status="completed", started_at="t", finished_at="t", target="http://x/v1",
                     api="openai-chat", model="m", label=None, spec=StoredSpec(), engine=None, host=None,
                     steps=tuple(steps))


def _sweep(run_id: int, rows: list[tuple[LoadStep, float, float]]) -> tuple[StoredRun, list[RequestRecord]]:
    steps = [StoredStep(i, load, "t", summary=_summary(x, y)) for i, (load, x, y) in enumerate(rows)]
    records = [r for i, (_, _, y) in enumerate(rows) for r in _records(i, [1000 / y] * 3, 10 * i)]
    return _run(run_id, steps), records


def _text(comparison: Any) -> str:
    out = io.StringIO()
    render_compare(Console(file=out, width=220, color_system=None), comparison)
    return out.getvalue()


def test_news_front_dominates() -> None:
    """BASE: c=1 (100, 50), c=4 (300, 30), c=8 (320, 15); NEW: c=1 (110, 55), c=4 (320, 33), c=8 (330, 16)
    (output tok/s, decode tok/s per request). Every BASE point is beaten by a NEW one: c=1 by c=1, c=4 by c=4,
    and c=8 (320, 15) by NEW's c=4 (320, 33), the NEW front point of least throughput that beats it. No NEW
    point is beaten by a BASE one."""
    base, base_records = _sweep(1, [(C1, 100, 50), (C4, 300, 30), (C8, 320, 15)])
    new, new_records = _sweep(2, [(C1, 110, 55), (C4, 320, 33), (C8, 330, 16)])
    comparison = compare_runs(base, new, base_records, new_records)
    front = comparison.to_json()["pareto"]
    assert front["verdict"] == "new dominates" and front["basis"] == "total"
    assert [(p["load"], p["dominated_by"]["load"]) for p in front["base_front"]] == [("c=1", "c=1"), ("c=4", "c=4"),
                                                                                    ("c=8", "c=4")]
    assert [p["dominated_by"] for p in front["new_front"]] == [None, None, None]
    sentence = ("run 2's front dominates run 1's: each of run 1's 3 front points is matched or beaten on both "
                "axes (3 beaten)")
    assert front["text"] == sentence
    text = _text(comparison)
    assert f"Pareto: {sentence}" in text
    row = next(line for line in text.splitlines() if line.lstrip().startswith("run 1") and "c=8" in line)
    assert "yes: run 2 c=4 (320.0, 33.0)" in row
    markdown = render_markdown(comparison)
    assert "| run 1 | c=8 | 320.0 | 15.0 | yes: run 2 c=4 (320.0, 33.0) |" in markdown
    assert f"- Pareto: {sentence}" in markdown
    assert "per GPU unknown: run 1, run 2: no engine saved with the run" in markdown


def test_fronts_that_cross_with_trials_pooled() -> None:
    """BASE ran c=1 and c=8 twice (`test_report_knee.test_the_knee_pools_a_loads_trials`): pooled, c=1 is
    (106.67, 100) and c=8 (500, 20). NEW, once each: c=1 (150, 80), c=8 (450, 25).

    Best speed at a throughput of at least x: up to 106.67 BASE (100 against 80); from 106.67 to 450 NEW (80,
    then 25, against 20); from 450 to 500 BASE (NEW reaches no more than 450). They cross at 106.67 (printed
    107) and 450, and no point of one front is beaten by one of the other."""
    base_steps = [StoredStep(0, C1, "t", summary=_summary(100, 100, duration=10), trial=1),
                  StoredStep(1, C8, "t", summary=_summary(400, 40, duration=10), trial=1),
                  StoredStep(2, C1, "t", summary=_summary(120, 50, duration=5), trial=2),
                  StoredStep(3, C8, "t", summary=_summary(600, 20, duration=10), trial=2)]
    base_records = (_records(0, [10, 10, 10], 0) + _records(1, [25, 25], 10) + _records(2, [20, 20], 20)
                    + _records(3, [50, 50, 50], 30))
    new, new_records = _sweep(2, [(C1, 150, 80), (C8, 450, 25)])
    comparison = compare_runs(_run(1, base_steps), new, base_records, new_records)
    front = comparison.to_json()["pareto"]
    assert [p["throughput_tok_s"] for p in front["base_front"]] == pytest.approx([1600 / 15, 500])
    assert [p["decode_speed_p50"] for p in front["base_front"]] == pytest.approx([100, 20], rel=1e-6)
    assert front["verdict"] == "cross"
    assert front["crossings_tok_s"] == pytest.approx([1600 / 15, 450])
    assert [s["ahead"] for s in front["segments"]] == ["base", "new", "base"]
    assert all(p["dominated_by"] is None for p in front["base_front"] + front["new_front"])
    assert front["text"] == ("the fronts cross at 107 and 450 output tok/s: faster per request: run 1 up to 107, "
                             "run 2 from 107 to 450, run 1 from 450 to 500")
    assert comparison.verdict in ("pass", "regression")  # the fronts do not decide the exit status
