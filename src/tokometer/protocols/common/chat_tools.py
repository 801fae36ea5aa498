"""Tool calls in OpenAI's chat format: the deltas a stream carries, and a whole answer's calls.

A chat stream sends a tool call as ``choices[0].delta.tool_calls``: a list of ``{"index", "id",
"type": "function", "function": {"name", "arguments"}}`` where the first delta of a call has its
``id`` and ``name`` and the later ones only more of the ``arguments`` (JSON text, in pieces).
`tool_call_deltas` reads them from one event; `ToolCalls` gathers them into whole calls (for a
non-streamed answer). The other protocols' shapes of the same thing (Anthropic's ``tool_use``
blocks with ``input_json_delta``, the Responses API's ``function_call`` items) are written by their
stream writers (`tokometer.protocols.anthropic_messages.writer`, `tokometer.protocols.openai_responses.writer`), and a
client's tool definitions are translated by their request modules.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from tokometer.inbound.jsonbody import BadBody, parse_object

__all__ = ["MAX_ARGUMENT_CHARS", "MAX_CALLS", "ToolCall", "ToolCallDelta", "ToolCalls", "arguments_object",
           "chat_tool_call", "tool_call_deltas"]


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """One piece of one tool call: the first of a call has its ``id`` and ``name``."""

    index: int
    id: str | None
    name: str | None
    arguments: str


@dataclass(slots=True)
class ToolCall:
    """A whole tool call: the function's name and its arguments (JSON text, as the model wrote it)."""

    id: str
    name: str
    arguments: str


def tool_call_deltas(payload: bytes) -> list[ToolCallDelta]:
    """The tool-call deltas of one chat chunk's JSON ``payload`` (empty: none, or not a chat chunk)."""
    try:
        data = orjson.loads(payload)
    except ValueError:
        return []
    choices = data.get("choices") if isinstance(data, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return []
    delta = choices[0].get("delta")
    calls = delta.get("tool_calls") if isinstance(delta, dict) else None
    if not isinstance(calls, list):
        return []
    out = []
    for position, call in enumerate(calls):
        if not isinstance(call, dict):
            continue
        function = call.get("function")
        if not isinstance(function, dict):
            function = {}
        index, ident, name, arguments = call.get("index", position), call.get("id"), function.get("name"), \
            function.get("arguments")
        out.append(ToolCallDelta(index if isinstance(index, int) else position,
                                 ident if isinstance(ident, str) and ident else None,
                                 name if isinstance(name, str) and name else None,
                                 arguments if isinstance(arguments, str) else ""))
    return out


MAX_CALLS = 128
"""Tool calls one answer may gather; an upstream's further indexes are dropped (``ToolCalls.cut``)."""
MAX_ARGUMENT_CHARS = 4 * 2**20
"""Argument text one answer's calls may gather in all; what an upstream sends past it is dropped."""


class ToolCalls:
    """Tool-call deltas gathered into whole calls, in the order they began: at most `MAX_CALLS` calls and
    `MAX_ARGUMENT_CHARS` of arguments in all (``cut`` says something was dropped), kept as pieces so that a
    call streamed in many small fragments costs linear time."""

    __slots__ = ("_by_index", "_chars", "cut")

    def __init__(self) -> None:
        self._by_index: dict[int, tuple[ToolCall, list[str]]] = {}
        self._chars = 0
        self.cut = False

    def add(self, delta: ToolCallDelta) -> None:
        entry = self._by_index.get(delta.index)
        if entry is None:
            if len(self._by_index) >= MAX_CALLS:
                self.cut = True
                return
            entry = self._by_index[delta.index] = (ToolCall(delta.id or f"call_{delta.index}", delta.name or "", ""),
                                                   [])
        elif delta.name and not entry[0].name:
            entry[0].name = delta.name
        if delta.arguments:
            room = MAX_ARGUMENT_CHARS - self._chars
            piece = delta.arguments[:max(room, 0)]
            if len(piece) < len(delta.arguments):
                self.cut = True
            if piece:
                entry[1].append(piece)
                self._chars += len(piece)

    @property
    def calls(self) -> list[ToolCall]:
        """The whole calls, their arguments joined."""
        for call, pieces in self._by_index.values():
            if pieces:
                call.arguments += "".join(pieces)
                pieces.clear()
        return [call for call, _ in self._by_index.values()]

    def __bool__(self) -> bool:
        return bool(self._by_index)


def chat_tool_call(call: ToolCall) -> dict[str, Any]:
    """A whole call as a chat message's ``tool_calls`` entry."""
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}


def arguments_object(arguments: str) -> dict[str, Any]:
    """A call's arguments as the JSON object they should be, where a protocol needs an object (Anthropic's
    ``tool_use`` ``input``): ``{}`` when they are not one, or nest deeper than the JSON depth limit the
    gateway takes of a client (`tokometer.inbound.jsonbody.parse_object`, 64 levels): orjson reads 1,024
    levels but writes only 254, and a deeper object would fail the answer's encoding."""
    if not arguments:
        return {}
    try:
        return parse_object(arguments.encode("utf-8", "surrogatepass"))
    except BadBody:
        return {}
