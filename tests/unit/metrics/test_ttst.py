"""Time to second token (``ttst_ms``): the arrival of the event that brought the second streamed token, from
the send; pinned on records whose event times are known, and found wherever TTFT is."""

from __future__ import annotations

import pytest

from tokometer.compare import gate as compare
from tokometer.metrics import SLO, StepSummary, registry, summarize
from tokometer.metrics import request as m
from tokometer.records import ErrorCategory, RequestRecord
from tokometer.report import csv_out

MS = 1_000_000


def _rec(events_ms: list[float], tokens: list[float], sent_ms: float = 10.0, error: ErrorCategory | None = None,
         index: int = 0) -> RequestRecord:
    events = [int(t * MS) for t in events_ms]
    r = RequestRecord(index=index, due_ns=int(sent_ms * MS), sent_ns=int(sent_ms * MS), event_ns=events,
                      event_tokens=tokens)
    r.first_token_ns, r.last_token_ns = (events[0], events[-1]) if events else (0, 0)
    r.end_ns = (events[-1] if events else int(sent_ms * MS)) + MS
    r.output_tokens = round(sum(tokens))
    r.error = error
    return r


def test_one_token_per_event_gives_ttft_plus_the_first_itl() -> None:
    r = _rec([110, 130, 150], [1.0, 1.0, 1.0])  # sent at 10 ms
    assert m.ttst_ns(r) == 120 * MS
    ttft, itl = m.ttft_ns(r), m.itl_ns(r)
    assert ttft is not None and m.ttst_ns(r) == ttft + itl[0]


def test_a_first_event_of_two_tokens_gives_ttft() -> None:
    r = _rec([110, 130], [2.0, 1.0])
    assert m.ttst_ns(r) == m.ttft_ns(r) == 100 * MS


def test_a_second_event_of_several_tokens_gives_the_whole_gap_not_the_itl() -> None:
    r = _rec([110, 140], [1.0, 3.0])
    assert m.ttst_ns(r) == 130 * MS  # TTFT 100 + the chunk gap 30
    assert m.itl_ns(r) == [10 * MS]  # the gap shared by the event's three tokens
    assert m.ttst_ns(r) == 100 * MS + m.chunk_gaps_ns(r)[0]


def test_fractional_counts_add_up_to_the_second_token() -> None:
    assert m.ttst_ns(_rec([110, 120, 135, 150], [0.5, 0.5, 1.0, 1.0])) == 125 * MS
    assert m.ttst_ns(_rec([110, 120, 130], [0.0, 1.0, 1.0])) == 120 * MS  # an event of no tokens brings none


def test_fewer_than_two_tokens_or_a_failure_have_none() -> None:
    assert m.ttst_ns(_rec([110], [1.0])) is None
    assert m.ttst_ns(_rec([110, 120], [0.5, 0.5])) is None
    assert m.ttst_ns(_rec([], [])) is None
    assert m.ttst_ns(_rec([110, 120], [1.0, 1.0], error="http_5xx")) is None


def _summary() -> StepSummary:
    records = [_rec([100 * i + 50, 100 * i + 70, 100 * i + 75], [1.0, 1.0, 1.0], sent_ms=100 * i, index=i)
               for i in range(1, 9)]
    records.append(_rec([950], [1.0], sent_ms=900, index=9))  # one token: no TTST
    return summarize(records, SLO())


def test_the_summary_has_its_distribution_wherever_ttft_has_one() -> None:
    s = _summary()
    assert s.ttst_ms.count == 8 and s.ttst_ms.p50 == pytest.approx(70.0) and s.ttft_ms.p50 == pytest.approx(50.0)
    data = s.to_json()
    keys = list(data)
    assert keys.index("ttst_ms") == keys.index("ttft_ms") + 1
    assert data["percentile_ci"]["ttst_ms"]["p50"] is not None
    assert StepSummary.from_json(data) == s
    older = StepSummary.from_json({k: v for k, v in data.items() if k != "ttst_ms"})  # a file older than TTST
    assert older.ttst_ms.count == 0 and "ttst_ms" not in older.to_json()


def test_objectives_thresholds_and_csv_name_it() -> None:
    assert registry.objective("ttst_p99") == (registry.by_name("ttst_ms"), "p99")
    assert {"ttst_p50", "ttst_p99"} <= {d.key for d in compare.METRICS}
    assert compare.parse_thresholds("ttst_p50=3%")["ttst_p50"] == pytest.approx(0.03)
    assert csv_out.summary_row(0, None, None, _summary())["ttst_ms_p50"] == pytest.approx(70.0)
    assert [row.short for row in registry.prometheus_rows()] == ["ttft", "ttst", "tpot"]


def test_the_gateway_observes_it_as_it_observes_ttft() -> None:
    from tokometer.gateway.prometheus import GatewayMetrics

    metrics = GatewayMetrics(gpu=False)
    metrics.series("chat", "a").observe_record(_rec([110, 130, 150], [1.0, 1.0, 1.0]))
    metrics.series("chat", "a").observe_record(_rec([110], [1.0]))  # one token: a TTFT, no TTST
    text = metrics.render().decode()
    assert 'tokometer_gateway_time_to_second_token_seconds_count{route="chat",upstream="a"} 1.0' in text
    assert 'tokometer_gateway_time_to_second_token_seconds_sum{route="chat",upstream="a"} 0.12' in text
    assert 'gen_ai_server_time_to_first_token_seconds_count{route="chat",upstream="a"} 2.0' in text
