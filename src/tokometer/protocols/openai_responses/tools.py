"""Tool calls as the Responses API streams and declares them, read and written for the gateway.

Reading (an upstream that speaks it): the Responses API opens a call with ``response.output_item.added``
holding a ``function_call`` item (``call_id``, ``name``) and sends ``response.function_call_arguments.delta``s.
Writing (the request to such an upstream): a chat request's function tools become flat ``function`` tools.
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
    if kind == "response.output_item.added":
        item = data.get("item")
        if isinstance(item, dict) and item.get("type") == "function_call":
            return ToolCallDelta(index_of(data.get("output_index")), name_or_none(item.get("call_id")),
                                 name_or_none(item.get("name")), "")
    elif kind == "response.function_call_arguments.delta":
        part = data.get("delta")
        return ToolCallDelta(index_of(data.get("output_index")), None, None, part if isinstance(part, str) else "")
    return None


def tool_fields(functions: list[dict[str, Any]], tool_choice: Any) -> dict[str, Any]:
    """The request fields that declare ``functions`` (and ``tool_choice``) in the Responses API's shape."""
    out: dict[str, Any] = {"tools": [{"type": "function", "name": f["name"], "parameters": f.get("parameters") or {
        "type": "object", "properties": {}}, **({"description": f["description"]} if isinstance(
            f.get("description"), str) else {})} for f in functions]}
    choice = tool_choice if tool_choice in ("auto", "required", "none") else None
    if isinstance(tool_choice, dict) and isinstance(tool_choice.get("function"), dict):
        choice = {"type": "function", "name": tool_choice["function"].get("name")}
    if choice is not None:
        out["tool_choice"] = choice
    return out


TOOL_EVENTS = ToolEvents((b'"function_call"', b"function_call_arguments.delta"), read_tool_event, tool_fields)
