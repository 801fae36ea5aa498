"""The modelled engine's prefix cache (`tokometer.sim.prefixcache`): chained block hashes, LRU, and the
last prompt token always computed."""

from __future__ import annotations

from tokometer.sim.prefixcache import PrefixCache, block_hashes, prompt_words


def test_blocks_are_shared_only_with_everything_before_them() -> None:
    a = block_hashes([f"w{i}" for i in range(40)], 16)
    b = block_hashes([f"w{i}" for i in range(32)] + ["other"] * 8, 16)
    c = block_hashes(["x"] + [f"w{i}" for i in range(1, 40)], 16)
    assert len(a) == 2 and a == b  # 40 words: two full blocks; the tail does not count
    assert c[0] != a[0] and c[1] != a[1]  # the same second block after another first one is another block


def test_lookup_insert_and_eviction() -> None:
    cache = PrefixCache(capacity_blocks=3, block=4)
    first = block_hashes(list("abcdefgh"), 4)  # 2 blocks
    assert cache.lookup(first, 8) == 0
    cache.insert(first)
    assert cache.lookup(first, 8) == 7  # all cached, but the last token is always computed
    assert cache.lookup(first, 12) == 8
    other = block_hashes(list("ijklmnop"), 4)
    cache.insert(other)  # 4 blocks > 3: the least recently used goes
    assert len(cache) == 3 and cache.lookup(first, 12) == 4
    assert (cache.queries, cache.hits) == (8 + 8 + 12 + 12, 0 + 7 + 8 + 4)


def test_prompt_words_of_each_protocol() -> None:
    assert prompt_words({"messages": [{"role": "system", "content": "a b"}, {"role": "user", "content": "c"}]}) == \
        ["a", "b", "c"]
    assert prompt_words({"prompt": "x y"}) == ["x", "y"] and prompt_words({"inputs": "z"}) == ["z"]
    assert prompt_words({}) == []
