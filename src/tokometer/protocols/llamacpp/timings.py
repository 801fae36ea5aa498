"""Readers for server-reported timings shared by several protocols."""

from __future__ import annotations

from typing import Any

from tokometer.protocols.common.base import ParsedEvent
from tokometer.protocols.common.numbers import count, duration_ms

__all__ = ["read_llamacpp_timings"]


def read_llamacpp_timings(timings: dict[str, Any], event: ParsedEvent) -> None:
    """llama.cpp's ``timings`` object (``prompt_n``/``prompt_ms``/``predicted_n``/``predicted_ms``, and
    ``cache_n``: prompt tokens taken from the slot's cache instead of evaluated). Every value goes through
    `tokometer.protocols.common.numbers`: one that is not a count or a duration is read as absent, and noted."""
    event.server_prompt_n = count(event, "timings.prompt_n", timings.get("prompt_n"))
    event.server_prompt_ms = duration_ms(event, "timings.prompt_ms", timings.get("prompt_ms"))
    event.server_decode_n = count(event, "timings.predicted_n", timings.get("predicted_n"))
    event.server_decode_ms = duration_ms(event, "timings.predicted_ms", timings.get("predicted_ms"))
    # reused from the slot's cache, not evaluated
    event.cached_prompt_tokens = count(event, "timings.cache_n", timings.get("cache_n"))
