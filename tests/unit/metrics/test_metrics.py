"""Per-request metrics and step aggregates, checked against hand computations."""

from __future__ import annotations

import math

import pytest

from tokometer.metrics import SLO, Distribution, summarize
from tokometer.metrics import request as m
from tokometer.records import ErrorCategory, RequestRecord

MS = 1_000_000


def rec(index: int = 0, *, due: int = 0, sent: int = 0, events: list[int] | None = None,
        tokens: list[float] | None = None, end: int | None = None, out: int | None = None, inp: int | None = None,
        error: ErrorCategory | None = None, warmup: bool = False, connect: int = 0) -> RequestRecord:
    events = events or []
    tokens = tokens if tokens is not None else [1.0] * len(events)
    r = RequestRecord(index=index, due_ns=due, sent_ns=sent, event_ns=events, event_tokens=tokens, warmup=warmup,
                      connect_ns=connect)
    r.first_token_ns = events[0] if events else 0
    r.last_token_ns = events[-1] if events else 0
    r.end_ns = end if end is not None else (events[-1] + MS if events else sent + MS)
    r.output_tokens = out if out is not None else int(sum(tokens))
    r.input_tokens = inp
    r.error = error
    return r


def test_ttft_tpot_itl_by_hand() -> None:
    # sent at 10 ms, tokens at 110, 115, 120, 125 ms
    r = rec(due=9 * MS, sent=10 * MS, events=[110 * MS, 115 * MS, 120 * MS, 125 * MS], end=126 * MS, inp=50)
    assert m.ttft_ns(r) == 100 * MS
    assert m.ttft_from_due_ns(r) == 101 * MS
    assert m.client_lag_ns(r) == 1 * MS
    assert m.tpot_ns(r) == pytest.approx(5 * MS)  # (125 - 110) / (4 - 1)
    assert m.decode_speed_tok_s(r) == pytest.approx(200.0)
    assert m.itl_ns(r) == [5 * MS, 5 * MS, 5 * MS]
    assert m.e2e_ns(r) == 116 * MS
    assert m.e2e_speed_tok_s(r) == pytest.approx(4 / 0.116)
    assert m.prefill_speed_tok_s(r) == pytest.approx(50 / 0.1)


def test_multi_token_events_normalise_itl_and_exclude_first_event_from_tpot() -> None:
    # 4 tokens per event every 20 ms: 3 events, 12 tokens
    r = rec(sent=0, events=[100 * MS, 120 * MS, 140 * MS], tokens=[4.0, 4.0, 4.0])
    assert m.itl_ns(r) == [5 * MS, 5 * MS]
    assert m.chunk_gaps_ns(r) == [20 * MS, 20 * MS]
    # (140 - 100) / (12 - 4): the first event's 4 tokens all arrived at first_token_ns
    assert m.tpot_ns(r) == pytest.approx(5 * MS)


def test_undefined_metrics_are_none() -> None:
    one_token = rec(sent=0, events=[10 * MS])
    assert m.tpot_ns(one_token) is None
    assert m.itl_ns(one_token) == []
    failed = rec(due=1 * MS, sent=2 * MS, events=[10 * MS, 20 * MS], error="http_5xx")
    assert m.ttft_ns(failed) is None
    assert m.e2e_ns(failed) is None
    assert m.client_lag_ns(failed) == 1 * MS  # a failed request was still sent late or on time
    assert m.client_lag_ns(rec(due=1 * MS, sent=0)) is None  # never sent


def test_client_delay_excludes_connection_setup() -> None:
    r = rec(due=0, sent=3 * MS, events=[10 * MS], connect=2 * MS)
    assert m.client_lag_ns(r) == 3 * MS
    assert m.client_delay_ns(r) == 1 * MS
    assert m.connect_ns(r) == 2 * MS


