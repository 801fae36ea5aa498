"""One answer written as Anthropic's Messages API streams it (the gateway's side of an Anthropic client).

The events, in the order `tokometer.wire.anthropic` reads them: ``message_start`` (the message with
empty ``content`` and ``usage.input_tokens``), then per content block ``content_block_start``,
``content_block_delta``s and ``content_block_stop``: reasoning in a ``thinking`` block
(``thinking_delta``), the answer in a ``text`` block (``text_delta``), each tool call in a
``tool_use`` block (``id``, ``name``, ``input: {}``, then ``input_json_delta`` with
``partial_json``); a new kind of content closes the open block and opens the next, with the next
``index``. Then ``message_delta`` (``stop_reason``: ``end_turn``, ``max_tokens`` or ``tool_use``;
``usage`` with ``input_tokens`` and the ``output_tokens``) and ``message_stop``. An error inside the
stream is an ``error`` event (``{"type": "error", "error": {"type": "api_error", "message": ...}}``)
and ends it.
"""

from __future__ import annotations

import uuid
from typing import Any

from tokometer.wire.anthropic import anthropic_error_body, anthropic_event
from tokometer.wire.chat_tools import ToolCall, ToolCallDelta, arguments_object

__all__ = ["AnthropicStreamWriter", "stop_reason"]


def stop_reason(finish_reason: str, tools: bool) -> str:
    """Anthropic's ``stop_reason`` for a finish reason (`tokometer.wire.base.map_finish_reason`'s)."""
    if finish_reason == "length":
        return "max_tokens"
    return "tool_use" if tools else "end_turn"


class AnthropicStreamWriter:
    """Renders one answer's Messages API events (a `tokometer.wire.stream_writer.StreamWriter`)."""

    __slots__ = ("_block", "_index", "_tool_blocks", "errored", "id", "model", "prompt_tokens", "started", "tools")

    def __init__(self, model: str, prompt_tokens: int | None = None, ident: str | None = None) -> None:
        self.model = model
        self.id = ident or f"msg_{uuid.uuid4().hex[:24]}"
        self.prompt_tokens = prompt_tokens
        """``message_start``'s ``usage.input_tokens`` (the gateway's count; the upstream's comes at the end)."""
        self.started = False
        self.errored = False
        self.tools = False
        self._block: str | None = None  # the open block's type
        self._index = -1  # the open (or last) block's index
        self._tool_blocks: dict[int, int] = {}  # a chat tool call's index -> its block's

    def _start(self) -> bytes:
        if self.started:
            return b""
        self.started = True
        message: dict[str, Any] = {
            "id": self.id, "type": "message", "role": "assistant", "model": self.model, "content": [],
            "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": self.prompt_tokens or 0, "output_tokens": 0}}
        return anthropic_event({"type": "message_start", "message": message})

    def _close(self) -> bytes:
        if self._block is None:
            return b""
        out = b""
        if self._block == "thinking":  # a thinking block ends with its signature; the gateway has none to give
            out = anthropic_event({"type": "content_block_delta", "index": self._index,
                                   "delta": {"type": "signature_delta", "signature": ""}})
        self._block = None
        return out + anthropic_event({"type": "content_block_stop", "index": self._index})

    def _open(self, kind: str, block: dict[str, Any]) -> bytes:
        out = self._close()
        self._index += 1
        self._block = kind
        return out + anthropic_event({"type": "content_block_start", "index": self._index, "content_block": block})

    def _delta(self, delta: dict[str, Any]) -> bytes:
        return anthropic_event({"type": "content_block_delta", "index": self._index, "delta": delta})

    def content(self, text: str, reasoning: str) -> bytes:
        out = [self._start()]
        if reasoning:
            if self._block != "thinking":
                out.append(self._open("thinking", {"type": "thinking", "thinking": "", "signature": ""}))
            out.append(self._delta({"type": "thinking_delta", "thinking": reasoning}))
        if text:
            if self._block != "text":
                out.append(self._open("text", {"type": "text", "text": ""}))
            out.append(self._delta({"type": "text_delta", "text": text}))
        return b"".join(out)

    def tool_call(self, delta: ToolCallDelta) -> bytes:
        self.tools = True
        out = [self._start()]
        block = self._tool_blocks.get(delta.index)
        if block is None or block != self._index or self._block != "tool_use":
            ident = delta.id or f"toolu_{uuid.uuid4().hex[:24]}"
            out.append(self._open("tool_use", {"type": "tool_use", "id": ident, "name": delta.name or "",
                                               "input": {}}))
            self._tool_blocks[delta.index] = self._index
        if delta.arguments:
            out.append(self._delta({"type": "input_json_delta", "partial_json": delta.arguments}))
        return b"".join(out)

    def ending(self, finish_reason: str, prompt_tokens: int, completion_tokens: int,
               reasoning_tokens: int | None = None, cached_tokens: int | None = None) -> bytes:
        out = self._start() + self._close()
        delta = {"stop_reason": stop_reason(finish_reason, self.tools), "stop_sequence": None}
        usage = {"input_tokens": prompt_tokens - (cached_tokens or 0), "output_tokens": completion_tokens}
        if cached_tokens is not None:  # Anthropic counts the prompt as its fresh and cache-read parts
            usage["cache_read_input_tokens"] = cached_tokens
        out += anthropic_event({"type": "message_delta", "delta": delta, "usage": usage})
        return out + anthropic_event({"type": "message_stop"})

    def error(self, message: str) -> bytes:
        self.errored = True
        return anthropic_event(anthropic_error_body("api_error", message))

    def abort(self, message: str) -> bytes:
        return b"" if self.errored else self.error(message)

    def whole(self, text: str, reasoning: str, tool_calls: list[ToolCall], finish_reason: str,
              prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        if reasoning:
            content.append({"type": "thinking", "thinking": reasoning, "signature": ""})
        if text or not tool_calls:
            content.append({"type": "text", "text": text})
        content += [{"type": "tool_use", "id": call.id, "name": call.name, "input": arguments_object(call.arguments)}
                    for call in tool_calls]
        return {"id": self.id, "type": "message", "role": "assistant", "model": self.model, "content": content,
                "stop_reason": stop_reason(finish_reason, bool(tool_calls)), "stop_sequence": None,
                "usage": {"input_tokens": prompt_tokens, "output_tokens": completion_tokens}}
