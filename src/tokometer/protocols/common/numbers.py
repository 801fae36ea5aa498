"""A server's numbers are data, not truth: reading counts and durations out of a parsed answer.

Every token count and duration a protocol reader takes from a server (OpenAI ``usage``, llama.cpp
``timings``, TGI ``details``, Ollama's counters) goes through `count` or `duration_ms`. A value that
is not a non-negative integer (a count) or a finite non-negative number (a duration), or that is
beyond anything one request can hold (`MAX_COUNT` tokens, `MAX_DURATION_MS`), is read as absent and
noted on the event (`ParsedEvent.rejected`), so the record can say which of the server's numbers it
did not believe. Whether a well-formed count is plausible against the stream it came with (the
events received, ``max_tokens``) is judged later, once the stream is whole:
`tokometer.client.plausible`.

What is an error is read by shape too (`error_message`): an ``error`` field that is an object with something
in it, a non-empty string or ``true`` says the answer failed; ``false``, ``null``, ``0`` and empty values beside
an answer do not, whatever their size.
"""

from __future__ import annotations

import math
from typing import Any, Final

from tokometer.protocols.common.base import ParsedEvent

__all__ = ["MAX_COUNT", "MAX_DURATION_MS", "count", "duration_ms", "error_message", "obj", "text_field"]

MAX_COUNT: Final = 100_000_000
"""More tokens than any one request has (no model's context holds 10^8 tokens)."""

MAX_DURATION_MS: Final = 7 * 86_400_000.0
"""A week, in milliseconds: longer than any request a benchmark waits for."""


def _note(event: ParsedEvent, name: str, value: Any, why: str) -> None:
    shown = repr(value)
    if len(shown) > 40:
        shown = shown[:37] + "..."
    note = f"{name}={shown} ({why})"
    event.rejected = f"{event.rejected}; {note}" if event.rejected else note


def count(event: ParsedEvent, name: str, value: Any) -> int | None:
    """``value`` as a token count (an integer, or an integral float, from 0 to `MAX_COUNT`), else ``None``;
    a value that is present but not such a count is noted on ``event`` under ``name``."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        _note(event, name, value, "not a number")
        return None
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        _note(event, name, value, "not a whole number")
        return None
    if value < 0:
        _note(event, name, value, "negative")
        return None
    if value > MAX_COUNT:
        _note(event, name, value, "beyond any request")
        return None
    return int(value)


def duration_ms(event: ParsedEvent, name: str, value: Any, scale: float = 1.0) -> float | None:
    """``value * scale`` as milliseconds (finite, from 0 to `MAX_DURATION_MS`), else ``None``; a value that
    is present but not such a duration is noted on ``event`` under ``name``."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        _note(event, name, value, "not a number")
        return None
    ms = value * scale
    if not math.isfinite(ms):
        _note(event, name, value, "not finite")
        return None
    if ms < 0:
        _note(event, name, value, "negative")
        return None
    if ms > MAX_DURATION_MS:
        _note(event, name, value, "beyond any request")
        return None
    return float(ms)


def obj(value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty one (a field of the wrong shape reads as absent)."""
    return value if isinstance(value, dict) else {}


def text_field(data: dict[str, Any], name: str) -> str:
    """A text field: the string, or ``""`` when absent or not a string."""
    value = data.get(name)
    return value if isinstance(value, str) else ""


_ERROR_TEXT_CHARS: Final = 300
"""An error's message is kept to this many characters (a server's message can be of any size)."""


def error_message(value: Any) -> str | None:
    """What an ``error`` field says, when its shape says the answer failed, else ``None``.

    An object with anything in it (its ``code`` or ``type`` and ``message``), a non-empty string, ``true`` or a
    non-zero number or non-empty list is an error; ``false``, ``null``, ``0``, ``""``, ``{}`` and ``[]`` are
    not (a server that writes ``"error": false`` beside its answer says there was none)."""
    if value is None or value is False or value in (0, "", {}, []):
        return None
    if value is True:
        return "error: true"
    if isinstance(value, dict):
        message = value.get("message")
        kind = value.get("code") or value.get("type")
        text = str(message) if message not in (None, "") else ""
        if kind not in (None, "") and text:
            text = f"{kind}: {text}"
        return (text or str(kind if kind not in (None, "") else value))[:_ERROR_TEXT_CHARS]
    return str(value)[:_ERROR_TEXT_CHARS]
