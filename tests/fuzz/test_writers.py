"""Fuzzing the Responses stream writer: any sequence of reasoning, text and tool-call deltas an upstream may send.

Documented behaviour (`tokometer.protocols.openai_responses.writer`), with its bounds made small here so that examples
reach them: sequence numbers one apart, output items added at consecutive indexes and at most
``MAX_ITEMS + 2 + MAX_CALLS`` of them, each closed once before the end, the text kept at most `MAX_KEPT_CHARS`
(an item not kept whole is ``incomplete``), and the official ``openai`` SDK accumulates the stream into its
final response without raising. Tool calls whose fragments an upstream interleaves in any order, with reasoning
and text between, are one Anthropic ``tool_use`` block and one Responses ``function_call`` item each, their
arguments all the call's fragments in order, as the ``anthropic`` and ``openai`` SDKs read them.
"""

from __future__ import annotations

from typing import Any
from unittest import mock

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.unit.protocols.test_writer_bounds import _anthropic_final, _openai_events, _openai_final, _payloads
from tokometer.protocols.anthropic_messages import writer as anthropic_writer
from tokometer.protocols.common.chat_tools import ToolCallDelta
from tokometer.protocols.openai_responses import writer as responses_writer

pytest.importorskip("openai")

_OPS = st.lists(st.one_of(
    st.tuples(st.just("text"), st.text(max_size=6)),
    st.tuples(st.just("reasoning"), st.text(max_size=6)),
    st.tuples(st.integers(0, 5), st.text(max_size=6), st.sampled_from([None, "call_x", "call_y"]))),
    max_size=60)


@given(_OPS, st.sampled_from(["stop", "length"]))
def test_any_deltas_make_a_bounded_stream_the_sdk_reads(ops: list[Any], finish: str) -> None:
    with mock.patch.object(responses_writer, "MAX_ITEMS", 4), mock.patch.object(responses_writer, "MAX_CALLS", 3), \
            mock.patch.object(responses_writer, "MAX_KEPT_CHARS", 40):
        writer = responses_writer.ResponsesStreamWriter("m")
        parts = []
        for op in ops:
            if op[0] == "text":
                parts.append(writer.content(op[1], ""))
            elif op[0] == "reasoning":
                parts.append(writer.content("", op[1]))
            else:
                parts.append(writer.tool_call(ToolCallDelta(op[0], op[2], "f", op[1])))
        parts.append(writer.ending(finish, 1, len(ops)))
    stream = b"".join(parts)
    payloads = _payloads(stream)
    assert [p["sequence_number"] for p in payloads] == list(range(len(payloads)))
    added = [p["output_index"] for p in payloads if p["type"] == "response.output_item.added"]
    done = [p["output_index"] for p in payloads if p["type"] == "response.output_item.done"]
    assert added == list(range(len(added))) and sorted(done) == added and len(added) <= 4 + 2 + 3
    output = payloads[-1]["response"]["output"]
    kept = sum(len(item["arguments"] if item["type"] == "function_call" else item["content"][0]["text"])
               for item in output)
    assert kept <= 40
    sent_text = "".join(op[1] for op in ops if op[0] == "text")
    text = "".join(item["content"][0]["text"] for item in output if item["type"] == "message")
    if not any(item["status"] == "incomplete" for item in output):
        assert text == sent_text
    streamed = "".join(p["delta"] for p in payloads if p["type"] == "response.output_text.delta")
    assert streamed == sent_text  # every delta goes on whole
    if finish == "stop":
        assert len(_openai_final(stream).output) == len(output)
    else:  # the SDK gives no final response for `response.incomplete`; its accumulation still reads every event
        assert _openai_events(stream)[-1].type == "response.incomplete"
    orjson.dumps(payloads)



@given(st.data())
def test_interleaved_tool_calls_are_one_block_and_one_item_each(data: st.DataObject) -> None:
    schedule = data.draw(st.lists(st.one_of(st.sampled_from(["text", "reasoning"]), st.integers(0, 4)), max_size=40))
    indexes = list(dict.fromkeys(op for op in schedule if isinstance(op, int)))  # in the order the calls begin
    values = {k: data.draw(st.text(max_size=8)) for k in indexes}
    wholes = {k: orjson.dumps({"v": values[k]}).decode() for k in indexes}
    pieces: dict[int, list[str]] = {}
    for k, whole in wholes.items():  # the call's JSON cut anywhere, one piece per delta of the call
        n = schedule.count(k)
        cuts = sorted(data.draw(st.lists(st.integers(0, len(whole)), min_size=n - 1, max_size=n - 1)))
        pieces[k] = [whole[a:b] for a, b in zip([0, *cuts], [*cuts, len(whole)], strict=True)]
    kept = indexes[:3]  # MAX_CALLS, made 3
    with mock.patch.object(responses_writer, "MAX_ITEMS", 4), mock.patch.object(responses_writer, "MAX_CALLS", 3), \
            mock.patch.object(anthropic_writer, "MAX_CALLS", 3):
        streams = []
        for writer in (responses_writer.ResponsesStreamWriter("m"), anthropic_writer.AnthropicStreamWriter("m")):
            parts, taken = [], dict.fromkeys(indexes, 0)
            for op in schedule:
                if isinstance(op, int):
                    parts.append(writer.tool_call(ToolCallDelta(op, None if taken[op] else f"call_{op}", "f",
                                                                pieces[op][taken[op]])))
                    taken[op] += 1
                else:
                    parts.append(writer.content("t", "") if op == "text" else writer.content("", "r"))
            parts.append(writer.ending("stop", 1, len(schedule)))
            streams.append(b"".join(parts))
    responses, messages = streams
    payloads = _payloads(responses)
    added = [p["output_index"] for p in payloads if p["type"] == "response.output_item.added"]
    done = [p["output_index"] for p in payloads if p["type"] == "response.output_item.done"]
    assert added == list(range(len(added))) and sorted(done) == added and len(added) <= 4 + 2 + 3
    calls = [item for item in _openai_final(responses).output if item.type == "function_call"]
    assert [(c.call_id, c.arguments, c.status) for c in calls] == [(f"call_{k}", wholes[k], "completed")
                                                                   for k in kept]
    events = _payloads(messages)
    for index in {p["index"] for p in events if "index" in p}:  # each block started, then stopped, once
        kinds = [p["type"] for p in events if p.get("index") == index]
        assert kinds[0] == "content_block_start" and kinds[-1] == "content_block_stop"
        assert kinds.count("content_block_start") == kinds.count("content_block_stop") == 1
    blocks = [b for b in _anthropic_final(messages).content if b.type == "tool_use"]
    assert [(b.id, b.input) for b in blocks] == [(f"call_{k}", {"v": values[k]}) for k in kept]
