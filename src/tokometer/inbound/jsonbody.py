"""A request body as a JSON object of bounded depth and strings: `parse_object`, or `BadBody` (answered 400).

Before it is parsed, its strings are counted (its quotes, less the escaped ones, halved: one pass in C), and
its values (the commas outside its strings, and one): what parsing costs is their number (a
300,000-entry ``logit_bias`` is 300,000 keys, a quarter of a second of orjson holding the event loop; a
million empty arrays, over a second), and a body of more than ``max_strings`` strings (32,768 by default)
or ``max_values`` values (262,144) is refused unparsed. Long strings cost nothing to count and little to
parse (a copy).

orjson parses up to 1,024 levels, but writes at most 254 (and much of Python recurses on nesting): a
body nested deeper than ``max_depth`` (64 by default, `tokometer.inbound.request_limits`) is refused here,
before any code that would copy, hash or forward it sees it. The depth is found the cheaper of two
ways, in time linear in the body: the bracket count bounds it from above, so the usual body (a few
dozen brackets) is not looked at again; a body of up to 50,000 values (a long chat) is walked,
without recursion; a body of very many small values (a million empty arrays: 2.4 s of walking) is
scanned at C speed instead: everything but brackets and quotes is dropped (escapes first), the
strings' insides cut out, and the innermost pairs removed one level at a time, at most
``max_depth`` times (each a pass of `bytes.replace`).
"""

from __future__ import annotations

from typing import Any

import orjson

from tokometer.inbound.request_limits import DEFAULT_LIMITS

__all__ = ["BadBody", "json_depth", "parse_object"]


class BadBody(ValueError):
    """The body is not a JSON object within the limits; the message says what is wrong, for the client."""


def parse_object(raw: bytes, max_depth: int = DEFAULT_LIMITS.max_json_depth,
                 max_strings: int = DEFAULT_LIMITS.max_json_strings,
                 max_values: int = DEFAULT_LIMITS.max_json_values) -> dict[str, Any]:
    """``raw`` (UTF-8 JSON) as a dict, or BadBody: over ``max_strings`` strings or ``max_values`` values (not
    parsed then), not JSON, not an object, or nested deeper than ``max_depth``."""
    _count_before_parsing(raw, max_strings, max_values)
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise BadBody(f"invalid JSON body: {exc}") from None
    if not isinstance(body, dict):
        raise BadBody(f"the body must be a JSON object, not {_kind(body)}")
    containers = raw.count(b"[") + raw.count(b"{")  # at least as many as there are (strings may hold some)
    if containers <= max_depth:
        return body
    elements = containers + raw.count(b",")  # at least as many values as the walk would visit
    if json_depth(body) > max_depth if elements <= _WALK_AT_MOST else _deeper_than(raw, max_depth):
        raise BadBody(f"the body nests arrays and objects more than {max_depth} levels deep, more than this "
                      "server takes")
    return body


def _count_before_parsing(raw: bytes, max_strings: int, max_values: int) -> None:
    # strings: at most as many as there are, and at least half (one ending in an escaped backslash counts half)
    strings = (raw.count(b'"') - raw.count(b'\\"')) // 2
    if strings > max_strings:
        raise BadBody(f"the body holds {strings:,} strings, more than this server parses ({max_strings:,}): send "
                      "fewer fields, entries or parts")
    if raw.count(b",") < max_values:
        return  # at least as many commas as there are values, less one a container: not looked at again
    values = _outside_strings(raw).count(b",") + 1  # (a few pieces: the strings are few now)
    if values > max_values:
        raise BadBody(f"the body holds {values:,} values, more than this server parses ({max_values:,}): send "
                      "fewer entries or elements")


def _outside_strings(raw: bytes) -> bytes:
    """The bytes of the (valid) JSON ``raw`` outside its strings; escaped backslashes, then escaped quotes, go
    first."""
    return b"".join(raw.replace(b"\\\\", b"").replace(b'\\"', b"").split(b'"')[::2])


_WALK_AT_MOST = 50_000
"""Bodies of up to this many values are measured by walking them (a chat: ~2 ms for 2,000 messages); more
(a million small arrays: 2.4 s of walking) by scanning their bytes (~60 ms for those 3 MB)."""
_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'[]{}"')


def _deeper_than(raw: bytes, limit: int) -> bool:
    """Whether the (valid) JSON ``raw`` nests containers more than ``limit`` deep; linear passes in C."""
    brackets = _outside_strings(raw).translate(None, _NOT_STRUCTURE)
    for _ in range(limit):
        if not brackets:
            return False
        # one level: every innermost pair, but not the pair that removing them exposes (hence the marker)
        brackets = brackets.replace(b"[]", b"\0").replace(b"{}", b"").replace(b"\0", b"")
    return bool(brackets)


def json_depth(value: Any) -> int:
    """How deeply arrays and objects nest in ``value`` (a scalar: 0, ``[]``: 1, ``{"a": [1]}``: 2)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return deepest


def _kind(value: Any) -> str:
    return {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(type(value), "a number")
