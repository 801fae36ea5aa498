"""`tokometer.metrics.toolcalls` and `tokometer.metrics.images` on synthetic records, and their JSON round trip."""

from __future__ import annotations

import pytest

from tests.unit.metrics.test_metrics import MS, rec
from tokometer.metrics import request as m
from tokometer.metrics.summary import StepSummary, summarize
from tokometer.records import RequestRecord


def _called(index: int, sent: int, first_text: int | None, first_call: int, tokens: int) -> RequestRecord:
    events = ([first_text] if first_text is not None else []) + [first_call + k * MS for k in range(4)]
    r = rec(index, sent=sent, events=events, out=tokens)
    r.first_tool_call_ns, r.tool_calls = first_call, 1
    r.tool_call_tokens, r.tool_call_tokens_source = tokens - (1 if first_text is not None else 0), "tokenizer"
    return r


def test_time_to_first_tool_call_is_ttft_when_the_answer_begins_with_its_call() -> None:
    begins = _called(0, sent=10 * MS, first_text=None, first_call=60 * MS, tokens=4)
    after_text = _called(1, sent=10 * MS, first_text=30 * MS, first_call=90 * MS, tokens=5)
    assert m.time_to_first_tool_call_ns(begins) == m.ttft_ns(begins) == 50 * MS
    assert m.time_to_first_tool_call_ns(after_text) == 80 * MS and m.ttft_ns(after_text) == 20 * MS
    assert m.time_to_first_tool_call_ns(rec(2, sent=MS, events=[2 * MS])) is None
    s = summarize([begins, after_text, rec(2, sent=MS, events=[2 * MS, 3 * MS])])
    assert s.tool_calls is not None
    assert (s.tool_calls.requests, s.tool_calls.calls_total, s.tool_calls.tool_call_tokens_total) == (2, 2, 8)
    assert s.tool_calls.time_to_first_tool_call_ms.p50 == pytest.approx(65.0)
    assert s.tool_calls.tool_call_tokens_source == {"tokenizer": 2}
    assert StepSummary.from_json(s.to_json()) == s


def test_images_are_unknown_unless_the_server_says() -> None:
    said, silent = rec(0, sent=MS, events=[2 * MS]), rec(1, sent=MS, events=[2 * MS])
    said.images = silent.images = 2
    said.image_tokens = 512
    s = summarize([said, silent, rec(2, sent=MS, events=[2 * MS])])
    assert s.images is not None
    assert (s.images.requests, s.images.images_total, s.images.reported) == (2, 4, 1)
    assert s.images.image_tokens.mean == 512
    assert StepSummary.from_json(s.to_json()) == s
    unknown = summarize([silent])
    assert unknown.images is not None and "image tokens unknown" in unknown.images.line()
    assert summarize([rec(0, sent=MS, events=[2 * MS])]).images is None
