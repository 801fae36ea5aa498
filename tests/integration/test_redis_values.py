"""What the gateway reads back from a real Redis that someone else wrote (a person with ``redis-cli``, another
program): a count, a time or a sample that is no number of its kind, or a key of another Redis type, is read
by one rule (`tokometer.gateway.redisvalues`) and costs one feature one entry, never a 500, a stopped gateway
or the whole store.

Before: a budget count of ``"abc"``, ``"nan"`` or ``"1e999"`` made the key's requests answer 500 (``int()`` of
it), and a charge on it, or a list at that key, marked Redis down for every key's budget, whose tokens then never
reached Redis while the broken one was retried; a rate window's count of ``"1e999"`` was a 500, ``"-50"`` gave
the key 50 requests more, a slot a year ahead refused the key with a ``Retry-After`` of a year; a breaker record
with an ``opened_at`` of ``"abc"`` or a sample ``"abc"`` stopped the gateway at its start with a ValueError, and a
``changed_at`` of ``"abc"`` turned the shared health off; a cached answer whose ``served_by`` was no Latin-1
text (an upstream named in Chinese did it without anyone's help) answered 500 on every hit.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import redis

from tests.conftest import RedisServer, SimServer, start_gateway
from tests.integration.test_gateway import _post, _upstream
from tokometer.gateway.auth import hash_key
from tokometer.gateway.breaker import UpstreamHealth
from tokometer.gateway.budget import TokenBudgets
from tokometer.gateway.cache import MAX_ENTRY_BYTES, CachedAnswer, RedisCache
from tokometer.gateway.config import KeyConfig
from tokometer.gateway.ratelimit import Limit, RateLimits
from tokometer.gateway.redisvalues import MAX_WHOLE
from tokometer.gateway.sharedload import SharedOutstanding
from tokometer.gateway.sharedstate import SharedHealth

NO_COUNTS = ["abc", "1e999", "nan", "-5", "1.5", " 7", "9" * 30, str(MAX_WHOLE + 1), ""]
"""Stored texts that are no count, no second and no millisecond."""
OTHER_TYPES = ["list", "hash", "set"]
DEADLINE_S = 5.0
"""Each Redis link's deadline here: what these tests check is the values, not the deadline; at 0.5 s a busy 2-core
host once left one link's answer late, and that replica went on without Redis (its count 0, not the 5 written)."""


@pytest.fixture
def store(redis_server: RedisServer) -> Iterator[redis.Redis]:
    """A plain client on the test's Redis: what someone else writes there."""
    client = redis.Redis.from_url(redis_server.url)
    yield client
    client.close()


def _replace(store: redis.Redis, key: str, value: str) -> None:
    """Put ``value`` at ``key``: a text, or an empty-ish key of the Redis type ``value`` names."""
    store.delete(key)
    if value == "list":
        store.rpush(key, "x")
    elif value == "hash":
        store.hset(key, "x", "1")
    elif value == "set":
        store.sadd(key, "x")
    else:
        store.set(key, value)


def _key(store: redis.Redis, pattern: str) -> str:
    keys: list[bytes] = store.keys(pattern)  # type: ignore[assignment]
    assert len(keys) == 1, keys
    return keys[0].decode()


# -- token budgets ------------------------------------------------------------------------------------------

KEYS = [KeyConfig(name=name, sha256=hash_key(name), tokens_per_period=1000) for name in ("team-a", "team-b")]


@pytest.mark.parametrize("broken", NO_COUNTS + OTHER_TYPES)
async def test_a_budget_count_that_is_none_is_replaced_by_the_replicas_own(
        redis_server: RedisServer, store: redis.Redis, broken: str, caplog: pytest.LogCaptureFixture) -> None:
    budgets = TokenBudgets(KEYS, "day", redis_server.url, timeout_s=DEADLINE_S)
    other = TokenBudgets(KEYS, "day", redis_server.url, timeout_s=DEADLINE_S)
    try:
        assert (await budgets.charge("team-a", 300)).used == 300
        key = _key(store, "tokometer:budget:team-a:*")
        _replace(store, key, broken)
        with caplog.at_level(logging.WARNING, "tokometer.gateway"):
            state = await budgets.state("team-a")  # was a ValueError (a 500) or Redis "down" for every key
        assert state.used == 300 and budgets.healthy
        assert store.get(key) == b"300" and store.ttl(key) > 0  # put right, and still expires
        assert f"Redis key {key} held" in caplog.text and "replaced by this replica's count, 300" in caplog.text
        assert (await budgets.charge("team-a", 7)).used == 307
        assert (await budgets.charge("team-b", 5)).used == 5 and budgets.pending == 0  # the other key: in Redis
        assert (await other.state("team-b")).used == 5 and (await other.state("team-a")).used == 307
    finally:
        await budgets.close()
        await other.close()


