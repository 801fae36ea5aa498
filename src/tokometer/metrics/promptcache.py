"""The prompt-cache hit rate of a set of answers: the share of prompt tokens the server took from its cache.

Read from what each answer says (OpenAI usage's ``prompt_tokens_details.cached_tokens``, llama.cpp's
``cache_n``, in `RequestRecord.server`); a step's summary (`tokometer.metrics.summary`) and each
turn of a session (`tokometer.metrics.sessions`) report it.
"""

from __future__ import annotations

from collections.abc import Sequence

from tokometer.records import RequestRecord

__all__ = ["prompt_cache_hit_rate"]


def prompt_cache_hit_rate(records: Sequence[RequestRecord]) -> float | None:
    """Cached prompt tokens / prompt tokens, over the records whose answers say how many were cached; None
    when none does (or none knows its prompt's length)."""
    cached = prompt = 0
    for r in records:
        if r.server is None or r.server.cached_tokens is None:
            continue
        total = r.input_tokens if r.input_tokens_source in ("usage", "native") and r.input_tokens else None
        if total is None and r.server.prompt_tokens is not None:
            total = r.server.prompt_tokens + r.server.cached_tokens  # llama.cpp: prompt_n excludes cache_n
        if total:
            cached += r.server.cached_tokens
            prompt += total
    return cached / prompt if prompt else None
