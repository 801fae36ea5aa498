"""The simulator's tool calls, one rule for every protocol it serves.

A request that offers tools is answered with a call of one of them (unless its tool choice is "none"): the
tool the choice names, else the first. The call's arguments are ``{"query": "<the answer's text>"}``, streamed
as fragments of that JSON (the first opens it, the last closes it; an answer cut by its length leaves it
open, as a real model's would be). Each protocol reads its own shapes of ``tools`` and ``tool_choice`` into
`pick_tool`'s words and writes the call with its own writer (`tokometer.protocols.common.writer`);
`ToolCallingServer` is the content events of a protocol whose writer takes the call's pieces as they are.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from typing import Literal

from tokometer.protocols.common.chat_tools import ToolCall, ToolCallDelta
from tokometer.protocols.common.server import ProtocolServer, RequestInfo, StreamTiming, no_field
from tokometer.protocols.common.toolcalls import json_fragment
from tokometer.protocols.common.writer import StreamWriter
from tokometer.util.shown import quoted

__all__ = ["Choice", "ToolCallingServer", "call_delta", "pick_tool", "query_arguments", "whole_call"]

Choice = Literal["none", "auto", "required"]


def pick_tool(names: Sequence[str], choice: Choice, named: str | None = None) -> str | None:
    """The tool the simulator calls: ``named`` (which must be offered), else the first; None: no tools, or
    ``choice`` is "none". ValueError for a named tool that is not offered."""
    if named is not None:
        if named not in names:
            raise ValueError(f"'tool_choice' names {quoted(named)}, which is not in 'tools'")
        return named
    if not names or choice == "none":
        return None
    return names[0]


def query_arguments(text: str, first: bool, last: bool) -> str:
    """A fragment of the call's arguments JSON ``{"query": "<text>"}`` carrying ``text``."""
    return ('{"query": "' if first else "") + json_fragment(text) + ('"}' if last else "")


def call_id(info: RequestInfo) -> str:
    """The call's id: one per answer, from the request's id."""
    return f"call_{info.id.replace('-', '')[-12:]}"


def call_delta(info: RequestInfo, text: str, last: bool) -> ToolCallDelta | None:
    """The next piece of the answer's call carrying ``text`` (the first with its id and name); None: the answer
    is not a call, or there is nothing to send yet."""
    if info.tool_name is None or not (text or info.tool_started):
        return None
    first, info.tool_started = not info.tool_started, True
    return ToolCallDelta(0, call_id(info) if first else None, info.tool_name if first else None,
                         query_arguments(text, first, last))


def whole_call(info: RequestInfo, text: str, finish: str) -> list[ToolCall]:
    """The answer's call, whole (empty: the answer is not a call)."""
    if info.tool_name is None:
        return []
    return [ToolCall(call_id(info), info.tool_name, query_arguments(text, True, finish != "length"))]


class ToolCallingServer(ProtocolServer):
    """A protocol server whose writer (`StreamWriter`) takes answer text and the pieces of a tool call: each
    content event is the one or the other (`call_delta`), and the last closes the call unless the answer was cut
    by its length (Anthropic Messages, the Responses API)."""

    @abstractmethod
    def _writer(self, info: RequestInfo) -> StreamWriter:
        """The request's writer (made at its first event, kept in ``info.writer``)."""

    def tokens(self, info: RequestInfo, ids: list[int], text: str, done_before: int, reasoning: str = "") -> bytes:
        return self._tokens(info, text, reasoning, last=False)

    def _tokens(self, info: RequestInfo, text: str, reasoning: str, last: bool) -> bytes:
        no_field(self, reasoning)
        delta = None if reasoning else call_delta(info, text, last)
        return self._writer(info).content(text, reasoning) if delta is None else self._writer(info).tool_call(delta)

    def last_tokens(self, info: RequestInfo, ids: list[int], text: str, done_before: int, finish: str,
                    timing: StreamTiming, reasoning: str = "") -> bytes:
        return (self._tokens(info, text, reasoning, last=finish != "length")
                + self.finish(info, finish, done_before + len(ids), timing))
