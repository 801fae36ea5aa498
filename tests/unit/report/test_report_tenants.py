"""A tenant mix's per-tenant blocks in the CSV, the markdown and HTML reports, from a step summarised as ``bench``
does (hand-built records of two tenants, one against its own SLO) and saved as the store keeps it."""

from __future__ import annotations

import csv
import io

import pytest

from tokometer.metrics.summary import SLO
from tokometer.records import RequestRecord
from tokometer.report import csv_out
from tokometer.report.data import report_data
from tokometer.report.html import render_html
from tokometer.report.markdown import render_markdown
from tokometer.report.tenants import tenant_cells
from tokometer.runs.finish import finish_step
from tokometer.store import StoredRun

MS = 1_000_000
MIX = {"tenants": [{"name": "chat", "share": 0.5, "slo_ttft_ms": 150},
                   {"name": "lora", "share": 0.5, "model": "adapter-a"}]}


def _req(index: int, tenant: str, ttft_ms: float) -> RequestRecord:
    sent = (1000 + 100 * index) * MS
    stamps = [sent + int(ttft_ms * MS) + k * 10 * MS for k in range(4)]
    return RequestRecord(index=index, due_ns=sent, sent_ns=sent, first_token_ns=stamps[0], last_token_ns=stamps[-1],
                         end_ns=stamps[-1], event_ns=stamps, event_tokens=[1.0] * 4, output_tokens=4,
                         output_tokens_source="usage", status=200, finish_reason="length", tenant=tenant)


def _stored() -> StoredRun:
    records = [_req(0, "chat", 100), _req(1, "lora", 400), _req(2, "chat", 200), _req(3, "lora", 50)]
    summary = finish_step(records, slo=SLO(), mix=MIX)
    return StoredRun.from_json({
        "id": 5, "status": "completed", "started_at": "2026-01-01T00:00:00+00:00", "finished_at": None,
        "target": "http://127.0.0.1:9/v1", "api": "openai-chat", "model": "m", "label": None, "spec": {"mix": MIX},
        "engine": None, "host": None,
        "steps": [{"step": 0, "load": {"concurrency": 1}, "started_at": "2026-01-01T00:00:01+00:00",
                   "summary": summary.to_json(), "interrupted": False}]})


def test_the_tenants_rows_and_the_mix_row() -> None:
    block = _stored().steps[0].summary.tenants  # type: ignore[union-attr]
    assert block is not None
    rows = tenant_cells(block)
    assert [r[0] for r in rows] == ["chat", "lora", "all tenants"]
    chat, lora, total = rows
    assert chat[1:4] == ["2", "50.0%", "0"] and chat[-1] == "50.0% (TTFT 150 ms)"  # 100 ms met, 200 ms missed
    assert lora[-1] == "-" and lora[-2] == "-"  # no SLO: no goodput, not judged
    assert total[1] == "4" and total[-1] == "50.0%"


def test_csv_markdown_and_html_show_each_tenant() -> None:
    run = _stored()
    rows = list(csv.DictReader(io.StringIO(csv_out.csv_text(run))))
    assert [r["window"] for r in rows] == ["step", "tenant chat", "tenant lora"]
    chat = rows[1]
    assert chat["requests_completed"] == "2" and float(chat["ttft_ms_p50"]) == pytest.approx(150.0)
    assert chat["window_start_s"] == "" and chat["concurrency"] == "1"
    data = report_data([(run, [])])
    text = render_markdown(data)
    assert "#### run 5, c=1: tenants" in text and "| chat | 2 | 50.0% | 0 |" in text
    page = render_html(data)
    assert "<h2>Tenants</h2>" in page and "<h3>run 5, c=1: tenants</h3>" in page
    assert "<h2>Tenants</h2>" not in render_html(report_data([(StoredRun.from_json({**_plain()}), [])]))


def _plain() -> dict[str, object]:
    return {"id": 6, "status": "completed", "started_at": "2026-01-01T00:00:00+00:00", "finished_at": None,
            "target": "http://127.0.0.1:9/v1", "api": "openai-chat", "model": "m", "label": None, "spec": {},
            "engine": None, "host": None, "steps": []}


def test_compare_titles_keep_a_tenants_name_as_written() -> None:
    from rich.console import Console

    from tokometer.compare.gate import Comparison, MetricComparison, StepComparison
    from tokometer.report.compare import render_compare, verdict_line

    metric = MetricComparison(key="ttft_p50", label="TTFT p50", unit="ms", higher_is_better=False, base=10.0,
                              new=10.0, change=0.0, ci_low=0.0, ci_high=0.0, effect_size=0.0, threshold=0.05,
                              verdict="no change", reason=None, noise=None)
    step = StepComparison(index=0, load={"concurrency": 2}, base_requests=9, new_requests=11, metrics=[metric],
                          tenant="EU-Chat")
    comparison = Comparison(base_id=1, new_id=2, steps=[step])
    console = Console(record=True, width=160)
    render_compare(console, comparison)
    assert "Concurrency 2, tenant EU-Chat (9 vs 11 requests)" in console.export_text()
    assert step.to_json()["tenant"] == "EU-Chat" and "PASS" in verdict_line(comparison)
