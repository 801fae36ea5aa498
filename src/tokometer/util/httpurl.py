"""An http(s) URL a user hands over (a server to measure or watch, a gateway's upstream, a /metrics page), checked
once where it comes in: its scheme, that it parses (brackets of an IPv6 host, a port that is a number within
0-65535), that it names a host, and that it holds no space or control character. Each reader of a URL says what
is wrong with it in one line through `http_url_problem`, rather than a parser's ValueError deep in the first
request (``http://[::1`` had been a traceback in `bench` and `top`)."""

from __future__ import annotations

import re
from typing import Final
from urllib.parse import urlsplit

__all__ = ["CONTROL_CHARACTERS", "http_url_problem"]

CONTROL_CHARACTERS: Final = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
"""Characters no URL or name a user gives may hold: C0 and C1 controls and the two Unicode line separators."""


def http_url_problem(url: str) -> str | None:
    """What is wrong with ``url`` as an http(s) URL, as the end of a sentence (``must start with http:// or
    https://``); None when nothing is."""
    if not url.startswith(("http://", "https://")):
        return "must start with http:// or https://"
    if CONTROL_CHARACTERS.search(url) or " " in url:
        return "holds a space or a control character"
    try:
        parts = urlsplit(url)
        parts.port  # a port that is no number, or past 65535, raises here  # noqa: B018
    except ValueError as exc:
        return f"is not a well-formed URL ({exc})"
    if not parts.hostname:
        return "names no host (e.g. http://127.0.0.1:8000)"
    return None
