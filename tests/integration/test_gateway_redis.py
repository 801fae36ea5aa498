"""The answer cache and token budgets on a real redis-server: shared by replicas, and unharmed by an outage."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from dataclasses import replace

from tests.conftest import RedisServer
from tokometer.gateway.auth import hash_key
from tokometer.gateway.budget import TokenBudgets
from tokometer.gateway.cache import CachedAnswer, RedisCache
from tokometer.gateway.config import KeyConfig

ANSWER = CachedAnswer(model="m", text="hello", finish_reason="stop", prompt_tokens=5, completion_tokens=2,
                      served_by="primary", created=1_700_000_000, reasoning="r")
KEYS = [KeyConfig(name="team-a", sha256=hash_key("a"), tokens_per_period=1000)]
RETRY_S = 0.2  # back-off after a failure, short for the test


async def test_cache_is_shared_by_replicas_and_expires(redis_server: RedisServer) -> None:
    one = RedisCache(redis_server.url, ttl_s=0.3, timeout_s=0.5)
    two = RedisCache(redis_server.url, ttl_s=0.3, timeout_s=0.5)
    try:
        assert await two.get("k") is None
        await one.put("k", ANSWER)
        assert await two.get("k") == ANSWER
        assert one.healthy and two.healthy and one.backend == "redis"
        await asyncio.sleep(0.35)
        assert await two.get("k") is None
    finally:
        await one.close()
        await two.close()


async def test_cache_outage_is_a_miss_and_recovery_needs_no_restart(redis_server: RedisServer) -> None:
    cache = RedisCache(redis_server.url, ttl_s=60, timeout_s=0.5, retry_after_s=RETRY_S)
    try:
        await cache.put("k", ANSWER)
        assert await cache.get("k") == ANSWER
        redis_server.stop()
        started = time.perf_counter()
        assert await cache.get("k") is None  # the failing call
        assert not cache.healthy
        for _ in range(100):  # backed off: no network at all
            assert await cache.get("k") is None
            await cache.put("k", ANSWER)
        assert time.perf_counter() - started < 0.4
        assert not cache.healthy
        redis_server.start()  # the same port, empty
        await asyncio.sleep(RETRY_S)
        await cache.put("k2", ANSWER)  # the probe: it succeeds
        assert cache.healthy
        assert await cache.get("k2") == ANSWER
    finally:
        await cache.close()


async def test_a_hung_redis_costs_one_timeout_per_back_off(redis_server: RedisServer) -> None:
    assert redis_server.process is not None
    pid = redis_server.process.pid
    cache = RedisCache(redis_server.url, ttl_s=60, timeout_s=0.05, retry_after_s=RETRY_S)
    try:
        await cache.put("a", ANSWER)
        os.kill(pid, signal.SIGSTOP)  # accepts connections, answers nothing
        started = time.perf_counter()
        results = await asyncio.gather(*(cache.get("a") for _ in range(50)))
        assert results == [None] * 50 and not cache.healthy
        assert time.perf_counter() - started < 0.05 + 0.15  # one timeout for all of them
        os.kill(pid, signal.SIGCONT)
        await asyncio.sleep(RETRY_S)
        await cache.put("b", replace(ANSWER, text="bee"))
        assert (await cache.get("b") or ANSWER).text == "bee"  # no stale reply from the timed-out call
        assert await cache.get("a") == ANSWER and cache.healthy
    finally:
        os.kill(pid, signal.SIGCONT)
        await cache.close()


async def test_budgets_are_shared_by_replicas(redis_server: RedisServer) -> None:
    one = TokenBudgets(KEYS, "day", redis_url=redis_server.url, timeout_s=0.5)
    two = TokenBudgets(KEYS, "day", redis_url=redis_server.url, timeout_s=0.5)
    try:
        assert one.backend == "redis"
        await one.charge("team-a", 600)
        state = await two.charge("team-a", 500)
        assert state.used == 1100 and state.exceeded
        assert (await one.state("team-a")).used == 1100
    finally:
        await one.close()
        await two.close()


async def test_budgets_count_in_memory_while_redis_is_down(redis_server: RedisServer) -> None:
    budgets = TokenBudgets(KEYS, "day", redis_url=redis_server.url, timeout_s=0.5, retry_after_s=RETRY_S)
    other = TokenBudgets(KEYS, "day", redis_url=redis_server.url, timeout_s=0.5)
    try:
        assert (await budgets.charge("team-a", 700)).used == 700
        redis_server.stop()
        state = await budgets.charge("team-a", 200)  # counted on from the last total seen
        assert state.used == 900 and not budgets.healthy
        assert (await budgets.charge("team-a", 150)).exceeded
        redis_server.start()  # empty: the 700 are gone with it, the 350 charged meanwhile are not
        await asyncio.sleep(RETRY_S)
        assert (await budgets.state("team-a")).used == 350
        assert budgets.healthy
        assert (await other.state("team-a")).used == 350
    finally:
        await budgets.close()
        await other.close()


async def test_latency_on_loopback(redis_server: RedisServer) -> None:
    """Not a benchmark: a guard that a round trip stays far below the default 50 ms timeout."""
    cache = RedisCache(redis_server.url)
    try:
        await cache.put("k", ANSWER)
        started = time.perf_counter()
        for _ in range(200):
            assert await cache.get("k") == ANSWER
        per_get_ms = (time.perf_counter() - started) / 200 * 1000
        assert per_get_ms < 5, per_get_ms
    finally:
        await cache.close()
