"""OpenAI chat tool calls in a stream: reading ``delta.tool_calls`` (bounded, its numbers checked) and writing them.

A chat answer that calls a tool streams ``delta.tool_calls``: a list of ``{"index", "id", "type",
"function": {"name", "arguments"}}`` objects, the first delta of each call with its ``id`` and name, the
following ones each with a fragment of the arguments (a JSON text, streamed piece by piece), and
``finish_reason: "tool_calls"`` at the end (OpenAI's API reference; vLLM, SGLang and llama.cpp send the same).

Tool-call deltas are output: the model generated them token by token, so they count for TTFT, TPOT and
ITL like answer text (docs/reference/metrics.md). What an event carried is kept as text (`ToolDelta.text`:
the names and argument fragments, for counting tokens), the indexes of the calls it touched, and each
believed entry (`ToolPiece`: index, id, name, arguments fragment) for a reader that re-renders the calls.

The reader trusts nothing: at most `MAX_CALLS_PER_EVENT` entries of one event are read; an ``index`` must
be a whole number from 0 to `MAX_TOOL_INDEX` (one that is absent is read as 0, as a server that sends a
single call may omit it; one that is not such a number is noted and its fragment kept as output without a
call); a name or an argument fragment that is not a string reads as absent (noted). The size of what a
server sends is bounded where every event's is: the client's limit on one event (``--max-event-bytes``)
and on events per stream.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

import orjson

from tokometer.util.shown import value_shown

__all__ = ["MAX_CALLS_PER_EVENT", "MAX_TOOL_INDEX", "ToolDelta", "ToolPiece", "json_fragment", "read_tool_calls",
           "tool_call_delta"]

MAX_TOOL_INDEX: Final = 1023
"""The largest tool-call index believed: no answer calls a thousand tools in parallel."""

MAX_CALLS_PER_EVENT: Final = 64
"""Entries of one event's ``tool_calls`` that are read; the rest are noted and left."""


@dataclass(frozen=True, slots=True)
class ToolPiece:
    """One believed entry of ``delta.tool_calls``: which call (``index``), its ``id`` and function ``name`` where
    this delta gave them (the call's first), and the fragment of its arguments (``""``: none)."""

    index: int
    id: str | None
    name: str | None
    arguments: str


@dataclass(slots=True)
class ToolDelta:
    """What one event's ``delta.tool_calls`` carried."""

    text: str = ""
    """The function names and argument fragments, joined (output text, for counting its tokens)."""
    indexes: list[int] = field(default_factory=list)
    """The calls this event added to (their ``index``)."""
    pieces: list[ToolPiece] = field(default_factory=list)
    """The entries whose index was believed, in order (what a translator re-renders)."""
    rejected: str = ""
    """What was not believed, in words (``""``: nothing)."""


def _note(delta: ToolDelta, what: str) -> None:
    delta.rejected = f"{delta.rejected}; {what}" if delta.rejected else what


def read_tool_calls(value: Any) -> ToolDelta | None:
    """The tool-call part of one chat delta (``delta["tool_calls"]``); None when it has none (absent, null
    or an empty list)."""
    if not value:
        return None
    delta = ToolDelta()
    if not isinstance(value, list):
        _note(delta, f"delta.tool_calls={value_shown(value)} (not a list)")
        return delta
    if len(value) > MAX_CALLS_PER_EVENT:
        _note(delta, f"delta.tool_calls has {len(value):,} entries (only the first {MAX_CALLS_PER_EVENT} read)")
    parts: list[str] = []
    for entry in value[:MAX_CALLS_PER_EVENT]:
        if not isinstance(entry, dict):
            _note(delta, f"delta.tool_calls entry {value_shown(entry)} (not an object)")
            continue
        function = entry.get("function")
        function = function if isinstance(function, dict) else {}
        read: dict[str, str] = {}
        for name in ("name", "arguments"):
            piece = function.get(name)
            if piece is None:
                continue
            if not isinstance(piece, str):
                _note(delta, f"tool_calls[].function.{name}={value_shown(piece)} (not a string)")
                continue
            read[name] = piece
            if piece:
                parts.append(piece)
        call_id = entry.get("id")
        call_id = call_id if isinstance(call_id, str) else None
        index = entry.get("index", 0)
        if isinstance(index, int) and not isinstance(index, bool) and 0 <= index <= MAX_TOOL_INDEX:
            if any(read.values()) or call_id is not None:
                delta.indexes.append(index)
                delta.pieces.append(ToolPiece(index, call_id, read.get("name"), read.get("arguments", "")))
        else:
            _note(delta, f"tool_calls[].index={value_shown(index)} (not a whole number from 0 to {MAX_TOOL_INDEX})")
    delta.text = "".join(parts)
    return delta


def tool_call_delta(index: int, arguments: str, *, call_id: str | None = None, name: str | None = None) -> \
        dict[str, Any]:
    """One ``delta.tool_calls`` entry: the first of a call (``call_id`` and ``name`` given) or a fragment."""
    function: dict[str, Any] = {"arguments": arguments}
    entry: dict[str, Any] = {"index": index}
    if call_id is not None:
        entry["id"] = call_id
        entry["type"] = "function"
    if name is not None:
        function = {"name": name, "arguments": arguments}
    entry["function"] = function
    return entry


def json_fragment(text: str) -> str:
    """``text`` escaped to sit inside a JSON string (no quotes around it)."""
    return orjson.dumps(text).decode()[1:-1]
