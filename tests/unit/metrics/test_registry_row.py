"""A metric is one row: a row registered in a test's own registry (`registry.using`, not the global one) shows
in every output that reads the rows: the step summary's JSON and its percentile intervals, the time slices and
the steady state, the CSV, ``compare``'s gate and thresholds, find-max's objectives, the gateway's histograms,
and, named in a table's list (`tokometer.report.tables`), the markdown report's tables."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator

import pytest

from tokometer.compare import gate as compare
from tokometer.gateway.prometheus import GatewayMetrics
from tokometer.load.profiles import LoadStep
from tokometer.metrics import StepSummary, registry, summarize
from tokometer.metrics.window import step_windows
from tokometer.records import RequestRecord
from tokometer.report import csv_out, tables
from tokometer.report.data import report_data
from tokometer.report.markdown import render_markdown
from tokometer.store import StoredRun

S = 1_000_000_000


def _last_token_ns(r: RequestRecord) -> int | None:
    """The test's metric: the last content event minus the send."""
    return r.last_token_ns - r.sent_ns if r.ok and r.last_token_ns else None


PROBE = registry.Metric(
    "last_token_ms", "time to the last token: the last content event minus the send (a test's row)", "ms", "lower",
    label="LAST", short="last", percentiles=registry.LATENCY_PERCENTILES, csv=("p50",), per_request=_last_token_ns,
    scale=1e-6, window=True, gate=(("p50", 0.05),), heading="last token (ms)",
    prometheus=("tokometer_test_last_token_seconds", "Time to the last token (a test's histogram)."))


@pytest.fixture
def probe(monkeypatch: pytest.MonkeyPatch) -> Iterator[registry.Metric]:
    """The registry with `PROBE` added at its end, and the report's step and slice tables naming it."""
    with registry.using((*registry.METRICS, PROBE)):
        monkeypatch.setattr(tables, "REPORT_SWEEP", (*tables.REPORT_SWEEP, tables.Column("last_token_ms", "p50")))
        monkeypatch.setattr(tables, "SLICE_METRICS", (*tables.SLICE_METRICS, tables.Column("last_token_ms", "p50")))
        yield PROBE
    assert "last_token_ms" not in registry.definitions()  # the global registry again


def _req(index: int, sent: float, gap: float = 0.1) -> RequestRecord:
    """Sent at ``sent`` s (+1 s on the records' clock), 10 one-token events ``gap`` s apart from 0.1 s after it."""
    stamps = [int((sent + 0.1 + k * gap) * S) + S for k in range(10)]
    return RequestRecord(index=index, due_ns=int(sent * S) + S, sent_ns=int(sent * S) + S, first_token_ns=stamps[0],
                         last_token_ns=stamps[-1], end_ns=stamps[-1] + S // 100, event_ns=stamps,
                         event_tokens=[1.0] * 10, output_tokens=10, output_tokens_source="usage", status=200,
                         finish_reason="length")


def _records(gap: float = 0.1) -> list[RequestRecord]:
    return [_req(i, t, gap) for i, t in enumerate((0.0, 1.0, 2.0, 3.0, 0.5, 1.5, 2.5))]


def _summary(records: list[RequestRecord]) -> StepSummary:
    summary = summarize(records)
    summary.steady_state, summary.time_slices = step_windows(records, LoadStep("concurrency", 2), 0.1, 1.0)
    return summary


def _stored(summary: StepSummary) -> StoredRun:
    return StoredRun.from_json({
        "id": 3, "status": "completed", "started_at": "2026-01-01T00:00:00+00:00", "finished_at": None,
        "target": "http://127.0.0.1:9/v1", "api": "openai-chat", "model": "m", "label": None, "spec": {},
        "engine": None, "host": None,
        "steps": [{"step": 0, "load": LoadStep("concurrency", 2).label(), "started_at": "2026-01-01T00:00:01+00:00",
                   "summary": summary.to_json(), "interrupted": False}]})


def test_the_summary_json_and_its_windows_have_it(probe: registry.Metric) -> None:
    summary = _summary(_records())
    data = summary.to_json()
    assert data["last_token_ms"]["count"] == 7 and data["last_token_ms"]["p50"] == pytest.approx(1000.0)
    assert data["percentile_ci"]["last_token_ms"]["p50"] is not None
    assert StepSummary.from_json(data) == summary and summary.last_token_ms.p50 == pytest.approx(1000.0)
    assert data["steady_state"]["last_token_ms"]["p50"] == pytest.approx(1000.0)
    slices = data["time_slices"]["slices"]
    assert [sl["last_token_ms"]["count"] for sl in slices] == [sl["completed"] for sl in slices]
    assert registry.definitions()["last_token_ms"] == probe.definition


def test_the_csv_has_its_columns_in_every_row(probe: registry.Metric) -> None:
    text = csv_out.csv_text(_stored(_summary(_records())))
    header = next(csv.reader(io.StringIO(text)))
    assert "last_token_ms_p50" in header and header.index("last_token_ms_p50") < header.index("trial")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [r["window"] for r in rows][:2] == ["step", "steady"]
    assert all(float(r["last_token_ms_p50"]) == pytest.approx(1000.0) for r in rows[:2])


def test_compare_judges_it_and_find_max_takes_it(probe: registry.Metric) -> None:
    assert registry.objective("last_p99") == (probe, "p99")
    assert compare.parse_thresholds("last_p50=3%")["last_p50"] == pytest.approx(0.03)
    base = compare.StepSample.of(_records(0.1))
    new = compare.StepSample.of(_records(0.2))  # each token twice as late after the first: last token 1.9 s
    judged = {x.key: x for x in compare.compare_samples(base, new, resamples=200)}
    assert judged["last_p50"].label == "LAST p50" and judged["last_p50"].change == pytest.approx(0.9)
    assert list(judged)[-3:] == ["last_p50", "output_throughput", "error_rate"]  # after the global rows' gates


def test_the_markdown_report_shows_it_where_its_tables_name_it(probe: registry.Metric) -> None:
    text = render_markdown(report_data([(_stored(_summary(_records())), [])]))
    headers = [line for line in text.splitlines() if "LAST p50 ms" in line]
    assert len(headers) >= 2  # the per-step table and each time slice's
    assert any("| 1,000.0 |" in line for line in text.splitlines() if line.startswith("| c=2"))


def test_the_gateway_keeps_its_histogram(probe: registry.Metric) -> None:
    metrics = GatewayMetrics(gpu=False)
    metrics.series("chat", "a").observe_record(_req(0, 0.0))
    assert 'tokometer_test_last_token_seconds_count{route="chat",upstream="a"} 1.0' in metrics.render().decode()
