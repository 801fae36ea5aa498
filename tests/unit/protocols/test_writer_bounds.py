"""The client-side writers against a hostile upstream: bounded memory and linear time, streams the SDKs still read.

The deltas are built here as the relay would hand them on from an upstream that lies: reasoning and text
alternating every chunk, tool-call indexes alternating or new on every chunk, megabytes of one item's text,
and tool-call arguments nested deeper than the project's JSON depth limit. Each stream is read back by the
official ``openai`` (or ``anthropic``) SDK's own stream accumulator, over an ``httpx.MockTransport``.
"""

from __future__ import annotations

import importlib
import time
from typing import Any

import orjson
import pytest

from tokometer.protocols.anthropic_messages.writer import AnthropicStreamWriter
from tokometer.protocols.common.chat_tools import MAX_CALLS, ToolCall, ToolCallDelta, arguments_object
from tokometer.protocols.common.framing import iter_payloads
from tokometer.protocols.common.pieces import MAX_KEPT_CHARS
from tokometer.protocols.openai_responses.writer import MAX_ITEMS, ResponsesStreamWriter

openai = pytest.importorskip("openai")
anthropic = pytest.importorskip("anthropic")
try:  # the SDKs' HTTP library: httpx2 since openai 3, httpx before
    httpx: Any = importlib.import_module("httpx2")
except ImportError:
    httpx = pytest.importorskip("httpx")


def _payloads(stream: bytes) -> list[dict[str, Any]]:
    return [orjson.loads(p) for _, p in iter_payloads([stream], [0], "sse")]


def _transport(stream: bytes) -> Any:
    def answer(request: Any) -> Any:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=stream)
    return httpx.Client(transport=httpx.MockTransport(answer))


def _openai_final(stream: bytes) -> Any:
    """The official SDK's final response, accumulated from the stream's events (raises where it is invalid)."""
    client = openai.OpenAI(base_url="http://sdk.test/v1", api_key="x", max_retries=0,
                           http_client=_transport(stream))
    with client, client.responses.stream(model="m", input="x") as events:
        for _ in events:
            pass
        return events.get_final_response()


def _openai_events(stream: bytes) -> list[Any]:
    """The events as the official SDK's stream accumulator hands them on (raises where they are invalid)."""
    client = openai.OpenAI(base_url="http://sdk.test/v1", api_key="x", max_retries=0,
                           http_client=_transport(stream))
    with client, client.responses.stream(model="m", input="x") as events:
        return list(events)


def _anthropic_final(stream: bytes) -> Any:
    client = anthropic.Anthropic(base_url="http://sdk.test", api_key="x", max_retries=0,
                                 http_client=_transport(stream))
    with client, client.messages.stream(model="m", max_tokens=9, messages=[{"role": "user", "content": "x"}]) as events:
        return events.get_final_message()


def _alternating(writer: ResponsesStreamWriter, n: int) -> list[bytes]:
    return [writer.content("", f"r{i} ") if i % 2 else writer.content(f"t{i} ", "") for i in range(n)]


def test_alternating_reasoning_and_text_costs_linear_time() -> None:
    writer = ResponsesStreamWriter("m")
    started = time.perf_counter()
    _alternating(writer, 50_000)
    writer.ending("stop", 3, 50_000)
    # a list.index per event took 2 s for 20,000 events here (~12 s for these); linear: ~0.15 s
    assert time.perf_counter() - started < 3


def test_alternating_reasoning_and_text_opens_a_bounded_number_of_items() -> None:
    writer = ResponsesStreamWriter("m")
    n = 4_000
    stream = b"".join([*_alternating(writer, n), writer.ending("stop", 3, n)])
    payloads = _payloads(stream)
    assert [p["sequence_number"] for p in payloads] == list(range(len(payloads)))
    added = [p["output_index"] for p in payloads if p["type"] == "response.output_item.added"]
    assert added == list(range(len(added))) and len(added) <= MAX_ITEMS + 2
    output = payloads[-1]["response"]["output"]
    assert len(output) == len(added)
    # nothing lost: the text of all message items, and of all reasoning items, is everything sent, in order
    text = "".join(item["content"][0]["text"] for item in output if item["type"] == "message")
    reasoning = "".join(item["content"][0]["text"] for item in output if item["type"] == "reasoning")
    assert text == "".join(f"t{i} " for i in range(0, n, 2))
    assert reasoning == "".join(f"r{i} " for i in range(1, n, 2))
    final = _openai_final(stream)
    assert [item.type for item in final.output] == [item["type"] for item in output]
    assert final.output_text == text


