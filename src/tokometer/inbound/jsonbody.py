"""A request body as a JSON object of bounded depth and strings: `parse_object`, or `BadBody` (answered 400).

Before it is parsed, its strings are counted (its quotes, less the escaped ones, halved: one pass in C):
parsing is what costs with very many small strings (a 300,000-entry ``logit_bias`` is 300,000 keys, a
quarter of a second of orjson holding the event loop), and a body of more than ``max_strings`` (32,768 by
default) is refused unparsed. Long strings cost nothing to count and little to parse (a copy).

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
                 max_strings: int = DEFAULT_LIMITS.max_json_strings) -> dict[str, Any]:
    """``raw`` (UTF-8 JSON) as a dict, or BadBody: over ``max_strings`` strings (not parsed then), not JSON, not
    an object, or nested deeper than ``max_depth``."""
    # at most as many as there are, and at least half: a string that ends in an escaped backslash counts half
    strings = (raw.count(b'"') - raw.count(b'\\"')) // 2
    if strings > max_strings:
        raise BadBody(f"the body holds {strings:,} strings, more than this server parses ({max_strings:,}): send "
                      "fewer fields, entries or parts")
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


_WALK_AT_MOST = 50_000
"""Bodies of up to this many values are measured by walking them (a chat: ~2 ms for 2,000 messages); more
(a million small arrays: 2.4 s of walking) by scanning their bytes (~60 ms for those 3 MB)."""
_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'[]{}"')


def _deeper_than(raw: bytes, limit: int) -> bool:
    """Whether the (valid) JSON ``raw`` nests containers more than ``limit`` deep; linear passes in C."""
    # escaped backslashes, then escaped quotes, go first; then only brackets and quotes are kept, and every
    # other piece between quotes is a string's inside
    kept = raw.replace(b"\\\\", b"").replace(b'\\"', b"").translate(None, _NOT_STRUCTURE)
    brackets = b"".join(kept.split(b'"')[::2])
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