async def test_a_replica_that_saw_no_count_puts_back_0_and_the_biggest_count_holds(
        redis_server: RedisServer, store: redis.Redis) -> None:
    budgets = TokenBudgets(KEYS, "day", redis_server.url, timeout_s=DEADLINE_S)
    try:
        await budgets.charge("team-a", 1)
        key = _key(store, "tokometer:budget:team-a:*")
        fresh = TokenBudgets(KEYS, "day", redis_server.url, timeout_s=DEADLINE_S)
        try:
            store.set(key, "x" * 100_000)
            assert (await fresh.state("team-a")).used == 0  # a count lost, as in an outage
            store.set(key, str(MAX_WHOLE))
            state = await fresh.charge("team-a", 10)  # held at the largest count, not past what Lua counts exactly
            assert state.used == MAX_WHOLE and state.exceeded and store.get(key) == str(MAX_WHOLE).encode()
        finally:
            await fresh.close()
    finally:
        await budgets.close()


# -- rate limits --------------------------------------------------------------------------------------------

class _Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.5

    def __call__(self) -> float:
        return self.now


NOW = 1_700_000_000
LIMITS = (Limit("key:a", "requests", 3), Limit("key:a", "tokens", 100))


@pytest.mark.parametrize(("field", "count"), [
    *((str(NOW), bad) for bad in NO_COUNTS),
    *((bad, "1") for bad in NO_COUNTS),
    (str(NOW + 10**9), "5"),  # a slot 30 years ahead
    (str(NOW + 61), "5")])  # a slot more than a minute ahead
