"""OpenAI-format output the gateway writes itself: translated streams, cached replays, whole answers.

Used when the bytes cannot simply be relayed: an Ollama, TGI or llama.cpp
upstream (its events become OpenAI chunks), an answer from the cache (replayed
as a stream), a client that asked for ``stream: false`` (one JSON answer), and
the gateway's own errors (OpenAI's error shape).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import orjson

__all__ = ["DONE", "Answer", "ChunkWriter", "error_body"]

DONE = b"data: [DONE]\n\n"


def error_body(message: str, kind: str = "server_error", code: str | int | None = None,
               param: str | None = None) -> dict[str, Any]:
    """``{"error": {...}}`` as OpenAI sends it."""
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


@dataclass(slots=True)
class Answer:
    """What an answer amounted to: collected while relaying, or read from the cache."""

    text: str = ""
    reasoning: str = ""
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    content_events: int = 0
    model: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


class ChunkWriter:
    """Renders OpenAI streaming chunks for one answer (chat or legacy completions)."""

    def __init__(self, endpoint: str, model: str) -> None:
        self.chat = endpoint == "chat"
        self.model = model
        self.id = f"{'chatcmpl' if self.chat else 'cmpl'}-{uuid.uuid4().hex[:24]}"
        self.created = int(time.time())

    def _chunk(self, choices: list[dict[str, Any]], usage: dict[str, Any] | None = None) -> bytes:
        payload: dict[str, Any] = {
            "id": self.id,
            "object": "chat.completion.chunk" if self.chat else "text_completion",
            "created": self.created,
            "model": self.model,
            "choices": choices,
        }
        if usage is not None:
            payload["usage"] = usage
        return b"data: " + orjson.dumps(payload) + b"\n\n"

    def role(self) -> bytes:
        if not self.chat:
            return b""
        return self._chunk([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}])

    def content(self, text: str, reasoning: str = "") -> bytes:
        if self.chat:
            delta: dict[str, Any] = {"content": text}
            if reasoning:
                delta["reasoning_content"] = reasoning
            return self._chunk([{"index": 0, "delta": delta, "finish_reason": None}])
        return self._chunk([{"index": 0, "text": text, "finish_reason": None}])

    def finish(self, reason: str) -> bytes:
        if self.chat:
            return self._chunk([{"index": 0, "delta": {}, "finish_reason": reason}])
        return self._chunk([{"index": 0, "text": "", "finish_reason": reason}])

    def usage(self, prompt_tokens: int, completion_tokens: int) -> bytes:
        return self._chunk([], {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                                "total_tokens": prompt_tokens + completion_tokens})

    def replay(self, answer: Answer, include_usage: bool) -> list[bytes]:
        """A whole answer as a stream: role, content, finish, usage (if asked), [DONE]."""
        out = [self.role(), self.content(answer.text, answer.reasoning), self.finish(answer.finish_reason or "stop")]
        if include_usage:
            out.append(self.usage(answer.prompt_tokens or 0, answer.completion_tokens or 0))
        out.append(DONE)
        return [part for part in out if part]

    def whole(self, answer: Answer) -> dict[str, Any]:
        """The non-streaming response body."""
        usage = {"prompt_tokens": answer.prompt_tokens or 0, "completion_tokens": answer.completion_tokens or 0,
                 "total_tokens": (answer.prompt_tokens or 0) + (answer.completion_tokens or 0)}
        if self.chat:
            message: dict[str, Any] = {"role": "assistant", "content": answer.text}
            if answer.reasoning:
                message["reasoning_content"] = answer.reasoning
            choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": answer.finish_reason or "stop"}
        else:
            choice = {"index": 0, "text": answer.text, "finish_reason": answer.finish_reason or "stop"}
        return {"id": self.id, "object": "chat.completion" if self.chat else "text_completion",
                "created": self.created, "model": self.model, "choices": [choice], "usage": usage}
