"""A name or a path a peer sent, as a one-line message shows it: at most `SHOWN_CHARS` characters of it.

A server's model id, llama.cpp's ``model_path``, a name in a model list may be as long as an answer (16 MiB), and
each went whole into the line that named it (``doctor``'s skip line printed a 5,000-character path, twice). The
commands show such text through `quoted` (in quotes, as ``repr`` writes it) or `clipped` (bare, for a phrase such
as ``model NAME at URL``), which keep its first `SHOWN_CHARS` characters and say how long it was. Only what is
shown to a person goes through here: what is sent back to the server, stored or written as JSON keeps the text
whole.
"""

from __future__ import annotations

from typing import Final

__all__ = ["SHOWN_CHARS", "clipped", "quoted", "quoted_in"]

SHOWN_CHARS: Final = 160
"""The most characters of a peer's text one message shows."""


def _length(text: str) -> str:
    return f" ({len(text):,} characters)"


def quoted(text: str, limit: int = SHOWN_CHARS) -> str:
    """``repr(text)``; past ``limit`` characters, the first ones quoted, an ellipsis and the whole length:
    ``'/models/llama…' (5,004 characters)``."""
    if len(text) <= limit:
        return repr(text)
    head = repr(text[:limit])
    return f"{head[:-1]}…{head[-1]}{_length(text)}"


def clipped(text: str, limit: int = SHOWN_CHARS) -> str:
    """``text`` bare, its control characters written as ``repr`` writes them (a terminal would act on them), and
    past ``limit`` characters cut as `quoted` cuts it: ``/models/llama… (5,004 characters)``."""
    head = text[:limit]
    if not head.isprintable():
        head = "".join(c if c.isprintable() else repr(c)[1:-1] for c in head)
    return head if len(text) <= limit else f"{head}…{_length(text)}"


def quoted_in(message: str, text: str, limit: int = SHOWN_CHARS) -> str:
    """``message`` (an error's, which quotes ``text`` with ``repr``) with ``text`` quoted as `quoted` quotes it."""
    return message if len(text) <= limit else message.replace(repr(text), quoted(text, limit))
