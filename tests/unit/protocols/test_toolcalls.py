"""`tokometer.protocols.common.toolcalls`: reading ``delta.tool_calls``,
and the chat chunks the simulator writes for a call."""

from __future__ import annotations

import orjson

from tokometer.protocols.common.toolcalls import MAX_CALLS_PER_EVENT, read_tool_calls
from tokometer.protocols.openai.chunks import ChunkWriter
from tokometer.protocols.openai.client import OpenAIChat


def test_a_call_streams_as_name_then_fragments_that_join_into_json() -> None:
    writer = ChunkWriter(chat=True, model="m", id="chatcmpl-abc")
    chat = OpenAIChat()
    events = [chat.parse(writer.tool_call("get_weather", " rainy", first=True, last=False)[6:-2]),
              chat.parse(writer.tool_call("get_weather", " day", first=False, last=True)[6:-2])]
    assert all(e is not None and e.has_content for e in events)
    text = "".join(e.tool_calls.text for e in events if e is not None and e.tool_calls is not None)
    assert text.startswith("get_weather")
    assert orjson.loads(text.removeprefix("get_weather")) == {"query": " rainy day"}
    assert [e.tool_calls.indexes for e in events if e is not None and e.tool_calls is not None] == [[0], [0]]
    pieces = [p for e in events if e is not None and e.tool_calls is not None for p in e.tool_calls.pieces]
    assert [(p.index, p.id, p.name) for p in pieces] == [(0, "call-chatcmpl-abc", "get_weather"), (0, None, None)]
    assert "".join(p.arguments for p in pieces) == '{"query": " rainy day"}'


def test_an_empty_first_delta_is_not_output() -> None:
    delta = read_tool_calls([{"index": 0, "id": "c", "type": "function", "function": {"arguments": ""}}])
    assert delta is not None and delta.text == "" and delta.indexes == [0]
    assert read_tool_calls([]) is None and read_tool_calls(None) is None


def test_hostile_entries_are_noted_and_bounded() -> None:
    delta = read_tool_calls([{"index": 2**70, "function": {"arguments": "a"}}, 5,
                             {"function": {"name": ["x"], "arguments": "b"}}] + [{"index": 1}] * 100)
    assert delta is not None
    assert delta.text == "ab"  # the fragment of a call with an absurd index is still output
    assert delta.indexes == [0]  # the entry without an index is call 0; index-only entries carry nothing
    assert "not a whole number from 0 to 1023" in delta.rejected
    assert "(not an object)" in delta.rejected and "function.name=['x'] (not a string)" in delta.rejected
    assert f"only the first {MAX_CALLS_PER_EVENT} read" in delta.rejected

