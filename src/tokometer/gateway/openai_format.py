"""What an answer amounted to, and how the gateway writes it in OpenAI's format when it cannot relay bytes.

Used when the bytes cannot simply be relayed: an Ollama, TGI or llama.cpp upstream (its events
become OpenAI chunks), an answer from the cache (replayed as a stream), a client that asked for
``stream: false`` (one JSON answer). The chunks themselves are `tokometer.wire.openai`'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tokometer.wire.openai import DONE, ChunkWriter

__all__ = ["Answer", "replay", "whole"]


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
    segment_completion_tokens: int | None = None
    """The completion tokens the current segment's upstream reported (continuation adds them up)."""


def replay(writer: ChunkWriter, answer: Answer, include_usage: bool) -> list[bytes]:
    """A whole answer as a stream: role, content, finish, usage (if asked), [DONE]."""
    out = [writer.role(), writer.content(answer.text, answer.reasoning), writer.finish(answer.finish_reason or "stop")]
    if include_usage:
        out.append(writer.usage(answer.prompt_tokens or 0, answer.completion_tokens or 0))
    out.append(DONE)
    return [part for part in out if part]


def whole(writer: ChunkWriter, answer: Answer) -> dict[str, Any]:
    """The non-streaming response body."""
    return writer.whole(answer.text, answer.reasoning, answer.finish_reason or "stop", answer.prompt_tokens or 0,
                        answer.completion_tokens or 0)
