"""The report's Pareto front across runs (issue 26): the table, the knee on it or not, the chart's step line.

Two hand-made stored runs (summaries written for the purpose; one trial a load, so each load's point is its
summary's own figures). Throughput tok/s, decode tok/s per request p50, power:

=====  ====  ==========  ======  ======  =====================================
run    load  throughput  decode  power   on the front of both runs?
=====  ====  ==========  ======  ======  =====================================
5      c=1   100         100     10,000  no: run 6 c=1 has more of both
5      c=4   300         60      18,000  no (run 5's knee): run 6 c=4 (350, 70)
5      c=8   400         30      12,000  yes: the most throughput
6      c=1   120         110     13,200  yes: the fastest per request
6      c=4   350         70      24,500  yes (run 6's knee)
6      c=8   380         20      7,600   no: run 5 c=8 (400, 30)
=====  ====  ==========  ======  ======  =====================================

The front, left to right: run 6 c=1 (120), run 6 c=4 (350), run 5 c=8 (400).
"""

from __future__ import annotations

import pytest

from tokometer.load.profiles import LoadStep
from tokometer.metrics.summary import StepSummary
from tokometer.report import charts
from tokometer.report.data import report_data
from tokometer.report.markdown import render_markdown
from tokometer.runs.stored_spec import StoredSpec
from tokometer.store import EngineIdentity, StoredRun, StoredStep

ROWS = {5: [(1, 100, 100), (4, 300, 60), (8, 400, 30)], 6: [(1, 120, 110), (4, 350, 70), (8, 380, 20)]}


def _summary(throughput: float, decode: float) -> StepSummary:
    return StepSummary.from_json({"output_throughput_tok_s": throughput, "duration_s": 10.0, "requests_completed": 10,
                                  "requests_failed": 0, "decode_speed_tok_s": {"p50": decode},
                                  "ttft_ms": {"p50": 20.0, "p99": 40.0}, "tpot_ms": {"p50": 1000 / decode}})


def _run(run_id: int, engine: EngineIdentity | None = None) -> StoredRun:
    steps = [StoredStep(i, LoadStep("concurrency", c), "t", summary=_summary(x, y))
             for i, (c, x, y) in enumerate(ROWS[run_id])]
    return StoredRun(id=run_id, status="completed", started_at="t", finished_at="t", target="http://x/v1",
                     api="openai-chat", model="m", label=None, spec=StoredSpec(), engine=engine, host=None,
                     steps=tuple(steps))


def test_the_front_across_two_runs_and_the_knees_on_it() -> None:
    data = report_data([(_run(5), []), (_run(6), [])], judge=False)
    front = data["pareto"]
    assert front["basis"] == "total" and "per GPU unknown" in front["note"]
    pts = front["points"]
    assert [(p["run"], p["load"]) for p in pts] == [(5, "c=1"), (5, "c=4"), (5, "c=8"), (6, "c=1"), (6, "c=4"),
                                                    (6, "c=8")]
    assert [p["on_front"] for p in pts] == [False, False, True, True, True, False]
    assert [p["dominated_by"] for p in pts] == [3, 4, None, None, None, 2]
    assert front["front"] == [3, 4, 2]
    assert [p["knee"] for p in pts] == [False, True, False, False, True, False]
    text = render_markdown(data)
    assert "### Pareto front" in text
    assert "| #2 | run 5 | c=4 ★ knee | 300.0 | 60.0 | dominated by #5 (run 6 c=4) |" in text
    assert "| #3 | run 5 | c=8 | 400.0 | 30.0 | on the front |" in text
    assert "The front, left to right (more throughput, less speed per request): #4 (run 6 c=1), #5 (run 6 c=4), " \
           "#3 (run 5 c=8)." in text
    assert "The knee of run 5 (c=4, #2) is not on the front: dominated by #5 (run 6 c=4)." in text
    assert "The knee of run 6 (c=4, #5) is on the front." in text


def test_the_chart_draws_the_front_as_a_step_line_and_per_gpu_where_known() -> None:
    pytest.importorskip("plotly")
    data = report_data([(_run(5), []), (_run(6), [])], judge=False)
    fig = charts.rate_vs_throughput(data["runs"], data["pareto"])
    (line,) = [t for t in fig.data if (t.meta or {}).get("kind") == "pareto_front"]
    assert list(line.x) == [120, 350, 400] and list(line.y) == [110, 70, 30] and line.line.shape == "vh"
    assert fig.layout.xaxis.title.text == "output tokens/s all requests"
    # both runs served by vLLM on 2 GPUs (tensor parallel 2): every throughput halved, the axis says per GPU
    tp2 = EngineIdentity.from_json({"engine": "vllm", "argv": ["vllm", "serve", "m", "-tp", "2"]})
    data = report_data([(_run(5, tp2), []), (_run(6, tp2), [])], judge=False)
    assert data["pareto"]["basis"] == "per GPU" and data["pareto"]["front"] == [3, 4, 2]
    assert "2 GPUs from the vllm command line" in data["pareto"]["note"]
    fig = charts.rate_vs_throughput(data["runs"], data["pareto"])
    (line,) = [t for t in fig.data if (t.meta or {}).get("kind") == "pareto_front"]
    assert list(line.x) == [60, 175, 200]
    steps = next(t for t in fig.data if (t.meta or {}).get("kind") == "steps")
    assert list(steps.x) == [50, 150, 200]
    knee = next(t for t in fig.data if (t.meta or {}).get("kind") == "knee")
    assert list(knee.x) == [150]  # run 5's knee, c=4: 300 tok/s on 2 GPUs
    assert fig.layout.xaxis.title.text == "output tokens/s per GPU"
