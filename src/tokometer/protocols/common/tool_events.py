"""Tool calls as the Messages and Responses APIs stream and declare them, read and written for the gateway.

Reading (an upstream that speaks either API): Anthropic opens a call with ``content_block_start``
holding a ``tool_use`` block (``id``, ``name``) and sends its arguments as ``input_json_delta``s
(``partial_json``); the Responses API opens one with ``response.output_item.added`` holding a
``function_call`` item (``call_id``, ``name``) and sends ``response.function_call_arguments.delta``s.
`tool_delta_reader` gives, per API, a reader of one event's payload into the protocol-neutral
`tokometer.protocols.common.chat_tools.ToolCallDelta` (the call's index: its block or output index).

Writing (the request to such an upstream): `tool_fields` turns a chat request's ``tools`` and
``tool_choice`` into the API's own (``input_schema`` tools and ``{"type": "any"}`` for Anthropic;
flat ``function`` tools for the Responses API).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from tokometer.protocols.common.chat_tools import ToolCallDelta

__all__ = ["MARKERS", "tool_delta_reader", "tool_fields"]

MARKERS: dict[str, tuple[bytes, ...]] = {
    "anthropic-messages": (b'"tool_use"', b'"input_json_delta"'),
    "openai-responses": (b'"function_call"', b"function_call_arguments.delta"),
}
"""Bytes one of which an event that may carry a tool call holds (the rest are not parsed for one)."""


def _load(payload: bytes) -> dict[str, Any]:
    try:
        data = orjson.loads(payload)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _index(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _anthropic(payload: bytes) -> ToolCallDelta | None:
    data = _load(payload)
    kind = data.get("type")
    if kind == "content_block_start":
        block = data.get("content_block")
        if isinstance(block, dict) and block.get("type") == "tool_use":
            return ToolCallDelta(_index(data.get("index")), _str(block.get("id")), _str(block.get("name")), "")
    elif kind == "content_block_delta":
        delta = data.get("delta")
        if isinstance(delta, dict) and delta.get("type") == "input_json_delta":
            part = delta.get("partial_json")
            return ToolCallDelta(_index(data.get("index")), None, None, part if isinstance(part, str) else "")
    return None


def _responses(payload: bytes) -> ToolCallDelta | None:
    data = _load(payload)
    kind = data.get("type")
    if kind == "response.output_item.added":
        item = data.get("item")
        if isinstance(item, dict) and item.get("type") == "function_call":
            return ToolCallDelta(_index(data.get("output_index")), _str(item.get("call_id")), _str(item.get("name")),
                                 "")
    elif kind == "response.function_call_arguments.delta":
        part = data.get("delta")
        return ToolCallDelta(_index(data.get("output_index")), None, None, part if isinstance(part, str) else "")
    return None


_READERS: dict[str, Callable[[bytes], ToolCallDelta | None]] = {"anthropic-messages": _anthropic,
                                                                "openai-responses": _responses}


def tool_delta_reader(api: str) -> Callable[[bytes], ToolCallDelta | None] | None:
    """The reader of tool-call events for an upstream speaking ``api`` (None: none is read here)."""
    return _READERS.get(api)


def _functions(tools: Any) -> list[dict[str, Any]]:
    out = []
    for tool in tools if isinstance(tools, list) else ():
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            out.append(function)
    return out


def tool_fields(api: str, tools: Any, tool_choice: Any) -> dict[str, Any]:
    """The request fields that declare a chat request's function ``tools`` (and ``tool_choice``) in ``api``'s
    shape (empty: none, or an API without tools here)."""
    functions = _functions(tools)
    if not functions or api not in _READERS:
        return {}
    if api == "anthropic-messages":
        out: dict[str, Any] = {"tools": [{"name": f["name"], "input_schema": f.get("parameters") or {
            "type": "object", "properties": {}}, **({"description": f["description"]} if isinstance(
                f.get("description"), str) else {})} for f in functions]}
        choice = {"auto": {"type": "auto"}, "required": {"type": "any"}, "none": {"type": "none"}}.get(
            tool_choice if isinstance(tool_choice, str) else "")
        if isinstance(tool_choice, dict) and isinstance(tool_choice.get("function"), dict):
            choice = {"type": "tool", "name": tool_choice["function"].get("name")}
    else:
        out = {"tools": [{"type": "function", "name": f["name"], "parameters": f.get("parameters") or {
            "type": "object", "properties": {}}, **({"description": f["description"]} if isinstance(
                f.get("description"), str) else {})} for f in functions]}
        choice = tool_choice if tool_choice in ("auto", "required", "none") else None
        if isinstance(tool_choice, dict) and isinstance(tool_choice.get("function"), dict):
            choice = {"type": "function", "name": tool_choice["function"].get("name")}
    if choice is not None:
        out["tool_choice"] = choice
    return out
