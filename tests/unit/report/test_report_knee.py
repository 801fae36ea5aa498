"""The knee is over loads, trials pooled; find-max probes show met or missed (issue 26).

Hand-computed runs (stored summaries and request records written for the purpose), each with its known
answer worked out in the test's comments.
"""

from __future__ import annotations

from typing import Any

import pytest

from tokometer.load.profiles import LoadStep
from tokometer.metrics.summary import StepSummary
from tokometer.records import RequestRecord
from tokometer.report import charts
from tokometer.report.data import report_data
from tokometer.report.markdown import render_markdown
from tokometer.runs.stored_spec import StoredSpec
from tokometer.store import StoredRun, StoredStep

MS = 1_000_000


def _summary(throughput: float, decode_p50: float, *, duration: float = 10.0, ttft_p99: float = 50.0,
             completed: int = 10) -> StepSummary:
    return StepSummary.from_json({"output_throughput_tok_s": throughput, "duration_s": duration,
                                  "requests_completed": completed, "requests_failed": 0,
                                  "decode_speed_tok_s": {"p50": decode_p50},
                                  "ttft_ms": {"p50": ttft_p99 / 2, "p99": ttft_p99},
                                  "tpot_ms": {"p50": 1000 / decode_p50}})


def _run(steps: list[StoredStep], spec: dict[str, Any] | None = None) -> StoredRun:
    return StoredRun(id=5, status="completed", started_at="t", finished_at="t", target="http://x/v1",
                     api="openai-chat", model="m", label=None, spec=StoredSpec(spec), engine=None, host=None,
                     steps=tuple(steps))


def _records(step: int, tpot_ms: list[float], start: int) -> list[RequestRecord]:
    """One request per TPOT: 11 tokens, one per event, the first after 20 ms."""
    out = []
    for i, tpot in enumerate(tpot_ms):
        sent = (start + i + 1) * 1000 * MS
        first = sent + 20 * MS
        stamps = [first + round(k * tpot * MS) for k in range(11)]
        out.append(RequestRecord(index=start + i, step=step, sent_ns=sent, first_token_ns=first,
                                 last_token_ns=stamps[-1], end_ns=stamps[-1] + MS, event_ns=stamps,
                                 event_tokens=[1.0] * 11, output_tokens=11, status=200))
    return out


def test_a_single_load_repeated_has_no_knee() -> None:
    """``-c 4 --repeat 3``: three trials of one load. A knee is a trade-off between loads: none here (it used
    to be "knee: c=4 #3", the trial with the most power)."""
    steps = [StoredStep(i, LoadStep("concurrency", 4), "t", summary=_summary(300 + 10 * i, 90), trial=i + 1)
             for i in range(3)]
    data = report_data([(_run(steps), [])], judge=False)
    (run,) = data["runs"]
    assert run["knee"] is None and run["knee_load"] is None
    assert [a["kind"] for a in run["annotations"]] == []
    assert len(run["loads"]) == 1 and run["loads"][0]["steps"] == [0, 1, 2] and run["loads"][0]["trials"] == 3
    text = render_markdown(data)
    assert "(knee)" not in text and "No knee: the run has one load" in text


def test_the_knee_pools_a_loads_trials() -> None:
    """Two loads, two trials each (durations in seconds, throughput in tok/s, TPOT per request in ms):

    ====  =====  ========  ==========  ============  ===========  =====================
    load  trial  duration  throughput  TPOT (ms)     decode p50   power of the trial
    ====  =====  ========  ==========  ============  ===========  =====================
    c=1   #1     10        100         10, 10, 10    100          10,000
    c=1   #2     5         120         20, 20        50           6,000
    c=8   #1     10        400         25, 25        40           16,000  (the most)
    c=8   #2     10        600         50, 50, 50    20           12,000
    ====  =====  ========  ==========  ============  ===========  =====================

    Pooled: c=1 throughput (1000 + 600) / 15 = 106.67 tok/s, decode the median of 100, 100, 100, 50, 50 = 100,
    power 10,667; c=8 throughput (4000 + 6000) / 20 = 500, decode median of 40, 40, 20, 20, 20 = 20, power 10,000.
    The knee is c=1, though the single trial with the most power is c=8 #1."""
    c1, c8 = LoadStep("concurrency", 1), LoadStep("concurrency", 8)
    steps = [StoredStep(0, c1, "t", summary=_summary(100, 100, duration=10), trial=1),
             StoredStep(1, c8, "t", summary=_summary(400, 40, duration=10), trial=1),
             StoredStep(2, c1, "t", summary=_summary(120, 50, duration=5), trial=2),
             StoredStep(3, c8, "t", summary=_summary(600, 20, duration=10), trial=2)]
    records = (_records(0, [10, 10, 10], 0) + _records(1, [25, 25], 10) + _records(2, [20, 20], 20)
               + _records(3, [50, 50, 50], 30))
    (run,) = report_data([(_run(steps), records)], judge=False)["runs"]
    c1_load, c8_load = run["loads"]
    assert c1_load["steps"] == [0, 2] and c8_load["steps"] == [1, 3]
    assert c1_load["output_throughput_tok_s"] == pytest.approx(1600 / 15)
    assert c1_load["decode_speed_p50"] == pytest.approx(100, rel=1e-6)
    assert c1_load["power"] == pytest.approx(1600 / 15 * 100, rel=1e-6)
    assert c8_load["output_throughput_tok_s"] == pytest.approx(500)
    assert c8_load["decode_speed_p50"] == pytest.approx(20, rel=1e-6)
    assert run["knee_load"] == 0 and run["knee"] == 0
    (mark,) = run["annotations"]
    assert mark["text"] == "knee: c=1" and mark["x"] == pytest.approx(1600 / 15)  # at the pooled point
    rows = render_markdown({"title": "t", "tokometer_version": "x", "runs": [run]})
    assert rows.count("(knee)") == 2  # both trials of c=1, and only they
    assert "c=1 #1 (knee)" in rows and "c=1 #2 (knee)" in rows and "(2 trials pooled)" in rows


