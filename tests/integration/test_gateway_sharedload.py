"""Requests in flight shared by gateway replicas through a real Redis (`tokometer.gateway.sharedload`): the
exchange itself against a real redis-server, and two real gateway processes routing least-outstanding."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from redis.asyncio import Redis

from tests.conftest import RedisServer, SimServer
from tests.integration.test_gateway import _post, _upstream
from tests.integration.test_gateway_replicas import replicas  # noqa: F401  (a fixture)
from tokometer.gateway.redislink import RedisUnavailable
from tokometer.gateway.sharedload import SharedOutstanding


@dataclass
class _Counts:
    """The two counts `SharedOutstanding` reads of an upstream (a stand-in for `Upstream`: only these matter)."""

    in_flight: int = 0
    waiting: int = 0


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _pair(url: str, clock: _Clock | None = None) -> tuple[SharedOutstanding, SharedOutstanding,
                                                          dict[str, _Counts], dict[str, _Counts]]:
    mine = {"a": _Counts(), "b": _Counts()}
    theirs = {"a": _Counts(), "b": _Counts()}
    kwargs: dict[str, Any] = {"timeout_s": 0.5, "sync_s": 0.05}
    if clock is not None:
        kwargs["monotonic"] = clock
    one = SharedOutstanding(mine, ["a", "b"], url, **kwargs)  # type: ignore[arg-type]
    two = SharedOutstanding(theirs, ["a", "b"], url, **kwargs)  # type: ignore[arg-type]
    return one, two, mine, theirs


async def test_each_replica_reads_the_others_counts_not_its_own(redis_server: RedisServer) -> None:
    one, two, mine, theirs = _pair(redis_server.url)
    try:
        mine["a"].in_flight, mine["a"].waiting, theirs["b"].in_flight = 3, 2, 4
        await one.sync()
        await two.sync()
        await one.sync()
        assert (one.others("a"), one.others("b")) == (0, 4)
        assert (two.others("a"), two.others("b")) == (5, 0)
        mine["a"].in_flight, mine["a"].waiting = 0, 0
        await one.sync()
        await two.sync()
        assert two.others("a") == 0
    finally:
        await one.close()
        await two.close()


async def test_a_closed_replica_leaves_nothing_and_a_dead_one_is_forgotten(redis_server: RedisServer) -> None:
    one, two, mine, theirs = _pair(redis_server.url)
    three = SharedOutstanding(theirs, ["a", "b"], redis_server.url, timeout_s=0.5,  # type: ignore[arg-type]
                              sync_s=0.05, wall=lambda: time.time() - 60)  # writes as of a minute ago: stale
    try:
        mine["a"].in_flight = 7
        await one.sync()
        await one.close()  # deletes its fields
        theirs["a"].in_flight = 2
        await three.sync()  # a replica whose last word is older than the stale age (it died): not counted
        await two.sync()
        assert two.others("a") == 0
    finally:
        await two.close()
        await three.close()


async def test_a_hand_written_field_is_deleted_not_counted(redis_server: RedisServer) -> None:
    one, two, _mine, _theirs = _pair(redis_server.url)
    client = Redis.from_url(redis_server.url)
    try:
        now_ms = int(time.time() * 1000)
        for field, value in (("x", "not a count"), ("y", f"-3 {now_ms}"), ("z", f"99999999999 {now_ms}"),
                             ("w", f"2 {now_ms}")):
            await client.hset("tokometer:outstanding:a", field, value)
        await one.sync()
        assert one.others("a") == 2  # only the well-formed, fresh, plausible field
        assert await client.hkeys("tokometer:outstanding:a") == [b"w", one.replica.encode()]
    finally:
        await client.aclose()
        await one.close()
        await two.close()


async def test_while_redis_is_down_each_replica_counts_alone(redis_server: RedisServer) -> None:
    clock = _Clock()
    one, two, mine, _theirs = _pair(redis_server.url, clock)
    try:
        mine["b"].in_flight = 6
        await one.sync()
        await two.sync()
        assert two.others("b") == 6
        redis_server.stop()
        with pytest.raises(RedisUnavailable):
            await two.sync()
        assert two.others("b") == 6  # the last reading, until it is stale
        clock.now += two.stale_s + 0.01
        assert two.others("b") == 0
    finally:
        redis_server.start()
        await one.close()
        await two.close()


def _others_in_flight(gw: SimServer, name: str) -> int:
    with urllib.request.urlopen(gw.root + "/health", timeout=10) as response:
        data: dict[str, Any] = json.loads(response.read())
    value: int = data["upstreams"][name].get("others_in_flight", -1)
    return value


def _ask(gw: SimServer, model: str) -> tuple[int, dict[str, str]]:
    status, headers, _ = _post(gw.openai_url + "/chat/completions", {
        "model": model, "max_tokens": 2, "messages": [{"role": "user", "content": "a short question"}]})
    return status, headers


@pytest.mark.timing  # a replica gives Redis 50 ms at start, as the other replica tests do
def test_a_replica_routes_away_from_an_upstream_another_replica_keeps_busy(
        sim_factory: Callable[..., SimServer], replicas: Callable[..., list[SimServer]],  # noqa: F811
        redis_server: RedisServer) -> None:
    # a's 2 s first token keeps the first replica's three requests in flight while the second sees them through Redis
    # (0.10-0.18 s on the 2-core AMD EPYC VM) and sends its three (20 ms each): under a fifth of it
    slow = sim_factory("--ttft-ms", "2000", "--itl-ms", "1")
    fast = sim_factory("--ttft-ms", "20", "--itl-ms", "1")
    config = (_upstream("a", slow, "sim-model") + _upstream("b", fast, "sim-model")
              + '[[routes]]\nmodel = "pinned"\nupstreams = ["a"]\n'
              + '[[routes]]\nmodel = "chat"\nupstreams = ["a", "b"]\nrouting = "least-outstanding"\n'
              + f'[cache]\nenabled = false\n[replicas]\nredis_url = "{redis_server.url}"\nsync_s = 0.05\n')
    first, second = replicas(config)
    assert _ask(second, "chat")[1]["x-tokometer-upstream"] == "a"  # nothing in flight: the list's first
    held = [threading.Thread(target=_ask, args=(first, "pinned")) for _ in range(3)]
    for thread in held:
        thread.start()
    deadline = time.monotonic() + 3
    while _others_in_flight(second, "a") < 3:  # the first replica's three, as Redis said
        assert time.monotonic() < deadline, "the other replica's requests in flight never showed"
        time.sleep(0.02)
    served = {_ask(second, "chat")[1]["x-tokometer-upstream"] for _ in range(3)}
    assert served == {"b"}  # alone this replica saw a and b idle and would have sent them to a
    for thread in held:
        thread.join()
    deadline = time.monotonic() + 3
    while _others_in_flight(second, "a") != 0:
        assert time.monotonic() < deadline, "finished requests still counted"
        time.sleep(0.02)


def test_the_exchange_runs_in_the_background(redis_server: RedisServer) -> None:
    async def main() -> int:
        counts = {"a": _Counts(in_flight=1)}
        shared = SharedOutstanding(counts, ["a"], redis_server.url, timeout_s=0.5, sync_s=0.02)  # type: ignore
        await shared.start()
        await asyncio.sleep(0.3)
        syncs = shared.syncs
        await shared.close()
        return syncs

    assert asyncio.run(main()) >= 3
