"""The prefix-cache effect of a step whose prompts share prefixes (``bench --prefix-tokens P --prefix-groups G``).

Each request of such a step started with one of G shared prefixes. Its TTFT counts as

- **cold** when it was the run's first request with its prefix (`RequestRecord.prefix_first`): no cache can
  have held the prefix yet;
- **warm** when an earlier request with the same prefix had already received its first token when it was
  sent (that request's prefill, the prefix's included, was done), or when the prefix was first used in an
  earlier step;
- neither (left out) when it was sent while the first request with its prefix was still in prefill: it
  may or may not find the prefix cached, depending on the server.

The **prefix-cache speed-up** is cold TTFT p50 / warm TTFT p50: about 1 when the server caches nothing,
and up to the ratio of whole-prompt prefill to suffix-only prefill when it caches the prefix.
"""

from __future__ import annotations

from collections.abc import Sequence

from tokometer.metrics import request as m
from tokometer.records import RequestRecord

__all__ = ["prefix_split"]


def prefix_split(records: Sequence[RequestRecord]) -> tuple[list[RequestRecord], list[RequestRecord]]:
    """(cold, warm) completed requests of a step, by the rule of the module docstring; both empty when no
    request carried a shared prefix."""
    ok = [r for r in records if r.ok and r.prefix_group is not None]
    first_token = {r.prefix_group: r.first_token_ns for r in ok if r.prefix_first and r.first_token_ns}
    firsts_here = {r.prefix_group for r in records if r.prefix_first}
    cold, warm = [], []
    for r in ok:
        if m.ttft_ns(r) is None:
            continue
        if r.prefix_first:
            cold.append(r)
        elif r.prefix_group not in firsts_here:
            warm.append(r)  # the prefix was first used in an earlier step
        elif (done := first_token.get(r.prefix_group)) is not None and r.sent_ns >= done:
            warm.append(r)
    return cold, warm