def _find_max_run() -> StoredRun:
    """A concurrency search against ``ttft_p99=100ms``, probes in the order run:

    ====  ===========  ==========  ======  =======  ==================
    load  TTFT p99 ms  throughput  decode  power    verdict
    ====  ===========  ==========  ======  =======  ==================
    c=1   50           100         100     10,000   met
    c=2   70           190         95      18,050   met
    c=4   150          340         85      28,900   missed (the most)
    c=3   90           270         90      24,300   met
    ====  ===========  ==========  ======  =======  ==================

    The answer is 3 (met, and 4 missed); the knee is c=3, the most power among the probes that met: c=4
    has more but missed its objective, so it is never the knee. Knee and answer are one load: one mark."""
    rows = [(1, 50, 100, 100), (2, 70, 190, 95), (4, 150, 340, 85), (3, 90, 270, 90)]
    steps = [StoredStep(i, LoadStep("concurrency", c), "t", summary=_summary(thr, dec, ttft_p99=ttft))
             for i, (c, ttft, thr, dec) in enumerate(rows)]
    return _run(steps, {"find_max": "concurrency", "slo": "ttft_p99=100ms", "concurrency": [1]})


def test_a_probe_that_missed_is_never_the_knee_and_probes_show_met_or_missed() -> None:
    data = report_data([(_find_max_run(), [])], judge=False)
    (run,) = data["runs"]
    assert run["find_max"]["best"] == 3
    assert [s["probe"]["passed"] for s in run["steps"]] == [True, True, False, True]
    assert run["loads"][2]["power"] == pytest.approx(28_900) and not run["loads"][2]["eligible"]
    assert run["steps"][run["knee"]]["label"] == "c=3"
    (mark,) = run["annotations"]  # one mark, not two stars and two labels on one point
    assert mark["kind"] == "knee_find_max" and mark["text"] == "knee and find-max: 3 concurrent requests"
    text = render_markdown(data)
    assert "| c=4 (missed) |" in text and "| c=3 (knee) (met) |" in text
    assert "c=4 missed (ttft_p99 150 ms > 100 ms)" in text
    # on the Pareto front every probe is a point (each has more throughput and less speed than the one before,
    # in load order); the one that missed is marked so
    assert "| #3 | run 5 | c=4 ✕ missed | 340.0 | 85.0 | on the front |" in text
    assert "| #4 | run 5 | c=3 ★ knee | 270.0 | 90.0 | on the front |" in text


def test_the_ttft_against_load_chart_has_the_slo_line_and_the_verdicts() -> None:
    pytest.importorskip("plotly")
    (run,) = report_data([(_find_max_run(), [])], judge=False)["runs"]
    fig = charts.ttft_vs_load([run])
    p99 = next(t for t in fig.data if t.meta["percentile"] == "p99")
    assert list(p99.x) == [1, 2, 3, 4]  # in load order, not the order probed
    assert list(p99.y) == [50, 70, 90, 150]
    assert list(p99.marker.symbol) == ["circle", "circle", "circle", "x"]
    assert p99.meta["verdicts"] == ["met", "met", "met", "missed"]
    (line,) = fig.layout.shapes
    assert line.y0 == line.y1 == 100
    assert "SLO: ttft_p99 <= 100 ms" in fig.layout.annotations[0].text
    rate = charts.rate_vs_throughput([run])
    steps = next(t for t in rate.data if t.meta["kind"] == "steps")
    assert list(steps.marker.symbol) == ["circle", "circle", "x", "circle"]
    assert len(rate.layout.annotations) == 1