def test_alternating_and_new_tool_call_indexes_are_bounded_and_read_by_the_sdk() -> None:
    writer = ResponsesStreamWriter("m")
    parts = [writer.tool_call(ToolCallDelta(i % 2, f"call_{i % 2}", "f", "{}" if i < 2 else " "))
             for i in range(4 * MAX_ITEMS)]
    parts += [writer.tool_call(ToolCallDelta(10 + i, f"c{i}", "g", "{}")) for i in range(3 * MAX_CALLS)]
    parts.append(writer.ending("stop", 3, 4))
    stream = b"".join(parts)
    payloads = _payloads(stream)
    added = [p for p in payloads if p["type"] == "response.output_item.added"]
    assert len(added) <= MAX_ITEMS + 2 + MAX_CALLS
    call_ids = [p["item"]["call_id"] for p in added]
    assert len(set(call_ids)) == len(call_ids)  # the SDK refuses two items of one call_id
    final = _openai_final(stream)
    assert len(final.output) == len(added)


def test_an_items_text_is_kept_up_to_the_limit_and_the_item_says_it_is_incomplete() -> None:
    writer = ResponsesStreamWriter("m")
    piece = "x" * (1024 * 1024)
    pieces = MAX_KEPT_CHARS // len(piece) + 2
    streamed = 0
    ending = b""
    for _ in range(pieces):
        for payload in _payloads(writer.content(piece, "")):
            if payload["type"] == "response.output_text.delta":
                streamed += len(payload["delta"])
    ending = writer.ending("stop", 3, 4)
    assert streamed == pieces * len(piece)  # every delta goes on whole
    assert len(ending) < 5 * MAX_KEPT_CHARS  # the done events and the final response repeat what was kept
    events = {p["type"]: p for p in _payloads(ending)}
    assert len(events["response.output_text.done"]["text"]) == MAX_KEPT_CHARS
    assert events["response.output_item.done"]["item"]["status"] == "incomplete"
    item = events["response.completed"]["response"]["output"][0]
    assert item["status"] == "incomplete" and len(item["content"][0]["text"]) == MAX_KEPT_CHARS
    small = ResponsesStreamWriter("m")
    done = _payloads(small.content("hi", "") + small.ending("stop", 1, 1))
    assert done[-1]["response"]["output"][0]["status"] == "completed"


def test_the_anthropic_writer_keeps_a_bounded_map_of_calls() -> None:
    writer = AnthropicStreamWriter("m")
    parts = [writer.content("hi", "")]
    parts += [writer.tool_call(ToolCallDelta(i, f"c{i}", "g", "{}")) for i in range(3 * MAX_CALLS)]
    parts.append(writer.ending("stop", 3, 4))
    stream = b"".join(parts)
    starts = [p for p in _payloads(stream) if p["type"] == "content_block_start"
              and p["content_block"]["type"] == "tool_use"]
    assert len(starts) == MAX_CALLS  # as many as `ToolCalls` gathers for a non-streamed answer
    final = _anthropic_final(stream)
    assert [b.type for b in final.content] == ["text"] + ["tool_use"] * MAX_CALLS


def _nested(depth: int) -> str:
    return '{"a": ' + "[" * (depth - 1) + "]" * (depth - 1) + "}"


def test_arguments_nested_past_the_json_depth_limit_are_not_parsed() -> None:
    assert arguments_object(_nested(64)) != {}  # at the limit: parsed
    assert arguments_object(_nested(65)) == {}
    assert arguments_object(_nested(300)) == {}
    assert arguments_object("[1]") == {} and arguments_object("{") == {} and arguments_object("") == {}
    body = AnthropicStreamWriter("m").whole("", "", [ToolCall("c", "f", _nested(300))], "stop", 1, 1)
    orjson.dumps(body)  # orjson writes at most 254 levels: a 300-deep input was a TypeError here
    assert body["content"][0]["input"] == {}
