"""Hostile tool-call chunks from a raw server: bounded, classified, never a traceback.

The server is `tests.hostile_servers.HostileServer` (a raw-socket server on loopback written for these tests)
with answers written here: a stream whose ``delta.tool_calls`` carry a 512 KiB argument fragment, an entry
without ``index``, indexes that are absurd (10^15, -1, a string, a boolean), a name that is not a string, a
list of 10,000 entries, and an event with ``tool_calls`` that is not a list at all.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from typing import Any

from tests.helpers import bench
from tests.hostile_servers import hostile

_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
_END = b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}\n\ndata: [DONE]\n\n'


def _event(calls: Any) -> bytes:
    return b"data: " + json.dumps({"choices": [{"index": 0, "delta": {"tool_calls": calls}}]}).encode() + b"\n\n"


def _hostile_calls(conn: socket.socket, stop: threading.Event) -> None:
    conn.sendall(_HEAD
                 + _event([{"id": "c1", "type": "function", "function": {"name": "f", "arguments": ""}}])  # no index
                 + _event([{"index": 0, "function": {"arguments": "{\"q\": \"" + "x" * (512 * 1024)}}])
                 + _event([{"index": 10**15, "function": {"arguments": "a"}},
                           {"index": -1, "function": {"arguments": "b"}},
                           {"index": "2", "function": {"arguments": "c"}},
                           {"index": True, "function": {"arguments": "d"}}])
                 + _event([{"index": 1, "id": "c2", "function": {"name": 7, "arguments": "\"}"}}])
                 + _event([{"index": 3, "function": {"arguments": "e"}}] * 10_000)
                 + _event("not a list")
                 + _END)


def test_bench_bounds_and_classifies_hostile_tool_call_chunks() -> None:
    with hostile({"/v1/chat/completions": _hostile_calls}) as server:
        started = time.monotonic()
        result = bench(server.url, model="m", concurrency=[1], requests=2, input_tokens=4, output_tokens=16,
                       tokenizer="none", tools=2, request_timeout_s=10)
        elapsed = time.monotonic() - started
    step = result.steps[0]
    assert elapsed < 20
    assert step.summary.requests_completed == 2, step.summary.error_examples
    for record in step.records:
        # the calls believed: index 0 (given, and the one without an index read as 0), 1 and 3
        assert record.tool_calls == 3
        assert record.first_tool_call_ns == record.first_token_ns > 0
        # what arrived is output: the 512 KiB fragment, the absurd-index fragments, 64 of the 10,000 entries
        assert 512 * 1024 < len(record.tool_call_text) < 512 * 1024 + 200
        notes = record.rejected_numbers or ""
        assert "tool_calls[].index=1000000000000000" in notes
        assert "tool_calls[].index=-1" in notes
        assert "tool_calls[].function.name=7 (not a string)" in notes
        assert "10,000 entries (only the first 64 read)" in notes
        assert "delta.tool_calls='not a list' (not a list)" in notes
        assert len(notes) <= 500
        assert record.tool_call_tokens is not None and record.tool_call_tokens_source == "estimate"
    assert step.summary.tool_calls is not None and step.summary.tool_calls.requests == 2
    assert step.summary.server_numbers_rejected == 2


def _text_then_call(conn: socket.socket, stop: threading.Event) -> None:
    """Well-formed: two text events, 50 ms, then a call in three events, and usage (5 output tokens)."""
    conn.sendall(_HEAD + b'data: {"choices":[{"index":0,"delta":{"content":"Let me"}}]}\n\n'
                 + b'data: {"choices":[{"index":0,"delta":{"content":" check"}}]}\n\n')
    time.sleep(0.05)
    conn.sendall(_event([{"index": 0, "id": "c1", "type": "function", "function": {"name": "get_weather",
                                                                               "arguments": ""}}])
                 + _event([{"index": 0, "function": {"arguments": "{\"city\": "}}])
                 + _event([{"index": 0, "function": {"arguments": "\"Oslo\"}"}}])
                 + b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}\n\n'
                 + b'data: {"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":5,"total_tokens":14}}\n\n'
                 + b"data: [DONE]\n\n")


def test_text_before_a_call_starts_ttft_and_the_call_comes_later() -> None:
    with hostile({"/v1/chat/completions": _text_then_call}) as server:
        result = bench(server.url, model="m", concurrency=[1], requests=2, input_tokens=4, output_tokens=16,
                       tokenizer="none", tools=1)
    step = result.steps[0]
    assert step.summary.requests_completed == 2, step.summary.error_examples
    for record in step.records:
        assert record.output_text == "Let me check" and record.finish_reason == "stop"
        assert record.tool_call_text == 'get_weather{"city": "Oslo"}'
        assert record.tool_calls == 1 and record.output_tokens == 5 and len(record.event_ns) == 5
        assert record.first_tool_call_ns - record.first_token_ns >= 45e6  # the 50 ms pause between text and call
        assert record.tool_call_tokens_source == "estimate"  # each event's share (1 token each) by characters
        assert record.tool_call_tokens == 3
    tools = step.summary.tool_calls
    assert tools is not None and tools.time_to_first_tool_call_ms.p50 is not None
    assert step.summary.ttft_ms.p50 is not None and tools.time_to_first_tool_call_ms.p50 > step.summary.ttft_ms.p50 + 45
