"""The answer cache: which requests get a key, what the key ignores, and the in-process LRU + TTL."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import orjson
import pytest

from tokometer.gateway.cache import CachedAnswer, MemoryCache, RedisCache, cache_key, make_cache
from tokometer.gateway.config import CacheConfig

MESSAGES = [{"role": "user", "content": "Say hi"}]
ANSWER = CachedAnswer(model="m", text="hi", finish_reason="stop", prompt_tokens=3, completion_tokens=1,
                      served_by="primary", created=1_700_000_000)


def body(**values: Any) -> dict[str, Any]:
    return {"model": "chat", "messages": MESSAGES, "temperature": 0, **values}


def test_only_deterministic_single_answers_get_a_key() -> None:
    assert cache_key("chat", body()) is not None
    assert cache_key("chat", body(temperature=0.7, seed=1)) is not None
    assert cache_key("chat", {"messages": MESSAGES, "seed": 7}) is not None
    assert cache_key("chat", {"messages": MESSAGES}) is None  # temperature absent: the server's default
    assert cache_key("chat", body(temperature=0.2)) is None
    assert cache_key("chat", body(temperature=None)) is None
    assert cache_key("chat", body(temperature="0")) is None
    assert cache_key("chat", body(n=2)) is None
    assert cache_key("chat", body(n=1)) == cache_key("chat", body())
    assert cache_key("chat", body(logprobs=True, top_logprobs=2)) is None


def test_key_ignores_order_whitespace_and_transport_fields() -> None:
    base = cache_key("chat", body(max_tokens=64, stop=["b", "a"]))
    reordered = orjson.loads(b'{"stop": ["a", "b"], "max_completion_tokens": 64.0, "temperature": 0.0,\n'
                             b'  "messages": [{"content": "Say hi", "role": "user"}], "model": "other"}')
    assert cache_key("chat", reordered) == base
    assert cache_key("chat", body(max_tokens=64, stop=["b", "a"], stream=True, stream_options={"x": 1},
                                  user="u", metadata={"a": "b"}, seed=None, presence_penalty=0)) == base
    assert cache_key("chat", body(stop="a")) == cache_key("chat", body(stop=["a"]))
    parts = [{"role": "user", "content": [{"type": "text", "text": "Say hi"}]}]
    assert cache_key("chat", body(messages=parts)) == cache_key("chat", body())


@pytest.mark.parametrize("change", [
    {"messages": [{"role": "user", "content": "Say hi!"}]},
    {"messages": [{"role": "system", "content": "x"}, *MESSAGES]},
    {"seed": 1}, {"top_p": 0.5}, {"top_k": 5}, {"max_tokens": 10}, {"stop": ["x"]}, {"presence_penalty": 1},
    {"frequency_penalty": 0.5}, {"logit_bias": {"42": -100}}, {"response_format": {"type": "json_object"}},
    {"tools": [{"type": "function", "function": {"name": "f"}}]}, {"tool_choice": "none"},
    {"some_engine_option": 3},
])
def test_key_changes_with_anything_that_changes_the_answer(change: dict[str, Any]) -> None:
    assert cache_key("chat", body(**change)) != cache_key("chat", body())


def test_key_depends_on_route_and_endpoint() -> None:
    completion = {"prompt": "Say hi", "temperature": 0}
    assert cache_key("chat", body()) != cache_key("other", body())
    assert cache_key("chat", completion, endpoint="completions") != cache_key("chat", completion)
    assert cache_key("chat", completion, endpoint="completions") != \
        cache_key("chat", {**completion, "prompt": "Say ho"}, endpoint="completions")
    assert len(cache_key("chat", body()) or "") == 64


def test_answer_round_trips_and_rejects_other_bytes() -> None:
    for answer in (ANSWER, replace(ANSWER, reasoning="think", text="é ✓")):
        assert CachedAnswer.from_bytes(answer.to_bytes()) == answer
    for raw in (b"[]", b'{"v": 99}', b'{"v": 1, "model": "m"}', orjson.dumps({**orjson.loads(ANSWER.to_bytes()),
                                                                               "prompt_tokens": "3"})):
        with pytest.raises(ValueError):
            CachedAnswer.from_bytes(raw)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_memory_cache_expires_after_ttl() -> None:
    clock = FakeClock()
    cache = MemoryCache(max_entries=10, ttl_s=60, clock=clock)
    await cache.put("k", ANSWER)
    clock.now += 59.9
    assert await cache.get("k") == ANSWER
    clock.now += 0.1
    assert await cache.get("k") is None
    assert len(cache) == 0
    assert cache.backend == "memory" and cache.healthy


async def test_memory_cache_evicts_least_recently_used() -> None:
    cache = MemoryCache(max_entries=2, ttl_s=60, clock=FakeClock())
    await cache.put("a", ANSWER)
    await cache.put("b", ANSWER)
    assert await cache.get("a") is not None  # "b" is now the least recently used
    await cache.put("c", ANSWER)
    assert await cache.get("b") is None
    assert await cache.get("a") is not None and await cache.get("c") is not None
    await cache.close()
    assert len(cache) == 0


async def test_make_cache_follows_the_config() -> None:
    assert make_cache(CacheConfig(enabled=False)) is None
    memory = make_cache(CacheConfig(max_entries=5, ttl_s=9))
    assert isinstance(memory, MemoryCache) and memory.max_entries == 5 and memory.ttl_s == 9
    redis = make_cache(CacheConfig(redis_url="redis://127.0.0.1:1/0", redis_timeout_s=0.2))
    assert isinstance(redis, RedisCache) and redis.backend == "redis"
    await redis.close()