def test_distribution_matches_hand_computed_percentiles() -> None:
    d = Distribution.of([1.0, 2.0, 3.0, 4.0, 10.0])
    assert d.count == 5
    assert d.mean == pytest.approx(4.0)
    assert d.min == 1.0 and d.max == 10.0
    assert d.p50 == 3.0
    # linear interpolation: rank 0.9 * 4 = 3.6 -> 4 + 0.6 * (10 - 4)
    assert d.p90 == pytest.approx(7.6)
    assert d.std == pytest.approx(math.sqrt(((3**2) + 2**2 + 1 + 0 + 6**2) / 4))
    assert Distribution.of([]).count == 0 and Distribution.of([]).p50 is None
    assert Distribution.of([2 * MS], 1e-6).p50 == pytest.approx(2.0)


def test_summary_window_throughput_and_errors() -> None:
    records = [
        rec(0, sent=0, events=[1 * MS], end=2 * MS, warmup=True),  # left out
        rec(1, sent=10 * MS, events=[20 * MS, 30 * MS], end=40 * MS, out=10, inp=5),
        rec(2, sent=20 * MS, events=[30 * MS, 60 * MS], end=110 * MS, out=30, inp=5),
        rec(3, sent=30 * MS, end=50 * MS, error="http_5xx"),
    ]
    records[3].error_detail = "HTTP 500: boom"
    s = summarize(records)
    assert s.requests_warmup == 1
    assert s.requests_completed == 2 and s.requests_failed == 1
    assert s.errors == {"http_5xx": 1}
    assert s.error_examples == {"http_5xx": "HTTP 500: boom"}
    assert s.duration_s == pytest.approx(0.1)  # 110 ms - 10 ms
    assert s.output_tokens_total == 40
    assert s.output_throughput_tok_s == pytest.approx(400.0)
    assert s.input_throughput_tok_s == pytest.approx(100.0)
    assert s.request_throughput_rps == pytest.approx(20.0)
    # E2E: 30 + 90 + 20 (the failed one counts toward concurrency) = 140 ms over 100 ms
    assert s.achieved_concurrency == pytest.approx(1.4)
    assert s.ttft_ms.count == 2 and s.ttft_ms.p50 == pytest.approx(10.0)
    assert s.send_rate_rps == pytest.approx(2 / 0.02)
    assert "generated tokens 40" in s.naive_line()


def test_goodput_counts_requests_meeting_every_slo() -> None:
    fast = rec(1, sent=1 * MS, events=[10 * MS, 20 * MS], end=30 * MS)
    slow = rec(2, sent=1 * MS, events=[200 * MS, 210 * MS], end=231 * MS)
    s = summarize([fast, slow], SLO(ttft_ms=50))
    assert s.goodput_rps == pytest.approx(1 / 0.23)
    assert summarize([fast, slow]).goodput_rps is None


def test_prompt_cache_hit_rate_over_the_answers_that_say() -> None:
    from tokometer.metrics import summarize
    from tokometer.records import RequestRecord, ServerTiming

    def record(n: int, cached: int | None, prompt: int) -> RequestRecord:
        i = n + 1
        r = RequestRecord(index=n, sent_ns=1_000 * i, first_token_ns=1_000 * i + 500, last_token_ns=1_000 * i + 900,
                          end_ns=1_000 * i + 1_000, event_ns=[1_000 * i + 500, 1_000 * i + 900], event_tokens=[1, 1],
                          output_tokens=2, output_tokens_source="usage", input_tokens=prompt,
                          input_tokens_source="usage", status=200, finish_reason="stop")
        r.server = ServerTiming(cached_tokens=cached) if cached is not None else None
        return r

    summary = summarize([record(0, 90, 100), record(1, 10, 100), record(2, None, 100)])
    assert summary.prompt_cache_hit_rate == pytest.approx(0.5) and summary.prompt_cache_reported == 2
    assert summarize([record(0, None, 100)]).prompt_cache_hit_rate is None
