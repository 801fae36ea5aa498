"""Batched requests (embeddings, rerank): how many inputs a step's answered requests carried, per second.

Definitions (docs/reference/metrics.md's window: completed, non-warm-up requests):

- inputs = sum of ``RequestRecord.inputs`` (the texts each request carried; an answer with another number of
  results is an error, `tokometer.client.assemble`)
- inputs/s = inputs / the step's duration (as requests/s is requests / duration)

Their rows are in `tokometer.metrics.registry` (``inputs_total``, ``inputs_per_s``). Latency is the E2E
distribution (the whole response: such an answer has no first token, so no TTFT, TPOT or ITL), input tokens/s
the input throughput, both of `tokometer.metrics.summary`.
"""

from __future__ import annotations

from collections.abc import Sequence

from tokometer.records import RequestRecord

__all__ = ["inputs_total"]


def inputs_total(ok: Sequence[RequestRecord]) -> int:
    """The inputs the completed requests carried (0 when none was a batched request)."""
    return sum(r.inputs or 0 for r in ok)
