"""Is a successful answer an API answer at all? Its media type, and a look at its first bytes.

A captive portal, a login page, a proxy's or a static web server's index answers ``200 OK`` on the API
path with HTML. Parsed as a stream it has no events and no end, and would read as a cut stream
(``reset``); `not_an_api_answer` says what it is instead ("not an API answer: text/html"), and the
request is a ``protocol`` failure. Media types an inference server streams or answers with (SSE, NDJSON,
JSON and its ``+json`` kin, plain text, none given) pass; so does anything unknown that does not start
like a markup document.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

__all__ = ["not_an_api_answer"]

_DOCUMENT_TYPES: Final = frozenset({
    "text/html", "application/xhtml+xml", "text/xml", "application/xml", "text/css", "text/javascript",
    "application/javascript", "application/pdf",
})
_DOCUMENT_PREFIXES: Final = ("image/", "audio/", "video/", "font/")
_MARKUP_STARTS: Final = (b"<!doctype", b"<html", b"<?xml", b"<head", b"<body")
_SNIFF_BYTES: Final = 256


def not_an_api_answer(headers: Mapping[str, str], chunks: Sequence[bytes]) -> str | None:
    """Why a 2xx answer with these headers and first body chunks is not an inference API's, or ``None``."""
    media = headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media in _DOCUMENT_TYPES or media.startswith(_DOCUMENT_PREFIXES):
        return f"not an API answer: {media}{_title(chunks)}"
    head = b"".join(chunks[:4])[:_SNIFF_BYTES].lstrip().lower()
    if head.startswith(_MARKUP_STARTS):
        return f"not an API answer: an HTML or XML document ({media or 'no Content-Type'}){_title(chunks)}"
    return None


def _title(chunks: Sequence[bytes]) -> str:
    """`` ("<title>")`` of an HTML page, when its first 4 KiB has one."""
    head = b"".join(chunks[:8])[:4096].decode("utf-8", "replace")
    lowered = head.lower()
    start = lowered.find("<title>")
    end = lowered.find("</title>", start)
    if start < 0 or end < 0:
        return ""
    title = " ".join(head[start + 7:end].split())[:80]
    return f' ("{title}")' if title else ""
