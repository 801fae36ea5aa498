"""The gateway's client-side writers and request translations (each protocol package's ``writer`` and
``translate``, `tokometer.protocols.common.writer`, `tokometer.protocols.common.chat_tools`).

Each stream a writer renders is read back with the bench's own parser for that protocol
(`tokometer.protocols.anthropic_messages.client.AnthropicMessages`,
`tokometer.protocols.openai_responses.client.OpenAIResponses`), so the
writer and the reader agree on one protocol definition."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from tokometer.protocols.anthropic_messages.client import AnthropicMessages
from tokometer.protocols.anthropic_messages.translate import chat_request_from_anthropic
from tokometer.protocols.anthropic_messages.writer import AnthropicStreamWriter
from tokometer.protocols.common.base import ParsedEvent, ProtocolClient
from tokometer.protocols.common.chat_tools import ToolCallDelta, ToolCalls, tool_call_deltas
from tokometer.protocols.common.framing import iter_payloads as _iter
from tokometer.protocols.common.writer import StreamWriter
from tokometer.protocols.openai.chunks import ChunkWriter
from tokometer.protocols.openai.writer import OpenAIStreamWriter
from tokometer.protocols.openai_responses.client import OpenAIResponses
from tokometer.protocols.openai_responses.translate import chat_request_from_responses
from tokometer.protocols.openai_responses.writer import ResponsesStreamWriter


def iter_payloads(stream: bytes, framing: str) -> list[bytes]:
    """The payloads of one whole stream (the bench's splitter)."""
    return [payload for _, payload in _iter([stream], [0], "sse")]


def _render(writer: StreamWriter) -> bytes:
    return b"".join([writer.content("", "let me think"), writer.content("", " more"), writer.content("Hello", ""),
                     writer.content(" world", ""), writer.tool_call(ToolCallDelta(0, "call_a", "f", '{"x"')),
                     writer.tool_call(ToolCallDelta(0, None, None, ": 1}")), writer.ending("stop", 11, 7)])


def _parse(backend: ProtocolClient, stream: bytes) -> list[ParsedEvent]:
    return [e for e in (backend.parse(p) for p in iter_payloads(stream, "sse")) if e is not None]


def _types(stream: bytes) -> list[dict[str, Any]]:
    return [orjson.loads(p) for p in iter_payloads(stream, "sse")]


@pytest.mark.parametrize(("writer", "reader"), [(lambda: AnthropicStreamWriter("m", 11), AnthropicMessages),
                                                (lambda: ResponsesStreamWriter("m"), OpenAIResponses)])
def test_writers_streams_read_back_by_the_bench_parser(writer: Any, reader: type[ProtocolClient]) -> None:
    events = _parse(reader(), _render(writer()))
    assert "".join(e.text for e in events) == "Hello world"
    assert "".join(e.reasoning for e in events) == "let me think more"
    final = [e for e in events if e.completion_tokens is not None]
    assert final[-1].completion_tokens == 7 and final[-1].prompt_tokens == 11
    assert any(e.done for e in events) and events[-1].finish_reason in (None, "stop")


def test_anthropic_blocks_open_and_close_in_order() -> None:
    payloads = _types(_render(AnthropicStreamWriter("m", 11)))
    kinds = [p["type"] for p in payloads]
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
    starts = [(p["index"], p["content_block"]["type"]) for p in payloads if p["type"] == "content_block_start"]
    stops = [p["index"] for p in payloads if p["type"] == "content_block_stop"]
    assert starts == [(0, "thinking"), (1, "text"), (2, "tool_use")] and stops == [0, 1, 2]
    assert payloads[-2]["delta"]["stop_reason"] == "tool_use"
    json_deltas = [p["delta"]["partial_json"] for p in payloads if p["type"] == "content_block_delta"
                   and p["delta"]["type"] == "input_json_delta"]
    assert "".join(json_deltas) == '{"x": 1}'
    writer = AnthropicStreamWriter("m")
    stream = writer.content("a", "") + writer.error("boom") + writer.abort("boom")
    error = _types(stream)[-1]
    assert error == {"type": "error", "error": {"type": "api_error", "message": "boom"}}  # once


def test_responses_sequence_numbers_items_and_final_output() -> None:
    payloads = _types(_render(ResponsesStreamWriter("m", 64)))
    assert [p["sequence_number"] for p in payloads] == list(range(len(payloads)))
    final = payloads[-1]
    assert final["type"] == "response.completed" and final["response"]["status"] == "completed"
    output = final["response"]["output"]
    assert [item["type"] for item in output] == ["reasoning", "message", "function_call"]
    assert output[1]["content"][0]["text"] == "Hello world" and output[2]["arguments"] == '{"x": 1}'
    added = [p["output_index"] for p in payloads if p["type"] == "response.output_item.added"]
    done = [p["output_index"] for p in payloads if p["type"] == "response.output_item.done"]
    assert added == done == [0, 1, 2]
    cut = ResponsesStreamWriter("m")
    last = _types(cut.content("a", "") + cut.ending("length", 1, 1))[-1]
    assert last["type"] == "response.incomplete"
    assert last["response"]["incomplete_details"] == {"reason": "max_output_tokens"}


def test_openai_writer_role_once_usage_when_asked_and_tool_calls() -> None:
    writer = OpenAIStreamWriter(ChunkWriter(True, "m", "id1", 5), include_usage=False)
    stream = _render(writer)
    payloads = [orjson.loads(p) for p in iter_payloads(stream, "sse") if p != b"[DONE]"]
    assert payloads[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert sum(1 for p in payloads if p["choices"] and "role" in p["choices"][0]["delta"]) == 1
    assert payloads[-1]["choices"][0]["finish_reason"] == "tool_calls" and stream.endswith(b"data: [DONE]\n\n")
    assert all("usage" not in p for p in payloads)
    deltas = [d for p in payloads for d in tool_call_deltas(orjson.dumps(p))]
    assert [(d.index, d.id, d.name, d.arguments) for d in deltas] == [(0, "call_a", "f", '{"x"'),
                                                                       (0, None, None, ": 1}")]
    calls = ToolCalls()
    for delta in deltas:
        calls.add(delta)
    body = OpenAIStreamWriter(ChunkWriter(True, "m"), True).whole("", "", calls.calls, "stop", 1, 2)
    assert body["choices"][0]["message"]["tool_calls"] == [
        {"id": "call_a", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}}]
    assert body["choices"][0]["finish_reason"] == "tool_calls"


def test_anthropic_request_becomes_a_chat_request() -> None:
    chat = chat_request_from_anthropic({
        "model": "m", "max_tokens": 9, "system": [{"type": "text", "text": "be kind"}], "stream": True,
        "stop_sequences": ["END"], "temperature": 0, "metadata": {"user_id": "u"},
        "tools": [{"name": "f", "input_schema": {"type": "object"}}], "tool_choice": {"type": "tool", "name": "f"},
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "look "},
                                         {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                                      "data": "AAA"}}]},
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm"},
                                              {"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "42"},
                                         {"type": "text", "text": "thanks"}]}]})
    assert chat["messages"] == [
        {"role": "system", "content": "be kind"},
        {"role": "user", "content": [{"type": "text", "text": "look "},
                                     {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAA"}}]},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "t1", "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}}]},
        {"role": "tool", "tool_call_id": "t1", "content": "42"},
        {"role": "user", "content": "thanks"}]
    assert chat["max_tokens"] == 9 and chat["stop"] == ["END"] and chat["temperature"] == 0 and chat["stream"]
    assert chat["tools"] == [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    assert chat["tool_choice"] == {"type": "function", "function": {"name": "f"}} and "metadata" not in chat
    for bad, message in (({"model": "m", "messages": [{"role": "user", "content": "x"}]}, "max_tokens"),
                         ({"model": "m", "max_tokens": 1, "messages": []}, "messages"),
                         ({"model": "m", "max_tokens": 1, "messages": [{"role": "tool", "content": "x"}]},
                          "messages.0.role"),
                         ({"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": [
                             {"type": "document"}]}]}, "'document' block")):
        with pytest.raises(ValueError, match=message):
            chat_request_from_anthropic(bad)


