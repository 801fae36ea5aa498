"""A request body as a JSON object of bounded depth: `parse_object`, or `BadBody` (answered 400).

orjson parses up to 1,024 levels, but writes at most 254 (and much of Python recurses on nesting): a
body nested deeper than ``max_depth`` (64 by default, `tokometer.inbound.limits`) is refused here,
before any code that would copy, hash or forward it sees it. The depth is found without recursion;
the bracket count of the raw bytes bounds it from above, so the usual body (a few dozen brackets)
is not walked at all.
"""

from __future__ import annotations

from typing import Any

import orjson

from tokometer.inbound.limits import DEFAULT_LIMITS

__all__ = ["BadBody", "json_depth", "parse_object"]


class BadBody(ValueError):
    """The body is not a JSON object within the limits; the message says what is wrong, for the client."""


def parse_object(raw: bytes, max_depth: int = DEFAULT_LIMITS.max_json_depth) -> dict[str, Any]:
    """``raw`` (UTF-8 JSON) as a dict, or BadBody: not JSON, not an object, or nested deeper than ``max_depth``."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise BadBody(f"invalid JSON body: {exc}") from None
    if not isinstance(body, dict):
        raise BadBody(f"the body must be a JSON object, not {_kind(body)}")
    if raw.count(b"[") + raw.count(b"{") > max_depth and (depth := json_depth(body)) > max_depth:
        raise BadBody(f"the body is nested {depth} levels deep, more than this server takes ({max_depth})")
    return body


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
