"""Readers for server-reported timings shared by several protocols."""

from __future__ import annotations

from typing import Any

from tokometer.wire.base import ParsedEvent

__all__ = ["read_llamacpp_timings"]


def read_llamacpp_timings(timings: dict[str, Any], event: ParsedEvent) -> None:
    """llama.cpp's ``timings`` object (``prompt_n``/``prompt_ms``/``predicted_n``/``predicted_ms``, and
    ``cache_n``: prompt tokens taken from the slot's cache instead of evaluated)."""
    event.server_prompt_n = _int(timings.get("prompt_n"))
    event.server_prompt_ms = _float(timings.get("prompt_ms"))
    event.server_decode_n = _int(timings.get("predicted_n"))
    event.server_decode_ms = _float(timings.get("predicted_ms"))
    event.cached_prompt_tokens = _int(timings.get("cache_n"))  # reused from the slot's cache, not evaluated


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) else None


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) else None
