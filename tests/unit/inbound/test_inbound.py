"""The servers' request boundary as pure functions: JSON depth, OpenAI field types, header text, atomic writes,
and the body deadlines (`read_body` over an ASGI channel that delivers at set times).

The same functions the gateway and the simulator call on every request (`tokometer.inbound`,
`tokometer.protocols.openai.request`); the processes themselves are tested on loopback in
``tests/integration/test_request_shapes.py``.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import orjson
import pytest
from starlette.requests import Request

from tokometer.inbound.body import BodyTimeout, read_body
from tokometer.inbound.headers import header_text
from tokometer.inbound.jsonbody import BadBody, _deeper_than, json_depth, parse_object
from tokometer.protocols.openai.request import check_request
from tokometer.util.atomicfile import atomic_open, atomic_path, write_atomic
from tokometer.util.errors import OutputError


def test_depth_is_counted_without_recursion() -> None:
    assert json_depth(1) == 0 and json_depth([]) == 1 and json_depth({"a": [1]}) == 2
    deep: list[object] = []
    for _ in range(100_000):
        deep = [deep]
    assert json_depth(deep) == 100_001


@pytest.mark.parametrize("levels", [0, 1, 2, 3, 62, 63, 64, 300])
def test_the_byte_scan_finds_the_depth_the_walk_finds(levels: int) -> None:
    """Strings full of brackets and escaped quotes do not count; the depth is exact at the limit."""
    value: object = {"s": "[[{{\\\"]]", "k": [1, {"t": "}]"}], "e": [], "o": {}}
    for level in range(levels):
        value = [value, []] if level % 2 else {"a": value, "b": "[{"}
    body = {"x": value}
    raw = json.dumps(body).encode()
    depth = json_depth(body)
    for limit in (depth - 1, depth, depth + 1):
        assert _deeper_than(raw, limit) == (depth > limit)  # the byte scan, used for very wide bodies
        if depth > limit:
            with pytest.raises(BadBody, match=f"more than {limit} levels"):
                parse_object(raw, max_depth=limit)
        else:
            assert parse_object(raw, max_depth=limit) == body


@pytest.mark.timing
def test_a_wide_body_is_checked_quickly() -> None:
    """The check on top of parsing: the Python walk it replaced took 3 s more than orjson's parse of this body."""
    raw = json.dumps({"a": [[]] * 1_000_000}).encode()
    started = time.perf_counter()
    orjson.loads(raw)
    parsed = time.perf_counter()
    parse_object(raw, max_values=2_000_000)  # (by default a million values are refused before the parse)
    checked = time.perf_counter()
    assert (checked - parsed) - (parsed - started) < 1.0
    with pytest.raises(BadBody, match="1,000,000 values"):
        parse_object(raw)


def test_parse_object_refuses_what_is_not_a_shallow_object() -> None:
    assert parse_object(b'{"a": [[1]]}') == {"a": [[1]]}
    assert parse_object(b'{"s": "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["}')["s"]
    for raw, words in ((b"[1]", "not an array"), (b'"x"', "not a string"), (b"{", "invalid JSON"),
                       (b"\xff", "invalid JSON"), (json.dumps({"a": [[[[]]]]}).encode(), "more than 4 levels")):
        with pytest.raises(BadBody, match=words):
            parse_object(raw, max_depth=4)


@pytest.mark.parametrize(("body", "chat", "field"), [
    ({"messages": [1, 2]}, True, "messages[0]"),
    ({"messages": "hi"}, True, "'messages'"),
    ({}, True, "'messages'"),
    ({"messages": [{"role": 1}]}, True, "messages[0].role"),
    ({"messages": [{"content": {"a": 1}}]}, True, "messages[0].content"),
    ({"messages": [{"content": [{"type": "text", "text": 5}]}]}, True, "messages[0].content[0].text"),
    ({"messages": [], "stream": "yes"}, True, "'stream'"),
    ({"messages": [], "stream_options": {"include_usage": 1}}, True, "stream_options.include_usage"),
    ({"messages": [], "max_tokens": True}, True, "'max_tokens'"),
    ({"messages": [], "max_tokens": 2**31}, True, "'max_tokens'"),
    ({"messages": [], "temperature": float("inf")}, True, "'temperature'"),
    ({"messages": [], "seed": 2**64}, True, "'seed'"),
    ({"messages": [], "model": 5}, True, "'model'"),
    ({"prompt": {"a": 1}}, False, "'prompt'"),
    ({"prompt": [[1], ["x"]]}, False, "'prompt'"),
])
def test_a_field_of_the_wrong_type_is_named(body: dict[str, object], chat: bool, field: str) -> None:
    with pytest.raises(ValueError, match=field.replace("[", r"\[").replace("]", r"\]")):
        check_request(body, chat)


