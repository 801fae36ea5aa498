"""Tool calls in an upstream's own events and request fields: what a protocol with its own shape provides.

The gateway carries every answer as OpenAI chat, whose tool calls it reads itself
(`tokometer.protocols.common.toolcalls`). A protocol that streams and declares tool calls in its own shape
(Anthropic's ``tool_use`` blocks, the Responses API's ``function_call`` items) gives its `ToolEvents`: the
bytes an event that may carry a call holds (the rest are not parsed for one), the reader of one event's
payload into the protocol-neutral `tokometer.protocols.common.chat_tools.ToolCallDelta` (the call's index:
its block or output index), and the request fields that declare a chat request's function tools in its
shape. The small readers here are the ones both such protocols use.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from tokometer.protocols.common.chat_tools import ToolCallDelta

__all__ = ["ToolEvents", "event_object", "function_tools", "index_of", "name_or_none"]


@dataclass(frozen=True, slots=True)
class ToolEvents:
    """How one protocol streams and declares tool calls, where it is not OpenAI chat's way."""

    markers: tuple[bytes, ...]
    """Bytes one of which an event that may carry a tool call holds (the rest are not parsed for one)."""
    read: Callable[[bytes], ToolCallDelta | None]
    """One event's payload as a piece of a tool call (None: it carries none)."""
    fields: Callable[[list[dict[str, Any]], Any], dict[str, Any]]
    """(the chat request's function definitions, its ``tool_choice``) -> the request fields declaring them."""


def event_object(payload: bytes) -> dict[str, Any]:
    """An event's JSON object (empty when it is not one)."""
    try:
        data = orjson.loads(payload)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def name_or_none(value: Any) -> str | None:
    """A non-empty string, else None."""
    return value if isinstance(value, str) and value else None


def index_of(value: Any) -> int:
    """A whole-number index, else 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def function_tools(tools: Any) -> list[dict[str, Any]]:
    """The ``function`` objects (those with a name) of a chat request's ``tools``."""
    out = []
    for tool in tools if isinstance(tools, list) else ():
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            out.append(function)
    return out
