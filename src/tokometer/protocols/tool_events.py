"""Tool calls in an upstream's own shape, by protocol name: what the gateway's upstream calls ask.

The gateway names an upstream's protocol; its registry entry's ``tool_events``
(`tokometer.protocols.common.tool_events.ToolEvents`) says how that protocol streams and declares tool calls
where it is not OpenAI chat's way (Anthropic's Messages API, OpenAI's Responses API). `MARKERS`,
`tool_delta_reader` and `tool_fields` read it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tokometer.protocols.common.chat_tools import ToolCallDelta
from tokometer.protocols.common.tool_events import function_tools
from tokometer.protocols.registry import PROTOCOLS

__all__ = ["MARKERS", "tool_delta_reader", "tool_fields"]

MARKERS: dict[str, tuple[bytes, ...]] = {
    name: protocol.tool_events.markers for name, protocol in PROTOCOLS.items() if protocol.tool_events is not None
}
"""Per protocol, bytes one of which an event that may carry a tool call holds (the rest are not parsed for one)."""


def tool_delta_reader(api: str) -> Callable[[bytes], ToolCallDelta | None] | None:
    """The reader of tool-call events for an upstream speaking ``api`` (None: none is read here)."""
    protocol = PROTOCOLS.get(api)
    return None if protocol is None or protocol.tool_events is None else protocol.tool_events.read


def tool_fields(api: str, tools: Any, tool_choice: Any) -> dict[str, Any]:
    """The request fields that declare a chat request's function ``tools`` (and ``tool_choice``) in ``api``'s
    shape (empty: none, or an API without tools here)."""
    protocol = PROTOCOLS.get(api)
    functions = function_tools(tools)
    if not functions or protocol is None or protocol.tool_events is None:
        return {}
    return protocol.tool_events.fields(functions, tool_choice)
