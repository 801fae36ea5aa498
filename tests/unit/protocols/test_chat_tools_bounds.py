"""An upstream that lies about tool calls: the gateway's gathered calls stay bounded and linear.

No real server sends these; the deltas are built here (as `tool_call_deltas` or `tool_delta_reader` would
return them from hostile events: indexes up to 10^15, megabytes of one-character fragments)."""

from __future__ import annotations

import time

import pytest

from tokometer.protocols.common.chat_tools import MAX_ARGUMENT_CHARS, MAX_CALLS, ToolCallDelta, ToolCalls


def test_ten_thousand_indexes_keep_the_first_calls_and_say_so() -> None:
    calls = ToolCalls()
    for index in range(10_000):
        calls.add(ToolCallDelta(index * 10**11, f"id{index}", "f", "{}"))
    assert len(calls.calls) == MAX_CALLS and calls.cut
    assert calls.calls[0].id == "id0" and calls.calls[0].arguments == "{}"


@pytest.mark.timing  # linear time is a time: beside the other lanes the 10 s bound read 10.7 s
def test_megabytes_of_tiny_fragments_are_cut_at_the_limit_in_linear_time() -> None:
    calls = ToolCalls()
    calls.add(ToolCallDelta(0, "c", "f", ""))
    started = time.perf_counter()
    for _ in range(MAX_ARGUMENT_CHARS // 4 + 1000):
        calls.add(ToolCallDelta(0, None, None, "abcd"))
    arguments = calls.calls[0].arguments
    assert len(arguments) == MAX_ARGUMENT_CHARS and calls.cut
    assert time.perf_counter() - started < 10  # quadratic += would copy ~2 TB here


def test_well_formed_calls_are_joined_whole() -> None:
    calls = ToolCalls()
    for piece in ('{"ci', 'ty": ', '"Paris"}'):
        calls.add(ToolCallDelta(0, "call_1" if piece.startswith("{") else None, "get_weather", piece))
    calls.add(ToolCallDelta(1, "call_2", "get_time", "{}"))
    assert [(c.id, c.name, c.arguments) for c in calls.calls] == [
        ("call_1", "get_weather", '{"city": "Paris"}'), ("call_2", "get_time", "{}")]
    assert not calls.cut and calls.calls[0].arguments == '{"city": "Paris"}'  # reading twice adds nothing
