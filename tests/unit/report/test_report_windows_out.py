"""Steady state and time slices in the CSV and the markdown report, from a step summarised as ``bench`` does
(hand-built records: two slots of 1 s requests, the steady state worked out in tests/unit/metrics/test_window.py:
0.5-3.5 s, 4 of the 7 requests) and saved as the store keeps it."""

from __future__ import annotations

import csv
import io

import pytest

from tokometer.load.profiles import LoadStep
from tokometer.metrics import summarize
from tokometer.metrics.window import step_windows
from tokometer.records import RequestRecord
from tokometer.report import csv_out
from tokometer.report.data import report_data
from tokometer.report.html import render_html
from tokometer.report.markdown import render_markdown
from tokometer.store import StoredRun

S = 1_000_000_000


def _req(index: int, sent: float) -> RequestRecord:
    """Sent at ``sent`` s (+1 s on the records' clock), 10 one-token events from 0.1 s after it, ended 1 s after."""
    stamps = [int((sent + 0.1 + k * 0.1) * S) + S for k in range(10)]
    return RequestRecord(index=index, due_ns=int(sent * S) + S, sent_ns=int(sent * S) + S, first_token_ns=stamps[0],
                         last_token_ns=stamps[-1], end_ns=int((sent + 1) * S) + S, event_ns=stamps,
                         event_tokens=[1.0] * 10, output_tokens=10, output_tokens_source="usage", status=200,
                         finish_reason="length")


def _stored() -> StoredRun:
    records = [_req(i, t) for i, t in enumerate((0.0, 1.0, 2.0, 3.0, 0.5, 1.5, 2.5))]
    summary = summarize(records)
    load = LoadStep("concurrency", 2)
    summary.steady_state, summary.time_slices = step_windows(records, load, 0.1, 1.0)
    return StoredRun.from_json({
        "id": 3, "status": "completed", "started_at": "2026-01-01T00:00:00+00:00", "finished_at": None,
        "target": "http://127.0.0.1:9/v1", "api": "openai-chat", "model": "m", "label": None, "spec": {},
        "engine": None, "host": None,
        "steps": [{"step": 0, "load": load.label(), "started_at": "2026-01-01T00:00:01+00:00",
                   "summary": summary.to_json(), "interrupted": False}]})


def test_the_csv_has_a_row_per_window_after_the_step_s_own() -> None:
    run = _stored()
    rows = list(csv.DictReader(io.StringIO(csv_out.csv_text(run))))
    assert [r["window"] for r in rows] == ["step", "steady", *(f"slice {k}" for k in range(5))]
    header = next(csv.reader(io.StringIO(csv_out.csv_text(run))))
    assert header[-4:] == ["trial", "window", "window_start_s", "window_end_s"]  # appended: older columns in place
    whole, steady, *slices = rows
    assert whole["requests_completed"] == "7" and whole["window_start_s"] == ""
    # The steady state: 0.5-3.5 s, the 4 requests sent after 0.5 s and ended by 3.5 s, 2 in flight throughout.
    assert (steady["window_start_s"], steady["window_end_s"], steady["duration_s"]) == ("0.5", "3.5", "3.0")
    assert steady["requests_completed"] == "4" and float(steady["achieved_concurrency"]) == pytest.approx(2.0)
    assert float(steady["ttft_ms_p50"]) == pytest.approx(100.0) and steady["concurrency"] == "2"
    assert steady["decode_speed_tok_s_p50"] == "" and steady["output_tokens_total"] == ""  # not a window's figure
    # Slices of 1 s from the first send to the last end (4 s): sends at 0, .5 | 1, 1.5 | 2, 2.5 | 3 | none.
    assert [int(r["requests_completed"]) for r in slices] == [2, 2, 2, 1, 0]
    assert [float(r["window_start_s"]) for r in slices] == [0.0, 1.0, 2.0, 3.0, 4.0]
    # Every token arrives in some slice: 7 requests x 10 tokens over slices of 1 s.
    assert sum(float(r["output_throughput_tok_s"]) for r in slices) == pytest.approx(70.0)


def test_markdown_and_html_show_the_steady_state_and_the_slices() -> None:
    data = report_data([(_stored(), [])])
    text = render_markdown(data)
    assert "### Steady state" in text and "| run 3 | c=2 | 0.50-3.50 | 4 of 7 | 2 | c 2.00 | yes |" in text
    assert "#### run 3, c=2: time slices of 1 s (requests by send time)" in text
    slice_lines = [line for line in text.splitlines() if line.startswith("| 0.00 |") or line.startswith("| 3.00 |")]
    assert [line.split(" | ")[1] for line in slice_lines] == ["2", "1"]  # requests sent in [0, 1) and [3, 4)
    page = render_html(data)
    assert "<h2>Time slices</h2>" in page and "<h3>run 3, c=2: time slices of 1 s (requests by send time)</h3>" in page


def test_the_html_chart_draws_each_slice() -> None:
    """The time-slice chart's traces are the saved slices' numbers, each held from its slice's start to its end:
    requests sent per slice, TTFT p99 (100 ms each: every request's first token comes 0.1 s after its send)."""
    from tokometer.report import charts

    data = report_data([(_stored(), [])])
    fig = charts.time_slices(data["runs"])
    series = {trace.meta["series"]: trace for trace in fig.data}
    assert list(series["requests"].y) == [2, 2, 2, 1, 0, 0]  # the last one again at its end
    assert list(series["requests"].x) == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert [round(v, 6) for v in series["ttft_p99"].y[:4]] == [100.0] * 4 and series["ttft_p99"].y[4] is None
    assert 'id="chart-time-slices"' in render_html(data)
    assert charts.time_slices([{**data["runs"][0], "steps": []}]) is None


def test_a_window_written_by_hand_without_its_figures_leaves_cells_empty() -> None:
    """A ``bench --json`` file edited by hand (a steady state that says only ``found``, a slice without numbers)
    still gives its rows, the missing figures empty, and no traceback."""
    summary = summarize([_req(0, 0.0)])
    summary.steady_state = {"found": True}
    summary.time_slices = {"slice_s": 1.0, "slices": [{"ttft_ms": "not a distribution"}, "not a slice"]}
    rows = csv_out.step_rows(0, LoadStep("concurrency", 1), None, summary)
    assert [r["window"] for r in rows] == ["step", "steady", "slice 0"]
    assert rows[1]["duration_s"] == "" and rows[1]["window_start_s"] == "" and rows[2]["ttft_ms_p50"] == ""
