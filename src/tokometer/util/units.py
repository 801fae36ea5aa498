"""Durations as people write them (``90``, ``90s``, ``1.5m``, ``500ms``) and sizes (``4096``, ``512KiB``,
``1MiB``): one parser each for every option and objective that takes one."""

from __future__ import annotations

import re
from decimal import Decimal

__all__ = ["GIB", "MIB", "byte_size", "duration_seconds"]

MIB = 2**20
GIB = 2**30
"""Binary sizes: every module that shows or computes GiB/MiB takes them from here."""

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def duration_seconds(text: str, default_unit: str = "s") -> float | None:
    """``text`` in seconds; a bare number is in ``default_unit`` (``ms``, ``s``, ``m`` or ``h``). None when
    ``text`` is not a duration; infinity for one too long for a float (hundreds of digits), which every caller
    holds to a bound (`tokometer.util.limits`)."""
    match = _DURATION.match(text)
    if match is None:
        return None
    return float(match.group(1)) * _UNITS[match.group(2) or default_unit]


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(b|kb|kib|k|mb|mib|m|gb|gib|g)?\s*$", re.IGNORECASE)
_SIZE_UNITS = {"b": 1, "k": 1024, "kb": 1000, "kib": 1024, "m": 1024**2, "mb": 1000**2, "mib": 1024**2,
               "g": 1024**3, "gb": 1000**3, "gib": 1024**3}


def byte_size(text: str) -> int | None:
    """``text`` in bytes: a bare number, or one with a unit (``KiB``, ``MiB``, ``GiB``; ``KB``/``MB``/``GB``
    are powers of 1000; ``K``/``M``/``G`` powers of 1024). None when ``text`` is not a size."""
    match = _SIZE.match(text)
    if match is None:
        return None
    # exact, for a number of any length (a float of 400 digits is infinity, which no int holds)
    return int(Decimal(match.group(1)) * _SIZE_UNITS[(match.group(2) or "b").lower()])
