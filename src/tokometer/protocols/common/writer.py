"""What writes one answer to a client in its own protocol: the `StreamWriter` interface.

The gateway takes in an answer as protocol-neutral pieces (text and reasoning, tool-call deltas, an
ending with the token counts) and hands each to the writer of the protocol its client spoke, which
renders the events: OpenAI chat or completions chunks (`tokometer.protocols.openai.writer`), Anthropic
Messages events (`tokometer.protocols.anthropic_messages.writer`) or Responses API events
(`tokometer.protocols.openai_responses.writer`). A writer keeps the state its protocol needs (whether the
opening event went, which content block is open) so that a stream carried on by another upstream (a
resume) stays one answer. The same writer renders a non-streamed answer's body (`whole`) and an error
inside a stream (`error`).
"""

from __future__ import annotations

from typing import Any, Protocol

from tokometer.protocols.common.chat_tools import ToolCall, ToolCallDelta

__all__ = ["StreamWriter"]

class StreamWriter(Protocol):
    """Renders one answer in a client's protocol."""

    def content(self, text: str, reasoning: str) -> bytes:
        """Answer text and reasoning (the stream's opening events before the first)."""

    def tool_call(self, delta: ToolCallDelta) -> bytes:
        """A piece of a tool call."""

    def ending(self, finish_reason: str, prompt_tokens: int, completion_tokens: int,
               reasoning_tokens: int | None = None, cached_tokens: int | None = None) -> bytes:
        """The answer's end: its finish reason and usage (the reasoning and cached prompt tokens where the
        upstream said), and the stream's last event."""

    def error(self, message: str) -> bytes:
        """An error inside a stream that has started."""

    def abort(self, message: str) -> bytes:
        """The end of a stream that failed (``message``: why; an error event unless one was sent)."""

    def whole(self, text: str, reasoning: str, tool_calls: list[ToolCall], finish_reason: str,
              prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
        """The body of a non-streamed answer."""
