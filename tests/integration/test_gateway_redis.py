"""The answer cache, token budgets and upstream health on a real redis-server: shared by replicas, and unharmed
by an outage."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from dataclasses import replace

import pytest

from tests.conftest import RedisServer
from tokometer.gateway.auth import hash_key
from tokometer.gateway.breaker import UpstreamHealth
from tokometer.gateway.budget import TokenBudgets
from tokometer.gateway.cache import CachedAnswer, RedisCache
from tokometer.gateway.config import KeyConfig
from tokometer.gateway.sharedstate import SharedHealth

# These replicas share state through Redis on a schedule (synchronised every 30 ms, settled after 150 ms,
# cooldowns of 0.3 s, a round trip under 5 ms): times that a host loaded by other tests can miss, so they run in
# the timing lane.
pytestmark = pytest.mark.timing

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
        # one timeout for all of them: 50 paid one after another would be 2.5 s; the bound leaves a busy
        # 2-core host (CI) its scheduling delays (0.26 s measured once with other tests running)
        assert time.perf_counter() - started < 1.0
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


async def test_closing_during_an_outage_leaves_no_catch_up_behind(redis_server: RedisServer) -> None:
    budgets = TokenBudgets(KEYS, "day", redis_url=redis_server.url, timeout_s=0.5, retry_after_s=RETRY_S)
    assert (await budgets.charge("team-a", 100)).used == 100
    redis_server.stop()
    await budgets.charge("team-a", 50)  # counted alone: a catch-up task waits for Redis
    assert budgets.pending == 50
    await budgets.close()  # its last hand-in fails too: nothing may be left running
    assert not [t for t in asyncio.all_tasks() if "_catch_up_loop" in repr(t.get_coro())]
    redis_server.start()


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


async def test_budget_tokens_counted_alone_reach_redis_without_more_traffic(redis_server: RedisServer) -> None:
    budgets = TokenBudgets(KEYS, "day", redis_url=redis_server.url, timeout_s=0.5, retry_after_s=RETRY_S)
    other = TokenBudgets(KEYS, "day", redis_url=redis_server.url, timeout_s=0.5)
    try:
        redis_server.stop()
        await asyncio.gather(*(budgets.charge("team-a", 100) for _ in range(3)))  # concurrent: none lost
        assert budgets.pending == 300
        redis_server.start()
        await asyncio.sleep(3 * RETRY_S)  # the background catch-up, with no charge to carry it
        assert budgets.pending == 0
        assert (await other.state("team-a")).used == 300
    finally:
        await budgets.close()
        await other.close()


def _replica(redis_server: RedisServer, cooldown_s: float = 0.3) -> tuple[dict[str, UpstreamHealth], SharedHealth]:
    health = {"up": UpstreamHealth(breaker_failures=2, breaker_cooldown_s=cooldown_s, window=4)}
    return health, SharedHealth(health, redis_server.url, timeout_s=0.5, sync_s=0.03, retry_after_s=RETRY_S)


SETTLE_S = 0.15  # a few synchronisation periods


async def test_a_breaker_opened_by_one_replica_is_seen_by_the_other(redis_server: RedisServer) -> None:
    (one, shared_one), (two, shared_two) = _replica(redis_server), _replica(redis_server)
    await shared_one.start()
    await shared_two.start()
    try:
        one["up"].failure("http_5xx: boom")
        one["up"].failure("http_5xx: boom")
        assert one["up"].state() == "open"
        await asyncio.sleep(SETTLE_S)
        assert two["up"].state() == "open" and not two["up"].allows()
        assert two["up"].last_error == "http_5xx: boom"
        await asyncio.sleep(0.3)  # the cooldown: both half-open, and only one replica may send the trial
        assert one["up"].state() == two["up"].state() == "half-open"
        assert not one["up"].allows() and not two["up"].allows()  # both would: each asks for the claim
        await asyncio.sleep(SETTLE_S)
        trial = [h["up"] for h in (one, two) if h["up"].allows()]
        assert len(trial) == 1
        trial[0].success(20.0)  # the trial succeeded: closed everywhere
        await asyncio.sleep(SETTLE_S)
        assert one["up"].state() == two["up"].state() == "closed"
        assert one["up"].allows() and two["up"].allows()
    finally:
        await shared_one.close()
        await shared_two.close()


async def test_slow_windows_hold_every_replicas_samples(redis_server: RedisServer) -> None:
    (one, shared_one), (two, shared_two) = _replica(redis_server), _replica(redis_server)
    await shared_one.start()
    await shared_two.start()
    try:
        one["up"].success(ttft_ms=500.0, tpot_ms=40.0)
        one["up"].success(ttft_ms=520.0, tpot_ms=40.0)
        assert two["up"].slow(150, None) is None  # nothing of its own yet
        await asyncio.sleep(SETTLE_S)
        assert two["up"].slow(150, None) == "recent TTFT p50 510 ms > 150 ms"
        assert list(two["up"].tpot_ms) == [40.0, 40.0]
        for _ in range(4):  # a full window of fast answers, seen by the other replica
            two["up"].success(ttft_ms=10.0)
        await asyncio.sleep(SETTLE_S)
        assert list(one["up"].ttft_ms) == [10.0] * 4 and one["up"].slow(150, None) is None
    finally:
        await shared_one.close()
        await shared_two.close()


async def test_health_without_redis_is_local_and_converges_when_it_is_back(redis_server: RedisServer) -> None:
    (one, shared_one), (two, shared_two) = _replica(redis_server, cooldown_s=30), _replica(redis_server, cooldown_s=30)
    await shared_one.start()
    await shared_two.start()
    try:
        redis_server.stop()
        one["up"].success(ttft_ms=700.0)
        one["up"].failure("timeout")
        one["up"].failure("timeout")
        await asyncio.sleep(SETTLE_S)
        assert not shared_one.link.healthy
        assert one["up"].state() == "open" and two["up"].state() == "closed"  # each on its own
        assert two["up"].allows()
        redis_server.start()  # empty: what the replicas kept is pushed again
        await asyncio.sleep(RETRY_S + SETTLE_S)
        assert shared_one.link.healthy and shared_two.link.healthy
        assert two["up"].state() == "open" and two["up"].last_error == "timeout"
        assert list(two["up"].ttft_ms) == [700.0]
    finally:
        await shared_one.close()
        await shared_two.close()


async def test_a_lone_replica_tries_half_open_upstreams_while_redis_is_down(redis_server: RedisServer) -> None:
    health, shared = _replica(redis_server, cooldown_s=0.1)
    await shared.start()
    try:
        redis_server.stop()
        health["up"].failure("x")
        health["up"].failure("x")
        await asyncio.sleep(0.15)
        assert health["up"].state() == "half-open" and health["up"].allows()  # no claim to wait for
    finally:
        await shared.close()