async def test_a_rate_window_entry_that_is_none_is_dropped(redis_server: RedisServer, store: redis.Redis,
                                                           field: str, count: str,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    limits = RateLimits(redis_server.url, timeout_s=DEADLINE_S, clock=_Clock())
    try:
        store.hset("tokometer:rate:key:a:requests", field, count)
        with caplog.at_level(logging.WARNING, "tokometer.gateway"):
            verdicts = [await limits.admit(LIMITS) for _ in range(4)]  # "1e999" was a ValueError: a 500
        assert [v.admitted for v in verdicts] == [True, True, True, False]  # "-50" let 50 more in
        assert verdicts[-1].headers()["retry-after"] == "60"  # not a year
        assert [v.standings[0].remaining for v in verdicts] == [2, 1, 0, 0]
        assert store.hgetall("tokometer:rate:key:a:requests") == {str(NOW).encode(): b"3"}
        assert "rate limits: deleted 1 entry" in caplog.text
        await limits.charge(LIMITS, 40)
        assert store.hgetall("tokometer:rate:key:a:tokens") == {str(NOW).encode(): b"40"}
    finally:
        await limits.close()


@pytest.mark.parametrize("kind", ["text", *OTHER_TYPES])
async def test_a_rate_window_of_another_type_is_dropped_not_redis(redis_server: RedisServer, store: redis.Redis,
                                                                  kind: str) -> None:
    limits = RateLimits(redis_server.url, timeout_s=DEADLINE_S, clock=_Clock())
    try:
        _replace(store, "tokometer:rate:key:a:requests", kind if kind != "text" else "3")
        verdict = await limits.admit(LIMITS)  # WRONGTYPE marked Redis down: each replica counted alone
        assert verdict.admitted and verdict.standings[0].remaining == 2
        assert store.hgetall("tokometer:rate:key:a:requests") == {str(NOW).encode(): b"1"}
    finally:
        await limits.close()


# -- shared health ------------------------------------------------------------------------------------------

HEALTH = "tokometer:health:up"


def _replica(redis_server: RedisServer, cooldown_s: float = 30, window: int = 4) -> tuple[UpstreamHealth, SharedHealth]:
    health = UpstreamHealth(breaker_failures=2, breaker_cooldown_s=cooldown_s, window=window)
    # synchronised by hand (sync_s is long): each step below is one round trip, not a schedule
    return health, SharedHealth({"up": health}, redis_server.url, timeout_s=DEADLINE_S, sync_s=60)


@pytest.mark.parametrize("record", [
    {"changed_at": "abc", "opened_at": "0"},
    {"changed_at": "1e999", "opened_at": "1"},
    {"changed_at": str(10**30), "opened_at": "1"},
    {"changed_at": "1", "opened_at": "abc"},
    {"changed_at": "1", "opened_at": "-5"}])
async def test_a_breaker_record_that_is_none_is_deleted(redis_server: RedisServer, store: redis.Redis,
                                                        record: dict[Any, Any],
                                                        caplog: pytest.LogCaptureFixture) -> None:
    store.hset(HEALTH, mapping=record)
    one, shared_one = _replica(redis_server)
    two, shared_two = _replica(redis_server)
    try:
        with caplog.at_level(logging.WARNING, "tokometer.gateway"):
            await shared_one.start()  # was a ValueError: the gateway did not start
        assert "shared health: Redis held a record of upstream up" in caplog.text
        assert shared_one.link.healthy and shared_one.syncs == 1 and one.state() == "closed"
        await shared_two.start()
        one.failure("http_5xx: boom")
        one.failure("http_5xx: boom")
        await shared_one.sync()
        await shared_two.sync()
        assert two.state() == "open" and two.last_error == "http_5xx: boom"  # shared again
    finally:
        await shared_one.close()
        await shared_two.close()


@pytest.mark.parametrize("key", [HEALTH, HEALTH + ":ttft", HEALTH + ":tpot"])
@pytest.mark.parametrize("kind", ["text", "set"])
async def test_a_health_key_of_another_type_is_deleted_not_redis(redis_server: RedisServer, store: redis.Redis,
                                                                 key: str, kind: str) -> None:
    _replace(store, key, kind if kind != "text" else "x")
    health, shared = _replica(redis_server)
    try:
        health.success(ttft_ms=30.0, tpot_ms=5.0)
        await shared.start()  # WRONGTYPE failed every synchronisation: the store read as down
        assert shared.link.healthy and shared.syncs == 1
        assert list(health.ttft_ms) == [30.0] and list(health.tpot_ms) == [5.0]
    finally:
        await shared.close()


async def test_samples_that_are_no_latency_are_left_out_of_the_window(redis_server: RedisServer,
                                                                      store: redis.Redis) -> None:
    # newest first, as LPUSH leaves them
    store.rpush(HEALTH + ":ttft", "7", "20.5", "abc", "nan", "inf", "-5", "1e999", "1_000", "0x10", "x" * 10_000)
    health, shared = _replica(redis_server, window=16)
    try:
        await shared.start()  # "abc" was a ValueError at the start, "nan" a NaN median
        assert list(health.ttft_ms) == [20.5, 7.0]
    finally:
        await shared.close()


async def test_a_circuit_said_to_open_in_the_future_opened_now(redis_server: RedisServer, store: redis.Redis) -> None:
    now_ms = int(time.time() * 1000)
    store.hset(HEALTH, mapping={"changed_at": now_ms + 1000, "opened_at": now_ms + 10**9, "reason": "r" * 10**6,
                                "trial": "elsewhere", "trial_until": "abc"})
    health, shared = _replica(redis_server, cooldown_s=0.5)
    try:
        await shared.start()
        assert health.state() == "open" and health.last_error == "r" * 200
        await asyncio.sleep(0.55)
        assert health.state() == "half-open"  # not in 11 days
        assert not health.allows()  # not before the claim: this asks for it
        await shared.sync()  # a claim whose expiry is no number is free
        assert health.allows()
    finally:
        await shared.close()


# -- shared requests in flight ------------------------------------------------------------------------------

@dataclass
class _Counts:
    in_flight: int = 0
    waiting: int = 0


async def test_in_flight_counts_that_are_none_are_dropped(redis_server: RedisServer, store: redis.Redis) -> None:
    now_ms = int(time.time() * 1000)
    store.hset("tokometer:outstanding:a", mapping={
        "ahead": f"5 {now_ms + 10**9}", "huge": f"5 {'9' * 400}", "fresh": f"2 {now_ms}", "text": "abc"})
    _replace(store, "tokometer:outstanding:b", "list")
    counts: dict[str, Any] = {"a": _Counts(), "b": _Counts()}
    shared = SharedOutstanding(counts, ["a", "b"], redis_server.url, timeout_s=DEADLINE_S, sync_s=60)
    try:
        await shared.start()
        assert shared.link.healthy and (shared.others("a"), shared.others("b")) == (2, 0)
        assert set(store.hkeys("tokometer:outstanding:a")) == {b"fresh", shared.replica.encode()}
    finally:
        await shared.close()


# -- the answer cache ---------------------------------------------------------------------------------------

ANSWER = CachedAnswer(model="m", text="hello", finish_reason="stop", prompt_tokens=5, completion_tokens=2,
                      served_by="primary", created=1_700_000_000)


def _entry(**changes: Any) -> bytes:
    return json.dumps({**json.loads(ANSWER.to_bytes()), **changes}).encode()


@pytest.mark.parametrize("stored", [
    _entry(prompt_tokens=-5), _entry(completion_tokens=True), _entry(prompt_tokens=2**70),
    _entry(created=-1), _entry(served_by="a\r\nset-cookie: x"), _entry(served_by=""), _entry(served_by="x" * 300),
    b"x" * (MAX_ENTRY_BYTES + 1), "list", "hash"])
async def test_a_cached_answer_that_is_none_is_a_miss(redis_server: RedisServer, store: redis.Redis,
                                                      stored: bytes | str) -> None:
    cache = RedisCache(redis_server.url, timeout_s=2)
    try:
        if isinstance(stored, str):
            _replace(store, "tokometer:cache:k", stored)
        else:
            store.set("tokometer:cache:k", stored)
        assert await cache.get("k") is None
        assert cache.healthy  # a list there marked Redis down for every cached answer
        await cache.put("k", ANSWER)
        assert await cache.get("k") == ANSWER  # written over
    finally:
        await cache.close()


# -- through a real gateway ---------------------------------------------------------------------------------

SECRET = "sk-redis-values-0123"


def test_a_gateway_answers_past_what_someone_wrote_into_its_redis(
        sim_factory: Callable[..., SimServer], redis_server: RedisServer, store: redis.Redis,
        tmp_path: pytest.TempPathFactory) -> None:
    sim = sim_factory("--ttft-ms", "1", "--itl-ms", "1")
    path = tmp_path / "gateway.toml"  # type: ignore[operator]
    path.write_text(_upstream("上游", sim, "sim-model") + '[[routes]]\nmodel = "chat"\nupstreams = ["上游"]\n'
                    + f'[[keys]]\nname = "team-a"\nsha256 = "{hash_key(SECRET)}"\ntokens_per_period = 100000\n'
                    + 'requests_per_minute = 100\n[cache]\nenabled = true\n'
                    + f'[replicas]\nredis_url = "{redis_server.url}"\nredis_timeout_s = 2\n')
    body = {"model": "chat", "max_tokens": 4, "temperature": 0, "messages": [{"role": "user", "content": "hi"}]}
    auth = {"Authorization": f"Bearer {SECRET}"}
    gw = start_gateway(path)
    try:
        assert _post(gw.openai_url + "/chat/completions", body, auth)[0] == 200
        redis_server.wait_for_keys(3)  # the budget's count, the rate window, the cached answer (written after)
        deadline = time.monotonic() + 10
        while not store.keys("tokometer:cache:*"):
            assert time.monotonic() < deadline
            time.sleep(0.02)
        budget = _key(store, "tokometer:budget:team-a:*")
        used = int(store.get(budget) or 0)
        store.set(budget, "abc")
        ahead = str(int(time.time()) + 3600)
        store.hset("tokometer:rate:key:team-a:requests", mapping={"1e999": "1", "abc": "nan", ahead: "1"})
        status, headers, _ = _post(gw.openai_url + "/chat/completions", body, auth)  # a cache hit
        assert status == 200 and headers["x-tokometer-cache"] == "hit"
        assert headers["x-tokometer-upstream"].encode("latin-1").decode() == "上游"
        status, headers, _ = _post(gw.openai_url + "/chat/completions", {**body, "max_tokens": 5}, auth)
        assert status == 200 and "x-tokometer-cache" not in headers
        assert headers["x-ratelimit-remaining-requests"] == "97"
    finally:
        gw.interrupt()
        try:
            output = gw.process.communicate(timeout=10)[0]
        finally:
            gw.wait_stopped()
    assert "Traceback" not in output and " 500" not in output
    assert f"Redis key {budget} held 'abc'" in output and f"replaced by this replica's count, {used:,}" in output
    assert int(store.get(budget) or 0) > used
