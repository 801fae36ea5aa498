"""OpenAI's streaming chunks, rendered as vLLM sends them: `ChunkWriter`.

One writer per answer renders its chat or (legacy) completions chunks, the usage-only event and
the body of a non-streamed answer: the simulator's streams (through `tokometer.protocols.openai.client`'s
server protocols), the gateway's translated streams and cached replays. A leaf: the server-side
request info of `tokometer.protocols.common.server` carries a writer, and the OpenAI protocol module uses
both, so the writer lives below them.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import orjson

from tokometer.protocols.common.simtools import query_arguments
from tokometer.protocols.common.toolcalls import tool_call_delta

__all__ = ["ChunkWriter", "carries_call", "carries_tool_calls"]

_TOOL_CALLS = b'"tool_calls"'
_FUNCTION_CALL = b'"function_call"'


def carries_tool_calls(data: bytes) -> bool:
    """Whether an OpenAI chat event (its raw bytes) may carry tool-call deltas: a byte search, no parse, so
    that the gateway's relay can test every event it passes on."""
    return _TOOL_CALLS in data


def carries_call(data: bytes) -> bool:
    """Whether an OpenAI chat event may carry a call: tool-call deltas or a legacy ``function_call``."""
    return _TOOL_CALLS in data or _FUNCTION_CALL in data


class ChunkWriter:
    """Renders the OpenAI streaming chunks of one answer (chat or legacy completions) as vLLM does."""

    __slots__ = ("chat", "created", "id", "model", "object", "reasoning_field")

    def __init__(self, chat: bool, model: str, id: str | None = None, created: int | None = None,
                 reasoning_field: str = "reasoning_content") -> None:
        self.chat = chat
        self.reasoning_field = reasoning_field
        """The delta field reasoning text goes in (one of `tokometer.protocols.openai.client.REASONING_FIELDS`)."""
        self.model = model
        self.id = id or f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex[:24]}"
        self.created = int(time.time()) if created is None else created
        self.object = "chat.completion.chunk" if chat else "text_completion"

    def chunk(self, choices: list[dict[str, Any]], usage: dict[str, Any] | None = None) -> bytes:
        payload: dict[str, Any] = {"id": self.id, "object": self.object, "created": self.created,
                                   "model": self.model, "choices": choices}
        if usage is not None:
            payload["usage"] = usage
        return b"data: " + orjson.dumps(payload) + b"\n\n"

    def role(self) -> bytes:
        """The role-only first event of a chat stream (nothing for completions)."""
        if not self.chat:
            return b""
        return self.chunk([{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                            "finish_reason": None}])

    def content(self, text: str, reasoning: str = "") -> bytes:
        if self.chat:
            delta: dict[str, Any] = {"content": text} if text or not reasoning else {}
            if reasoning:
                delta[self.reasoning_field] = reasoning
            return self.chunk([{"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}])
        return self.chunk([{"index": 0, "text": text, "logprobs": None, "finish_reason": None}])

    def tool_call(self, name: str, text: str, first: bool, last: bool) -> bytes:
        """A chat event carrying ``text`` as a fragment of the arguments of a call of tool ``name`` (as
        ``{"query": "<text>"}``): the first one with the call's id and name, the last one closing the JSON."""
        arguments = query_arguments(text, first, last)
        entry = tool_call_delta(0, arguments, call_id=f"call-{self.id[-12:]}" if first else None,
                                name=name if first else None)
        return self.chunk([{"index": 0, "delta": {"tool_calls": [entry]}, "logprobs": None, "finish_reason": None}])

    def finish(self, reason: str) -> bytes:
        if self.chat:
            return self.chunk([{"index": 0, "delta": {}, "logprobs": None, "finish_reason": reason}])
        return self.chunk([{"index": 0, "text": "", "logprobs": None, "finish_reason": reason}])

    def usage(self, prompt_tokens: int, completion_tokens: int, reasoning_tokens: int | None = None,
              cached_tokens: int | None = None, image_tokens: int | None = None) -> bytes:
        usage: dict[str, Any] = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                                 "total_tokens": prompt_tokens + completion_tokens}
        if reasoning_tokens is not None:
            usage["completion_tokens_details"] = {"reasoning_tokens": reasoning_tokens}
        details = {name: value for name, value in (("cached_tokens", cached_tokens), ("image_tokens", image_tokens))
                   if value is not None}
        if details:
            usage["prompt_tokens_details"] = details
        return self.chunk([], usage)

    def whole(self, text: str, reasoning: str, finish_reason: str, prompt_tokens: int,
              completion_tokens: int, tool_name: str | None = None) -> dict[str, Any]:
        """The body of a non-streamed answer (with ``tool_name``: a call of that tool, ``text`` its query)."""
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                 "total_tokens": prompt_tokens + completion_tokens}
        if self.chat:
            message: dict[str, Any] = {"role": "assistant", "content": text}
            if reasoning:
                message[self.reasoning_field] = reasoning
            if tool_name is not None:
                message["content"] = None
                message["tool_calls"] = [{"id": f"call-{self.id[-12:]}", "type": "function", "function": {
                    "name": tool_name, "arguments": query_arguments(text, True, True)}}]
            choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": finish_reason}
        else:
            choice = {"index": 0, "text": text, "finish_reason": finish_reason}
        return {"id": self.id, "object": "chat.completion" if self.chat else "text_completion",
                "created": self.created, "model": self.model, "choices": [choice], "usage": usage}
