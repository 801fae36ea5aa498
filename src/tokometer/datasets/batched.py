"""Batches of inputs for the protocols that take several texts per request (embeddings, rerank).

`BatchedSource` draws ``batch_size`` prompts at a time from another source and makes each group one
`Prompt` whose messages are the inputs, one message each (`tokometer.protocols.embeddings.client.batch_inputs` reads
them back); a chat prompt of a dataset becomes one input, its messages joined. Its ``input_tokens`` is the
sum of the inputs' when every one is known (exact synthetic prompts), else unknown. The batches are made
once, before any timing, as a list that is cycled: with synthetic prompts, distinct up to the source's
``unique`` prompts.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Iterator

from tokometer.prompt import Message, Prompt

__all__ = ["BatchedSource"]


class BatchedSource:
    """``n_batches`` prompts of ``batch_size`` inputs each, drawn in order from ``prompts``."""

    def __init__(self, name: str, prompts: Iterable[Prompt], batch_size: int, n_batches: int) -> None:
        self.batch_size = batch_size
        self.name = f"{name} in batches of {batch_size}" if batch_size > 1 else name
        drawn = iter(prompts)
        self.items = [_batch(list(itertools.islice(drawn, batch_size))) for _ in range(max(1, n_batches))]

    @staticmethod
    def batches_for(prompts: int, batch_size: int) -> int:
        """How many batches cover ``prompts`` prompts (at least one)."""
        return max(1, math.ceil(prompts / batch_size))

    def prompts(self) -> Iterator[Prompt]:
        while True:
            yield from self.items

    def __len__(self) -> int:
        return len(self.items)


def _batch(group: list[Prompt]) -> Prompt:
    messages = tuple(Message("user", p.text) for p in group)
    counts = [p.input_tokens for p in group]
    known = None if any(n is None for n in counts) else sum(n or 0 for n in counts)
    return Prompt(messages, "\n\n".join(p.text for p in group), known)
