"""What an answer amounted to, and how the gateway writes a whole one in the client's protocol.

Used when the bytes cannot simply be relayed: an answer from the cache (replayed as a stream), a
client that asked for ``stream: false`` (one JSON answer). The events and bodies themselves are the
client protocol's `tokometer.protocols.common.writer.StreamWriter`'s (OpenAI chunks, Anthropic Messages
events, Responses API events).
"""

from __future__ import annotations

from typing import Any

from tokometer.protocols.common.chat_tools import ToolCalls
from tokometer.protocols.common.pieces import MAX_KEPT_CHARS, TextPieces
from tokometer.protocols.common.writer import StreamWriter

__all__ = ["MAX_KEPT_CHARS", "Answer", "replay", "whole"]


class Answer:
    """What an answer amounted to: collected while relaying, or read from the cache.

    Text arrives an event at a time; it is kept as `tokometer.protocols.common.pieces.TextPieces`, up to
    `MAX_KEPT_CHARS`
    (text and reasoning together). Past it the answer still streams whole, but is `cut`: it is not cached, not
    carried on, and a non-streamed one is refused."""

    __slots__ = ("_reasoning", "_text", "completion_tokens", "content_events", "cut", "finish_reason",
                 "has_tool_calls", "keep", "kept", "model", "prompt_tokens", "segment_completion_tokens",
                 "tool_calls")

    def __init__(self, text: str = "", reasoning: str = "", finish_reason: str | None = None,
                 prompt_tokens: int | None = None, completion_tokens: int | None = None, model: str = "") -> None:
        self._text = TextPieces(text)
        self._reasoning = TextPieces(reasoning)
        self.kept = len(text) + len(reasoning)
        self.cut = False
        """Past MAX_KEPT_CHARS: the text kept is not the whole answer."""
        self.keep = True
        """Keep the text at all (False: a streamed answer that is neither cached nor carried on needs none)."""
        self.finish_reason = finish_reason
        self.prompt_tokens = prompt_tokens
        self.completion_tokens = completion_tokens
        self.content_events = 0
        self.model = model
        self.segment_completion_tokens: int | None = None
        self.has_tool_calls = False
        """The answer holds tool calls (it is not cached: the cache keeps text)."""
        self.tool_calls = ToolCalls()
        """The tool calls, gathered where the gateway writes the client's events itself."""
        """The completion tokens the current segment's upstream reported (continuation adds them up)."""

    def add(self, text: str, reasoning: str) -> None:
        """One content event's text and reasoning, kept while the answer is under MAX_KEPT_CHARS."""
        self.content_events += 1
        if self.cut or not self.keep:
            return
        self.kept += len(text) + len(reasoning)
        if self.kept > MAX_KEPT_CHARS:
            self.cut = True
            return
        if text:
            self._text.append(text)
        if reasoning:
            self._reasoning.append(reasoning)

    @property
    def text(self) -> str:
        return self._text.text()

    @property
    def reasoning(self) -> str:
        return self._reasoning.text()


def replay(writer: StreamWriter, answer: Answer) -> list[bytes]:
    """A whole answer as a stream: its content, then its ending (finish, usage, the last event)."""
    out = [writer.content(answer.text, answer.reasoning),
           writer.ending(answer.finish_reason or "stop", answer.prompt_tokens or 0, answer.completion_tokens or 0)]
    return [part for part in out if part]


def whole(writer: StreamWriter, answer: Answer) -> dict[str, Any]:
    """The non-streaming response body."""
    return writer.whole(answer.text, answer.reasoning, answer.tool_calls.calls, answer.finish_reason or "stop",
                        answer.prompt_tokens or 0, answer.completion_tokens or 0)
