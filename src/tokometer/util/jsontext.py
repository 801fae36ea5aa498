"""JSON text in and out, each way through one door.

Out: JSON text that is always valid: NaN and Infinity (which `json.dumps` writes by default, and no JSON reader
takes) are written as null. Every JSON output of the reports, the store and the commands goes through `dumps`,
so a non-finite number never reaches a file or standard output silently.

In: JSON a peer sent whole (a server's answer, a line of its progress stream, a value handed over on the
command line) goes through `loads` (or `loads_object`): strict JSON (no NaN, no Infinity, no number past a
double's range, valid UTF-8), nested at most 1,024 deep (orjson's limit), and anything else one ValueError, never a
RecursionError, an OverflowError or a value of another kind slipping through as an AttributeError later.
Files a user hands over are read by `tokometer.util.jsonstream` and `tokometer.util.readlimit` instead."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import orjson

__all__ = ["dumps", "dumps_readable", "finite", "loads", "loads_object", "whole_number"]


def finite(value: Any) -> Any:
    """``value`` with every non-finite float, at any depth of mappings, lists and tuples, as None (tuples become
    lists, as JSON writes them)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def dumps(value: Any, **options: Any) -> str:
    """`json.dumps` (its ``options`` as given) with ``allow_nan=False``, non-finite floats written as null."""
    try:
        return json.dumps(value, allow_nan=False, **options)
    except ValueError:  # a NaN or Infinity somewhere: copy the value without them (rare, so not done first)
        return json.dumps(finite(value), allow_nan=False, **options)


def dumps_readable(value: Any, **options: Any) -> str:
    """`dumps` with the text's own characters left as they are (``ensure_ascii=False``: a token's ``é``, ``中``),
    but for those a terminal acts on or hides: DEL and every character past ASCII that ``str.isprintable`` calls
    non-printable (the C1 controls, ``\\x9b`` among them, a form of ``ESC [``; bidi overrides and isolates;
    zero-width characters) as its ``\\uXXXX`` escape. JSON escapes the C0 controls itself and writes only ASCII
    outside its strings, so the value read back is the same."""
    text = dumps(value, ensure_ascii=False, **options)
    if text.isascii() and "\x7f" not in text:
        return text
    return "".join(c if (c.isascii() and c != "\x7f") or c.isprintable() else _escaped(c) for c in text)


def _escaped(char: str) -> str:
    """``char`` as JSON's ``\\uXXXX`` (a surrogate pair past the Basic Multilingual Plane)."""
    code = ord(char)
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def loads(raw: bytes | str) -> Any:
    """JSON a peer sent, parsed strictly (module docstring); ValueError (orjson's JSONDecodeError) for anything
    else, with what was wrong and where."""
    return orjson.loads(raw)


def loads_object(raw: bytes | str, what: str) -> dict[str, Any]:
    """`loads` of a JSON object; ValueError naming ``what`` (e.g. "/api/pull's progress line") otherwise."""
    value = loads(raw)
    if not isinstance(value, dict):
        raise ValueError(f"{what} is not a JSON object")
    return value


def whole_number(value: Any, minimum: int = 0, maximum: int | None = None) -> int | None:
    """``value`` if a peer's JSON holds a whole number there of at least ``minimum`` (and at most ``maximum``;
    ``true`` is not one, nor ``2.0`` or ``"2"``), else None: a count or a size read out of a parsed answer."""
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        return None
    return value if maximum is None or value <= maximum else None