def test_responses_request_becomes_a_chat_request() -> None:
    chat = chat_request_from_responses({
        "model": "m", "instructions": "be kind", "max_output_tokens": 5, "reasoning": {"effort": "low"},
        "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}], "tool_choice": "required",
        "input": [{"role": "developer", "content": "rules"},
                  {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
                  {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
                  {"type": "function_call", "call_id": "c2", "name": "f", "arguments": "{}"},
                  {"type": "function_call_output", "call_id": "c1", "output": "ok"}]})
    assert chat["messages"][:3] == [{"role": "system", "content": "be kind"}, {"role": "system", "content": "rules"},
                                    {"role": "user", "content": "hi"}]
    assert [c["id"] for c in chat["messages"][3]["tool_calls"]] == ["c1", "c2"]
    assert chat["messages"][4] == {"role": "tool", "tool_call_id": "c1", "content": "ok"}
    assert chat["max_tokens"] == 5 and chat["tool_choice"] == "required" and "reasoning" not in chat
    assert chat_request_from_responses({"model": "m", "input": "x"})["messages"] == [{"role": "user",
                                                                                       "content": "x"}]
    with pytest.raises(ValueError, match="previous_response_id"):
        chat_request_from_responses({"model": "m", "input": "x", "previous_response_id": "r"})
    with pytest.raises(ValueError, match="'input'"):
        chat_request_from_responses({"model": "m", "input": 3})


def test_tool_fields_and_readers_of_the_messages_and_responses_apis() -> None:
    from tokometer.protocols.tool_events import tool_delta_reader, tool_fields

    tools = [{"type": "function", "function": {"name": "f", "description": "d", "parameters": {"type": "object"}}}]
    choice = {"type": "function", "function": {"name": "f"}}
    assert tool_fields("anthropic-messages", tools, choice) == {
        "tools": [{"name": "f", "input_schema": {"type": "object"}, "description": "d"}],
        "tool_choice": {"type": "tool", "name": "f"}}
    assert tool_fields("openai-responses", tools, "auto") == {
        "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}, "description": "d"}],
        "tool_choice": "auto"}
    assert tool_fields("ollama", tools, None) == {} and tool_fields("anthropic-messages", "junk", None) == {}
    anthropic, responses = tool_delta_reader("anthropic-messages"), tool_delta_reader("openai-responses")
    assert anthropic is not None and responses is not None and tool_delta_reader("tgi") is None
    for reader, writer in ((anthropic, AnthropicStreamWriter("m")), (responses, ResponsesStreamWriter("m"))):
        calls = ToolCalls()
        for payload in iter_payloads(_render(writer), "sse"):
            if (delta := reader(payload)) is not None:
                calls.add(delta)
        # the writers' own events read back: one call, its name, its arguments whole (the Responses API's
        # call id is the writer's own call_id, the chat call's id)
        assert [(c.id, c.name, c.arguments) for c in calls.calls] == [("call_a", "f", '{"x": 1}')]
