"""What an answer amounted to, and how the gateway writes it in OpenAI's format when it cannot relay bytes.

Used when the bytes cannot simply be relayed: an Ollama, TGI or llama.cpp upstream (its events
become OpenAI chunks), an answer from the cache (replayed as a stream), a client that asked for
``stream: false`` (one JSON answer). The chunks themselves are `tokometer.wire.openai`'s.
"""

from __future__ import annotations

from typing import Any

from tokometer.wire.openai import DONE, ChunkWriter

__all__ = ["MAX_KEPT_CHARS", "Answer", "replay", "whole"]


MAX_KEPT_CHARS = 4 * 1024 * 1024
"""The most of an answer's text (and, apart, of its reasoning) the gateway keeps while relaying it: for the
cache, a resume or continuation, and a non-streamed answer. Past it the answer still streams whole, but is
`cut`: it is not cached, not carried on, and a non-streamed one is refused."""


class Answer:
    """What an answer amounted to: collected while relaying, or read from the cache.

    Text arrives an event at a time; it is kept as pieces, joined a few hundred at a time and once more
    when read. (Appending to one string copies the answer so far at every event: 26 s of CPU for 200,000
    events measured here; a piece per event costs ~60 bytes of object header each.)"""

    __slots__ = ("_reasoning", "_text", "completion_tokens", "content_events", "cut", "finish_reason", "keep",
                 "kept", "model", "prompt_tokens", "segment_completion_tokens")

    def __init__(self, text: str = "", reasoning: str = "", finish_reason: str | None = None,
                 prompt_tokens: int | None = None, completion_tokens: int | None = None, model: str = "") -> None:
        self._text = _Pieces(text)
        self._reasoning = _Pieces(reasoning)
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


_JOIN_EVERY = 256


class _Pieces:
    """Text gathered a piece at a time: joined every _JOIN_EVERY pieces, and all together when read
    (each character is copied twice)."""

    __slots__ = ("chunks", "pending")

    def __init__(self, text: str) -> None:
        self.chunks: list[str] = [text] if text else []
        self.pending: list[str] = []

    def append(self, piece: str) -> None:
        pending = self.pending
        pending.append(piece)
        if len(pending) >= _JOIN_EVERY:
            self.chunks.append("".join(pending))
            pending.clear()

    def text(self) -> str:
        if self.pending:
            self.chunks.append("".join(self.pending))
            self.pending.clear()
        if len(self.chunks) > 1:
            self.chunks[:] = ["".join(self.chunks)]
        return self.chunks[0] if self.chunks else ""


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
