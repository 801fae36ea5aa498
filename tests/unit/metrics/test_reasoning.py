"""Reasoning apart from the answer: ``<think>`` sections cut anywhere, the usage count, the metrics."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import orjson
import pytest

from tokometer.client.assemble import assemble
from tokometer.metrics import request as m
from tokometer.metrics.summary import summarize
from tokometer.protocols.common.base import ProtocolClient
from tokometer.protocols.common.reasoning import inline, split_inline
from tokometer.protocols.openai.chunks import ChunkWriter
from tokometer.protocols.openai.client import OpenAIChat, OpenAICompletions
from tokometer.records import RequestRecord

MS = 1_000_000


def test_no_tag_is_no_reasoning() -> None:
    assert split_inline(["Hello", " world"]) is None


def test_think_tags_cut_across_events() -> None:
    texts = ["<thi", "nk>let me", " see</th", "ink>", "\n\nThe", " answer"]
    split = split_inline(texts)
    assert split is not None
    assert [s.reasoning for s in split] == ["", "let me", " see", "", "", ""]
    assert [s.answer for s in split] == ["", "", "", "", "\n\nThe", " answer"]
    assert [s.tagged for s in split] == [True, True, True, True, False, False]


def test_a_section_closed_but_never_opened_started_at_the_first_character() -> None:
    # DeepSeek-R1's template opens <think> in the prompt: the stream only closes it
    split = split_inline(["Okay, so", " 2+2</think>", "4"])
    assert split is not None
    assert [(s.reasoning, s.answer) for s in split] == [("Okay, so", ""), (" 2+2", ""), ("", "4")]


def test_one_event_with_reasoning_and_answer() -> None:
    split = split_inline(["<think>hm</think>Yes"])
    assert split is not None and (split[0].reasoning, split[0].answer) == ("hm", "Yes")


def test_the_servers_inline_form_reads_back() -> None:
    words = [" a", " b", " c", " d", " e"]
    events = [inline(words[i:i + 2], i, 3) for i in range(0, 5, 2)]
    assert "".join(events) == " <think>a b c</think> d e"
    split = split_inline(events)
    assert split is not None
    assert "".join(s.reasoning for s in split) == "a b c"
    assert "".join(s.answer for s in split).split() == ["d", "e"]


def test_usage_reasoning_tokens_are_read() -> None:
    writer = ChunkWriter(True, "m")
    event = OpenAIChat().parse(writer.usage(10, 30, 12)[len(b"data: "):])
    assert event is not None and (event.completion_tokens, event.reasoning_tokens) == (30, 12)
    plain = OpenAIChat().parse(writer.usage(10, 30)[len(b"data: "):])
    assert plain is not None and plain.reasoning_tokens is None


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_both_reasoning_delta_fields_are_read(field: str) -> None:
    payload = ChunkWriter(True, "m", reasoning_field=field).content("", "thinking")[len(b"data: "):]
    assert orjson.loads(payload)["choices"][0]["delta"] == {field: "thinking"}
    event = OpenAIChat().parse(payload)
    assert event is not None and event.reasoning == "thinking" and event.has_content


def _sse(*payloads: Mapping[str, object]) -> list[bytes]:
    return [b"data: " + orjson.dumps(p) + b"\n\n" for p in payloads] + [b"data: [DONE]\n\n"]


def _record(chunks: list[bytes], backend: ProtocolClient, count: Callable[[str], int] | None = None) -> RequestRecord:
    record = RequestRecord(index=0, sent_ns=1, status=200)
    stamps = [(i + 1) * 10 * MS for i in range(len(chunks))]
    assemble(record, backend, chunks, stamps, count)
    record.end_ns = stamps[-1]
    return record


def _completion(text: str) -> dict[str, object]:
    return {"choices": [{"index": 0, "text": text, "finish_reason": None}]}


def test_inline_think_is_split_when_assembled() -> None:
    chunks = _sse(_completion("<think>a"), _completion(" b</th"), _completion("ink>\n\n"), _completion(" c"),
                  _completion(" d"), {"choices": [{"index": 0, "text": "", "finish_reason": "stop"}]})
    record = _record(chunks, OpenAICompletions(), lambda text: len(text.split()))
    assert record.first_token_ns == 10 * MS and record.first_answer_ns == 40 * MS
    assert record.output_tokens_source == "tokenizer"
    assert (record.reasoning_tokens, record.reasoning_tokens_source) == (2, "tokenizer")
    assert record.output_tokens is not None
    assert m.ttfat_ns(record) == 40 * MS - 1 and m.answer_tokens(record) == record.output_tokens - 2


def test_reasoning_in_a_field_counts_toward_the_tokenizers_output_count() -> None:
    delta = [{"choices": [{"index": 0, "delta": d, "finish_reason": None}]}
             for d in ({"reasoning_content": "one two"}, {"reasoning_content": " three"}, {"content": "four"})]
    record = _record(_sse(*delta), OpenAIChat(), lambda text: len(text.split()))
    assert (record.output_tokens, record.reasoning_tokens) == (4, 3)
    assert record.first_answer_ns == 30 * MS


def test_estimated_reasoning_without_a_tokenizer_or_usage() -> None:
    delta = [{"choices": [{"index": 0, "delta": d, "finish_reason": None}]}
             for d in ({"reasoning": "x"}, {"reasoning": "y"}, {"content": "z"})]
    record = _record(_sse(*delta), OpenAIChat())
    assert (record.reasoning_tokens, record.reasoning_tokens_source) == (2, "estimate")


def test_hidden_reasoning_counted_by_the_server() -> None:
    # OpenAI's o-series: no reasoning text streamed, only its count in usage; the first token is the answer
    chunks = _sse({"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "stop"}]},
                  {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 50,
                                            "completion_tokens_details": {"reasoning_tokens": 49}}})
    record = _record(chunks, OpenAIChat())
    assert (record.reasoning_tokens, record.reasoning_tokens_source) == (49, "usage")
    assert record.first_answer_ns == 0 and m.ttfat_ns(record) == m.ttft_ns(record)
    assert m.reasoned(record) and m.answer_tokens(record) == 1


def _timed(first: int, answer: int, last: int, output: int, reasoning: int | None) -> RequestRecord:
    events = list(range(first, last + 1, MS))
    return RequestRecord(index=0, sent_ns=1, first_token_ns=first, last_token_ns=last, end_ns=last, event_ns=events,
                         event_tokens=[output / len(events)] * len(events), output_tokens=output,
                         first_answer_ns=answer, reasoning_tokens=reasoning, reasoning_tokens_source="usage")


def test_request_metrics_of_a_reasoning_answer() -> None:
    # 31 events 1 ms apart from 10 ms, one token each: 10 reasoning, the answer from 20 ms
    r = _timed(10 * MS, 20 * MS, 40 * MS, 31, 10)
    assert m.ttft_ns(r) == 10 * MS - 1 and m.ttfat_ns(r) == 20 * MS - 1
    assert m.answer_tokens(r) == 21
    assert m.answer_decode_speed_tok_s(r) == pytest.approx(1000.0)
    assert m.decode_speed_tok_s(r) == pytest.approx(1000.0)  # both: reasoning and answer tokens


def test_a_step_summary_has_reasoning_only_when_an_answer_reasoned() -> None:
    plain = _timed(10 * MS, 0, 40 * MS, 31, None)
    assert summarize([plain]).reasoning is None
    summary = summarize([plain, _timed(10 * MS, 20 * MS, 40 * MS, 31, 10)]).reasoning
    assert summary is not None
    assert summary.requests == 1 and summary.ttfat_ms.count == 2
    assert summary.reasoning_tokens_total == 10 and summary.answer_tokens_total == 52
    assert summary.reasoning_share == pytest.approx(10 / 62)
    assert summary.reasoning_tokens_source == {"usage": 1}
    data = summarize([plain, _timed(10 * MS, 20 * MS, 40 * MS, 31, 10)]).to_json()["reasoning"]
    assert data["reasoning_tokens"]["total"] == 10 and data["ttfat_ms"]["count"] == 2


def test_the_report_headline_and_console_line_name_the_time_to_first_answer() -> None:
    from tokometer.report.headline import headline, reasoning_line

    summary = summarize([_timed(10 * MS, 20 * MS, 40 * MS, 31, 10)]).to_json()
    run = {"name": "r", "knee": None, "steps": [{"label": "c=1", "summary": summary, "health": None,
                                                 "interrupted": False, "power": None}]}
    assert any(line.startswith("Reasoning model: time to first answer token p50 20.0 ms") for line in headline(run))
    assert "1 answers reasoned" in reasoning_line(summary["reasoning"])
