"""JSON text that is always valid: NaN and Infinity (which `json.dumps` writes by default, and no JSON reader
takes) are written as null. Every JSON output of the reports, the store and the commands goes through `dumps`,
so a non-finite number never reaches a file or standard output silently."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

__all__ = ["dumps", "finite"]


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
