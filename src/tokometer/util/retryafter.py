"""`retry_after_s`: how long a server asked its client to wait, from its ``Retry-After`` header.

RFC 9110 §10.2.3: ``Retry-After = HTTP-date / delay-seconds`` (delay-seconds: one or more digits). OpenAI's and
Azure's APIs also send ``retry-after-ms`` (milliseconds, possibly fractional), which their SDKs read first. A
value that is neither, negative, or beyond `MAX_RETRY_AFTER_S` is not a wait anyone should honour: None.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Mapping
from typing import Final

__all__ = ["MAX_RETRY_AFTER_S", "retry_after_s"]

MAX_RETRY_AFTER_S: Final = 86_400.0
"""A day: a longer wait is a broken header, not advice."""

_MAX_CHARS: Final = 64  # an HTTP-date is 29 characters; delay-seconds of a day, 5


def retry_after_s(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds to wait per ``headers`` (lower-case names), or None where it does not say (or says nonsense).

    ``now``: the time (Unix seconds) an HTTP-date is counted from; a date in the past is a wait of 0."""
    millis = headers.get("retry-after-ms", "").strip()
    if millis and len(millis) <= _MAX_CHARS:
        try:
            value = float(millis) / 1e3
        except ValueError:
            value = -1.0
        if 0 <= value <= MAX_RETRY_AFTER_S:
            return value
    text = headers.get("retry-after", "").strip()
    if not text or len(text) > _MAX_CHARS:
        return None
    if text.isascii() and text.isdigit():
        seconds = float(int(text))
        return seconds if seconds <= MAX_RETRY_AFTER_S else None
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:  # RFC 9110: an HTTP-date is always GMT; a date without a zone is not one
        return None
    wait = when.timestamp() - (time.time() if now is None else now)
    return max(0.0, wait) if wait <= MAX_RETRY_AFTER_S else None
