"""A request header's text as the client meant it: `header_text`.

HTTP field values are bytes (RFC 9110 5.5); Starlette hands them over decoded as Latin-1, so an API
key typed as ``clé`` arrives as ``cl\u00c3\u00a9`` from a client that sends UTF-8 (curl, browsers,
Node) and as ``clé`` from one that sends Latin-1 (Python's http.client and requests). Both mean the
same key: the bytes are read as UTF-8 where they are valid UTF-8, else as Latin-1, so a key with
non-ASCII characters matches whichever of the two its client sends.
"""

from __future__ import annotations

__all__ = ["header_text"]


def header_text(value: str) -> str:
    """``value`` (a header as Starlette decoded it, Latin-1) read as UTF-8 where its bytes are UTF-8."""
    if value.isascii():
        return value
    raw = value.encode("latin-1", "replace")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return value
