"""Text gathered a piece at a time, as a stream's events bring it: `TextPieces`.

An answer's text arrives an event at a time. Appending to one string copies the answer so far at
every event (26 s of CPU for 200,000 events measured on the gateway); a list of pieces costs ~60
bytes of object header per piece. `TextPieces` keeps pieces and joins them every `JOIN_EVERY`, and
all together when read: each character is copied twice. Used by the gateway's record of an answer
(`tokometer.gateway.openai_format.Answer`) and by the Responses writer, which repeats each item's
text in its ``*.done`` events (`tokometer.protocols.openai_responses.writer`).
"""

from __future__ import annotations

__all__ = ["JOIN_EVERY", "MAX_KEPT_CHARS", "TextPieces"]

JOIN_EVERY = 256
"""Pending pieces joined into one at a time."""

MAX_KEPT_CHARS = 4 * 1024 * 1024
"""The most of one answer's text the gateway keeps while relaying it (`tokometer.gateway.openai_format.Answer`:
for the cache, a resume or continuation, and a non-streamed answer), and that a stream writer keeps to repeat
in its closing events (`tokometer.protocols.openai_responses.writer`). Past it the answer still streams whole."""


class TextPieces:
    """Text gathered a piece at a time: joined every `JOIN_EVERY` pieces, and all together when read."""

    __slots__ = ("chunks", "pending")

    def __init__(self, text: str = "") -> None:
        self.chunks: list[str] = [text] if text else []
        self.pending: list[str] = []

    def append(self, piece: str) -> None:
        pending = self.pending
        pending.append(piece)
        if len(pending) >= JOIN_EVERY:
            self.chunks.append("".join(pending))
            pending.clear()

    def text(self) -> str:
        if self.pending:
            self.chunks.append("".join(self.pending))
            self.pending.clear()
        if len(self.chunks) > 1:
            self.chunks[:] = ["".join(self.chunks)]
        return self.chunks[0] if self.chunks else ""
