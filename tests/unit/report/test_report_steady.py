"""The report's steady-state table, from a step summarised as `bench` does (hand-built records: two slots of
1 s requests, worked out in tests/unit/metrics/test_window.py) and saved as the store keeps it."""

from __future__ import annotations

from tokometer.metrics import summarize
from tokometer.metrics.window import steady_state
from tokometer.records import RequestRecord
from tokometer.report.data import report_data
from tokometer.report.html import render_html
from tokometer.report.steady import steady_rows
from tokometer.store import StoredRun

S = 1_000_000_000


def _req(index: int, sent: float) -> RequestRecord:
    stamps = [int((sent + 0.1 + k * 0.1) * S) for k in range(10)]
    return RequestRecord(index=index, due_ns=int(sent * S) + S, sent_ns=int(sent * S) + S,
                         first_token_ns=stamps[0] + S, last_token_ns=stamps[-1] + S, end_ns=int((sent + 1) * S) + S,
                         event_ns=[t + S for t in stamps], event_tokens=[1.0] * 10, output_tokens=10,
                         output_tokens_source="usage", status=200, finish_reason="length")


def _stored(found: bool) -> StoredRun:
    records = [_req(i, t) for i, t in enumerate((0.0, 1.0, 2.0, 3.0, 0.5, 1.5, 2.5))]
    summary = summarize(records)
    level = 2.0 if found else 5.0
    summary.steady_state = steady_state(records, lambda t: level, level, 0.0, closed_loop=True, tolerance=0.1)
    return StoredRun.from_json({
        "id": 3, "status": "completed", "started_at": "2026-01-01T00:00:00+00:00", "finished_at": None,
        "target": "http://127.0.0.1:9/v1", "api": "openai-chat", "model": "m", "label": None, "spec": {},
        "engine": None, "host": None,
        "steps": [{"step": 0, "load": {"concurrency": int(level),
                                       "ramp": {"strategy": "linear", "from": 1.0, "to": level, "duration_s": 0.5}},
                   "started_at": "2026-01-01T00:00:01+00:00", "summary": summary.to_json(), "interrupted": False}]})


def test_the_steady_state_row_sits_beside_the_whole_step() -> None:
    data = report_data([(_stored(True), [])])
    (row,) = steady_rows(data["runs"])
    # Window 0.5-3.5 s, 4 of 7 requests, 2 in flight throughout; TTFT 100 ms in both; 10 tokens per request.
    assert row[:7] == ["run 3", "c=1\u21972", "0.50-3.50", "4 of 7", "2", "c 2.00", "yes"]
    assert row[7] == "100.0 (100.0)"
    page = render_html(data)
    assert "<h2>Steady state</h2>" in page and "<td>4 of 7</td>" in page


def test_a_step_without_a_steady_state_says_why() -> None:
    (row,) = steady_rows(report_data([(_stored(False), [])])["runs"])
    assert row[2].startswith("not found: the number in flight never reached 4.50")
