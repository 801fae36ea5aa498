"""Which request headers carry secrets, and how they look wherever they are kept or shown.

A header is sensitive when its name (case and ``_``/``-`` aside) is ``Authorization``,
``Proxy-Authorization``, ``Cookie`` or ``Set-Cookie``, ends in ``-key`` or ``-token``, or
contains ``api-key``, ``apikey``, ``secret``, ``password`` or ``credential``. Its value is sent as
given but stored, printed and written out as `REDACTED` only: no fingerprint either, since a
short hash of a weak secret can be reversed by trying candidates.

`header_problem` says why a header cannot be sent at all: a name that is not an HTTP token, or a
CR, LF or NUL anywhere (it would end the field early and smuggle another one onto the wire), or a
value with non-ASCII characters (`value_problem`: a header carries them only as raw bytes, which
servers read as UTF-8 or as Latin-1, so the same text is not the same key everywhere).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["REDACTED", "header_problem", "is_sensitive_header", "redact_headers", "redact_saved_spec",
           "value_problem"]

REDACTED = "<redacted>"

_NAMES = frozenset({"authorization", "proxy-authorization", "cookie", "set-cookie"})
_SUFFIXES = ("-key", "-token")
_PARTS = ("api-key", "apikey", "secret", "password", "credential")
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # RFC 9110 section 5.6.2
_BREAKS = ("\r", "\n", "\0")


def header_problem(name: str, value: str) -> str | None:
    """Why the header ``name: value`` cannot be sent, or None; never quotes the value (it may be a secret)."""
    if any(c in name or c in value for c in _BREAKS):
        return "it contains a line break (CR or LF) or a NUL, which would end the field on the wire"
    if not _TOKEN.fullmatch(name):
        return "its name is not a valid HTTP field name (letters, digits and !#$%&'*+.^_`|~- only, no spaces)"
    return value_problem(value)


def value_problem(value: str) -> str | None:
    """Why ``value`` (an API key, a header's value) cannot be sent as it is in a header, or None; never quotes it."""
    if any(c in value for c in _BREAKS):
        return "it contains a line break (CR or LF) or a NUL, which would end the field on the wire"
    if not value.isascii():
        return ("it holds non-ASCII characters, which an HTTP header carries only as raw bytes that servers read "
                "differently (UTF-8 or Latin-1): use its ASCII form")
    return None


def is_sensitive_header(name: str) -> bool:
    """Whether a header named ``name`` carries a secret (see the module docstring)."""
    folded = name.strip().lower().replace("_", "-")
    return folded in _NAMES or folded.endswith(_SUFFIXES) or any(part in folded for part in _PARTS)


def redact_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """``headers`` with the value of every sensitive one replaced by `REDACTED`."""
    return {name: REDACTED if is_sensitive_header(name) else value for name, value in headers.items()}


def redact_saved_spec(spec: Any) -> Any:
    """A saved benchmark spec (a JSON object) with its ``headers`` redacted; anything else as it is."""
    if isinstance(spec, dict) and isinstance(spec.get("headers"), dict):
        return {**spec, "headers": redact_headers(spec["headers"])}
    return spec
