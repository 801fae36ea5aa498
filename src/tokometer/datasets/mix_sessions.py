"""A tenant mix of chat sessions (``bench --mix FILE --sessions N``): each session one tenant's, drawn by the
mix's weights from the run's seed (`tokometer.datasets.mix.drawn_tenants`, as single requests are), its turns
from that tenant's own session source (a ShareGPT ``dataset``'s conversations, or synthetic messages of its
``input_tokens`` with its ``turns`` and ``think_time``, the run's where it gives none), and every turn marked
with the tenant (its model or adapter, headers and answer length: `tokometer.datasets.mix.mark_prompt`, applied
by `tokometer.load.sessions`). The load counts sessions (a share is a share of the sessions, a rate new sessions
a second); the per-tenant blocks count their turns.

The sessions are the same sequence from their start for the same seed, so worker processes that deal the
step's sessions out (`script_list`) give session ``g`` to the tenant one process would.
"""

from __future__ import annotations

import itertools
import math
import threading
from collections.abc import Iterator, Sequence
from dataclasses import replace

from tokometer.datasets.conversations import SessionScript, SessionSource
from tokometer.datasets.mix import TenantMix, drawn_tenants

__all__ = ["MixSessions"]


class MixSessions:
    """The sessions of a mix: each drawn to a tenant, taken from that tenant's own source, marked with it."""

    def __init__(self, mix: TenantMix, sources: Sequence[SessionSource], seed: int) -> None:
        self.mix, self.sources, self.seed = mix, list(sources), seed
        self.name = "mix sessions(" + ", ".join(f"{t.name}: {s.name}" for t, s in
                                                zip(mix.tenants, sources, strict=True)) + ")"

    def prepare(self, n: int, stop: threading.Event | None = None) -> None:
        """Make each tenant's part of ``n`` sessions now (its share, and some more for the draw's spread)."""
        for source, weight in zip(self.sources, self.mix.weights(), strict=True):
            expected = n * weight
            source.prepare(math.ceil(expected + 4 * math.sqrt(expected) + 8), stop)

    def scripts(self) -> Iterator[SessionScript]:
        """The sessions in order, each its tenant's: the same sequence for the same seed."""
        streams = [s.scripts() for s in self.sources]
        for k in drawn_tenants(self.mix, self.seed):
            yield replace(next(streams[k]), tenant=self.mix.tenants[k])

    def script_list(self, offset: int, n: int) -> list[SessionScript]:
        """Sessions ``offset .. offset + n - 1`` (for worker processes)."""
        return list(itertools.islice(self.scripts(), offset, offset + n))
