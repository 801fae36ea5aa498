"""Tool calls as the Messages API streams and declares them, read and written for the gateway.

Reading (an upstream that speaks it): Anthropic opens a call with ``content_block_start`` holding a
``tool_use`` block (``id``, ``name``) and sends its arguments as ``input_json_delta``s (``partial_json``).
Writing (the request to such an upstream): a chat request's function tools become ``input_schema`` tools and
its ``tool_choice`` Anthropic's (``required``: ``{"type": "any"}``).
"""

from __future__ import annotations

from typing import Any

from tokometer.protocols.common.chat_tools import ToolCallDelta
from tokometer.protocols.common.tool_events import ToolEvents, event_object, index_of, name_or_none

__all__ = ["TOOL_EVENTS", "read_tool_event", "tool_fields"]


def read_tool_event(payload: bytes) -> ToolCallDelta | None:
    """One event's piece of a tool call (None: it carries none)."""
    data = event_object(payload)
    kind = data.get("type")
    if kind == "content_block_start":
        block = data.get("content_block")
        if isinstance(block, dict) and block.get("type") == "tool_use":
            return ToolCallDelta(index_of(data.get("index")), name_or_none(block.get("id")),
                                 name_or_none(block.get("name")), "")
    elif kind == "content_block_delta":
        delta = data.get("delta")
        if isinstance(delta, dict) and delta.get("type") == "input_json_delta":
            part = delta.get("partial_json")
            return ToolCallDelta(index_of(data.get("index")), None, None, part if isinstance(part, str) else "")
    return None


def tool_fields(functions: list[dict[str, Any]], tool_choice: Any) -> dict[str, Any]:
    """The request fields that declare ``functions`` (and ``tool_choice``) in the Messages API's shape."""
    out: dict[str, Any] = {"tools": [{"name": f["name"], "input_schema": f.get("parameters") or {
        "type": "object", "properties": {}}, **({"description": f["description"]} if isinstance(
            f.get("description"), str) else {})} for f in functions]}
    choice = {"auto": {"type": "auto"}, "required": {"type": "any"}, "none": {"type": "none"}}.get(
        tool_choice if isinstance(tool_choice, str) else "")
    if isinstance(tool_choice, dict) and isinstance(tool_choice.get("function"), dict):
        choice = {"type": "tool", "name": tool_choice["function"].get("name")}
    if choice is not None:
        out["tool_choice"] = choice
    return out


TOOL_EVENTS = ToolEvents((b'"tool_use"', b'"input_json_delta"'), read_tool_event, tool_fields)
