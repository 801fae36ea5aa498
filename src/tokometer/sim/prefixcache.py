"""The modelled engine's prefix cache: vLLM's automatic prefix caching, in blocks.

A prompt is cut into blocks of `BLOCK_TOKENS` tokens (the simulator's tokens are words); each full block is
named by a hash chained over every block before it, so a block is shared only when everything before it
is too. When a sequence is admitted, its leading blocks that the cache holds are taken as already
prefilled: its prefill starts after them (at least the prompt's last token is always computed, as vLLM
does). When its prefill is done, its full blocks enter the cache. The cache keeps at most as many blocks as
the KV capacity holds and evicts the least recently used. (vLLM keeps cached blocks in the KV cache's free
space and evicts them when running sequences need it; here the two are counted apart, so a cache hit never
preempts anything.)

``queries``/``hits`` count prompt tokens looked up and found, as vLLM's ``prefix_cache_queries`` and
``prefix_cache_hits`` counters do.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

from tokometer.messages import message_text

__all__ = ["BLOCK_TOKENS", "PrefixCache", "block_hashes", "prompt_words"]

BLOCK_TOKENS = 16
"""vLLM's default block size."""


def prompt_words(body: Mapping[str, Any]) -> list[str]:
    """The prompt of a request body as the simulator's tokens (words), whatever its protocol: chat
    ``messages`` (OpenAI, Ollama) in order, else ``prompt`` (completions, llama.cpp) or ``inputs`` (TGI)."""
    messages = body.get("messages")
    if isinstance(messages, list):
        return " ".join(message_text(m) for m in messages if isinstance(m, Mapping)).split()
    for key in ("prompt", "inputs"):
        if isinstance(body.get(key), str):
            return str(body[key]).split()
    return []


def block_hashes(words: Sequence[str], block: int = BLOCK_TOKENS) -> tuple[bytes, ...]:
    """The chained hashes of the full blocks of ``words``."""
    out: list[bytes] = []
    previous = b""
    for start in range(0, len(words) - block + 1, block):
        digest = hashlib.blake2b(previous + "\x00".join(words[start:start + block]).encode(), digest_size=12)
        previous = digest.digest()
        out.append(previous)
    return tuple(out)


class PrefixCache:
    """Cached blocks, least recently used first out."""

    def __init__(self, capacity_blocks: int, block: int = BLOCK_TOKENS) -> None:
        self.capacity = max(0, capacity_blocks)
        self.block = block
        self._blocks: OrderedDict[bytes, None] = OrderedDict()
        self.queries = 0
        self.hits = 0

    def lookup(self, hashes: Sequence[bytes], prompt_tokens: int) -> int:
        """Prompt tokens of a new sequence the cache already holds (its leading blocks, the last token never)."""
        found = 0
        for h in hashes:
            if h not in self._blocks:
                break
            found += 1
        self._touch(hashes[:found])
        cached = min(found * self.block, max(0, prompt_tokens - 1))
        self.queries += prompt_tokens
        self.hits += cached
        return cached

    def insert(self, hashes: Sequence[bytes]) -> None:
        """A prefilled prompt's full blocks enter the cache (or are refreshed)."""
        for h in hashes:
            self._blocks[h] = None
        self._touch(hashes)
        while len(self._blocks) > self.capacity:
            self._blocks.popitem(last=False)

    def _touch(self, hashes: Sequence[bytes]) -> None:
        """Mark a chain used, its head last: of blocks used together the tail is evicted first (a chain
        without its head is of no use), as vLLM frees them."""
        for h in reversed(hashes):
            self._blocks.move_to_end(h)

    def __len__(self) -> int:
        return len(self._blocks)
