"""Durations as people write them (``90``, ``90s``, ``1.5m``, ``500ms``): one parser for every option and
objective that takes one."""

from __future__ import annotations

import re

__all__ = ["duration_seconds"]

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def duration_seconds(text: str, default_unit: str = "s") -> float | None:
    """``text`` in seconds; a bare number is in ``default_unit`` (``ms``, ``s``, ``m`` or ``h``). None when
    ``text`` is not a duration."""
    match = _DURATION.match(text)
    if match is None:
        return None
    return float(match.group(1)) * _UNITS[match.group(2) or default_unit]
