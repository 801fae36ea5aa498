"""Tool calls whose deltas an upstream interleaves (``delta.tool_calls`` index 0, then 1, then 0 again): each
call is one Anthropic ``tool_use`` block and one Responses ``function_call`` item, its arguments all its
fragments in order, as the official ``anthropic`` and ``openai`` SDKs accumulate the stream.

(A call reopened as a second block started mid-JSON made the ``anthropic`` SDK raise "Unable to parse tool
parameter JSON"; the Responses writer split the call into two incomplete items.)
"""

from __future__ import annotations

from typing import Any

import orjson

from tests.unit.protocols.test_writer_bounds import _anthropic_final, _openai_final, _payloads
from tokometer.protocols.anthropic_messages.writer import AnthropicStreamWriter
from tokometer.protocols.common.chat_tools import MAX_CALLS, ToolCallDelta
from tokometer.protocols.openai_responses.writer import MAX_ITEMS, ResponsesStreamWriter

_DELTAS = [ToolCallDelta(0, "call_a", "f", '{"a": '), ToolCallDelta(1, "call_b", "g", '{"b": [1, '),
           ToolCallDelta(0, None, None, '"x'), ToolCallDelta(1, None, None, "2]}"), ToolCallDelta(0, None, None, 'y"}')]


def _render(writer: Any, between: bool) -> bytes:
    """The interleaved calls, after reasoning and text, and (``between``) text and reasoning between fragments."""
    parts = [writer.content("", "hm"), writer.content("hi", "")]
    for number, delta in enumerate(_DELTAS):
        parts.append(writer.tool_call(delta))
        if between:
            parts.append(writer.content(f" t{number}", "") if number % 2 else writer.content("", f" r{number}"))
    return b"".join([*parts, writer.ending("stop", 3, 9)])


def test_an_interleaved_call_is_one_anthropic_block_the_sdk_reads() -> None:
    for between in (False, True):
        stream = _render(AnthropicStreamWriter("m"), between)
        payloads = _payloads(stream)
        starts = {p["index"]: p["content_block"] for p in payloads if p["type"] == "content_block_start"}
        stops = [p["index"] for p in payloads if p["type"] == "content_block_stop"]
        assert sorted(stops) == sorted(starts)  # each block stopped once
        for index in starts:  # nothing addressed to a block before its start or after its stop
            events = [p["type"] for p in payloads if p.get("index") == index]
            assert events[0] == "content_block_start" and events[-1] == "content_block_stop"
            assert events.count("content_block_start") == events.count("content_block_stop") == 1
        final = _anthropic_final(stream)
        calls = [block for block in final.content if block.type == "tool_use"]
        assert [(c.id, c.name, c.input) for c in calls] == [("call_a", "f", {"a": "xy"}),
                                                            ("call_b", "g", {"b": [1, 2]})]
        assert final.stop_reason == "tool_use"
        text = "".join(block.text for block in final.content if block.type == "text")
        thinking = "".join(block.thinking for block in final.content if block.type == "thinking")
        assert text == ("hi t1 t3" if between else "hi")
        assert thinking == ("hm r0 r2 r4" if between else "hm")


def test_an_interleaved_call_is_one_responses_item_the_sdk_reads() -> None:
    for between in (False, True):
        stream = _render(ResponsesStreamWriter("m"), between)
        payloads = _payloads(stream)
        assert [p["sequence_number"] for p in payloads] == list(range(len(payloads)))
        added = [p["output_index"] for p in payloads if p["type"] == "response.output_item.added"]
        done = [p["output_index"] for p in payloads if p["type"] == "response.output_item.done"]
        assert added == list(range(len(added))) and sorted(done) == added
        arguments = [p["arguments"] for p in payloads if p["type"] == "response.function_call_arguments.done"]
        assert arguments == ['{"a": "xy"}', '{"b": [1, 2]}']
        final = _openai_final(stream)
        calls = [item for item in final.output if item.type == "function_call"]
        assert [(c.call_id, c.name, c.arguments, c.status) for c in calls] == [
            ("call_a", "f", '{"a": "xy"}', "completed"), ("call_b", "g", '{"b": [1, 2]}', "completed")]
        assert final.output_text == ("hi t1 t3" if between else "hi")


def test_calls_alternating_every_chunk_stay_one_item_each_within_the_bounds() -> None:
    n = 6 * MAX_ITEMS  # a multiple of 3, past MAX_ITEMS: still one item a call, and at most MAX_CALLS calls
    pieces = ['{"a": [' if i < 3 else ("0, " if i < n - 3 else "0]}") for i in range(n)]
    whole = '{"a": [' + ", ".join(["0"] * ((n - 3) // 3)) + "]}"
    for writer in (ResponsesStreamWriter("m"), AnthropicStreamWriter("m")):
        parts = [writer.tool_call(ToolCallDelta(i % 3, f"call_{i % 3}", "f", piece)) for i, piece in enumerate(pieces)]
        parts += [writer.tool_call(ToolCallDelta(10 + i, f"c{i}", "g", "{}")) for i in range(2 * MAX_CALLS)]
        parts.append(writer.ending("stop", 3, 4))
        stream = b"".join(parts)
        if isinstance(writer, ResponsesStreamWriter):
            arguments = [item.arguments for item in _openai_final(stream).output]
            assert arguments == [whole] * 3 + ["{}"] * (MAX_CALLS - 3)
        else:
            inputs = [block.input for block in _anthropic_final(stream).content]
            assert inputs == [orjson.loads(whole)] * 3 + [{}] * (MAX_CALLS - 3)