def test_the_shapes_openai_takes_pass() -> None:
    check_request({"model": "m", "messages": [{"role": "user", "content": "hi"},
                                             {"role": "user", "content": [{"type": "text", "text": "a"},
                                                                          {"type": "image_url", "image_url": {}}]},
                                             {"role": "assistant", "content": None, "tool_calls": []}],
                   "stream": True, "stream_options": {"include_usage": True}, "max_tokens": 0, "temperature": 0,
                   "seed": -1, "stop": ["\n"], "n": 1, "tools": [{"type": "function"}]}, chat=True)
    for prompt in ("hi", ["a", "b"], [1, 2], [[1], [2, 3]], []):
        check_request({"prompt": prompt, "max_tokens": None, "stop": "x"}, chat=False)


def test_header_text_reads_utf8_and_latin1_alike() -> None:
    key = "clé-ключ"
    assert header_text(key.encode("utf-8").decode("latin-1")) == key  # what Starlette hands over for UTF-8
    assert header_text("clé") == "clé"  # Latin-1 bytes that are not UTF-8: kept as they are
    assert header_text("plain") == "plain"


def test_atomic_writes_keep_the_old_file_on_failure(tmp_path: Path) -> None:
    target = tmp_path / "deep" / "out.txt"
    write_atomic(target, "one")
    with pytest.raises(RuntimeError), atomic_open(target) as handle:
        handle.write("half")
        raise RuntimeError("stopped part-way")
    assert target.read_text() == "one"
    with atomic_path(target) as temp:
        temp.write_text("two")
    assert target.read_text() == "two"
    assert [p.name for p in target.parent.iterdir()] == ["out.txt"]
    with pytest.raises(OutputError, match=r"below-a-file: .*out\.txt is a file, not a directory; nothing"):
        write_atomic(target / "below-a-file", "x")


def _request(pieces: list[tuple[float, bytes]]) -> Request:
    """A Starlette request whose ASGI channel delivers each ``(delay_s, bytes)`` piece after its delay."""
    queue = list(pieces)

    async def receive() -> dict[str, object]:
        delay, chunk = queue.pop(0)
        await asyncio.sleep(delay)
        return {"type": "http.request", "body": chunk, "more_body": bool(queue)}

    return Request({"type": "http", "method": "POST", "headers": []}, receive)


@pytest.mark.timing
async def test_read_body_has_an_idle_and_a_total_deadline() -> None:
    steady = [(0.05, b"x")] * 6  # 0.3 s in all, never a pause over 0.1 s
    assert await read_body(_request(steady), 1024, 1.0, idle_timeout_s=0.1) == b"x" * 6
    with pytest.raises(BodyTimeout, match=r"did not arrive within 0\.2 s") as total:
        await read_body(_request(steady), 1024, 0.2, idle_timeout_s=0.1)
    assert total.value.reason == "body_timeout"
    paused = [(0.0, b"x"), (0.3, b"y")]
    with pytest.raises(BodyTimeout, match=r"nothing came for 0\.1 s") as idle:
        await read_body(_request(paused), 1024, 5.0, idle_timeout_s=0.1)
    assert idle.value.reason == "body_idle_timeout"
    with pytest.raises(BodyTimeout, match="nothing came"):  # the first read too (a 100 Continue then nothing)
        await read_body(_request([(0.3, b"x")]), 1024, 5.0, idle_timeout_s=0.1)
