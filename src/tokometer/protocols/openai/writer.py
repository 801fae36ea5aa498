"""OpenAI chat or completions chunks as a `tokometer.protocols.common.writer.StreamWriter`
(the gateway's OpenAI clients)."""

from __future__ import annotations

from typing import Any

from tokometer.protocols.common.chat_tools import ToolCall, ToolCallDelta, chat_tool_call
from tokometer.protocols.openai.chunks import ChunkWriter
from tokometer.protocols.openai.client import DONE
from tokometer.protocols.openai.errors import error_event

__all__ = ["OpenAIStreamWriter", "gateway_writer"]

class OpenAIStreamWriter:
    """OpenAI chat (or legacy completions) chunks as a `StreamWriter`: the role event before the first content,
    usage only when the client asked for it, ``[DONE]`` last."""

    __slots__ = ("chunks", "include_usage", "opened", "tools")

    def __init__(self, chunks: ChunkWriter, include_usage: bool, opened: bool = False) -> None:
        self.chunks = chunks
        self.include_usage = include_usage
        self.opened = opened
        """The role event went (or the client has seen the stream's start another way)."""
        self.tools = False

    def _open(self) -> bytes:
        if self.opened:
            return b""
        self.opened = True
        return self.chunks.role()

    def content(self, text: str, reasoning: str) -> bytes:
        return self._open() + self.chunks.content(text, reasoning)

    def tool_call(self, delta: ToolCallDelta) -> bytes:
        self.tools = True
        call: dict[str, Any] = {"index": delta.index, "function": {"arguments": delta.arguments}}
        if delta.id is not None:
            call["id"], call["type"] = delta.id, "function"
        if delta.name is not None:
            call["function"]["name"] = delta.name
        return self._open() + self.chunks.chunk([{"index": 0, "delta": {"tool_calls": [call]}, "logprobs": None,
                                                  "finish_reason": None}])

    def _reason(self, finish_reason: str) -> str:
        return "tool_calls" if self.tools and finish_reason == "stop" else finish_reason

    def ending(self, finish_reason: str, prompt_tokens: int, completion_tokens: int,
               reasoning_tokens: int | None = None, cached_tokens: int | None = None) -> bytes:
        out = self.chunks.finish(self._reason(finish_reason))
        if self.include_usage:
            out += self.chunks.usage(prompt_tokens, completion_tokens, reasoning_tokens, cached_tokens)
        return out + DONE

    def error(self, message: str) -> bytes:
        return error_event(message)

    def abort(self, message: str) -> bytes:
        return DONE

    def whole(self, text: str, reasoning: str, tool_calls: list[ToolCall], finish_reason: str,
              prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
        if tool_calls:
            self.tools = True
        body = self.chunks.whole(text, reasoning, self._reason(finish_reason), prompt_tokens, completion_tokens)
        if tool_calls and self.chunks.chat:
            message = body["choices"][0]["message"]
            message["tool_calls"] = [chat_tool_call(call) for call in tool_calls]
            if not text:
                message["content"] = None  # OpenAI's shape of a message that only calls tools (as vLLM's)
        return body


def gateway_writer(*, chat: bool, model: str, include_usage: bool, prompt_tokens: int | None,
                   max_tokens: int | None, ident: str | None, created: int | None,
                   opened: bool) -> OpenAIStreamWriter:
    """The writer of one answer to the gateway's OpenAI client
    (`tokometer.protocols.common.protocol.WriterFactory`)."""
    return OpenAIStreamWriter(ChunkWriter(chat, model, ident, created), include_usage, opened)
