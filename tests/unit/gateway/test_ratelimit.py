"""Rate limits over a sliding minute: the window's arithmetic against a clock the test moves, in memory and in a
real Redis (the same Lua script the gateway runs), and the headers a client reads."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import RedisServer
from tokometer.gateway.ratelimit import WINDOW_S, Limit, RateLimits


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


RPM = Limit("key:team-a", "requests", 3)
TPM = Limit("route:chat", "tokens", 100)


def _limits(clock: Clock, redis: RedisServer | None) -> RateLimits:
    return RateLimits(None if redis is None else redis.url, timeout_s=2.0, clock=clock)


@pytest.fixture(params=["memory", "redis"])
def backend(request: pytest.FixtureRequest) -> RedisServer | None:
    return None if request.param == "memory" else request.getfixturevalue("redis_server")


async def test_requests_slide_out_of_the_window_a_second_at_a_time(backend: RedisServer | None) -> None:
    clock = Clock(1_000_000.25)
    rates = _limits(clock, backend)
    for step in range(3):  # three requests at t = 0, 10, 20 s: each let in
        verdict = await rates.admit([RPM])
        assert verdict.admitted and verdict.standings[0].remaining == 2 - step
        clock.now += 10
    refused = await rates.admit([RPM])  # t = 30 s: the window holds three
    assert not refused.admitted and refused.refused_by is not None
    # the first request's second (1,000,000) is in the window until second 1,000,060 begins
    assert refused.refused_by.room_s == pytest.approx(1_000_060 - clock.now)
    headers = refused.headers()
    assert headers["retry-after"] == "30" and headers["x-ratelimit-remaining-requests"] == "0"
    assert headers["x-ratelimit-limit-requests"] == "3" and headers["x-ratelimit-reset-requests"] == "49.75s"
    assert "3 of 3 requests" in refused.message() and "key 'team-a'" in refused.message()
    clock.now = 1_000_059.99
    assert not (await rates.admit([RPM])).admitted  # still inside the minute of the first
    clock.now = 1_000_060.0
    assert (await rates.admit([RPM])).admitted  # the first one's second has left the window
    await rates.close()


async def test_tokens_are_counted_after_the_answer_and_refuse_the_next(backend: RedisServer | None) -> None:
    clock = Clock()
    rates = _limits(clock, backend)
    both = [RPM, TPM]
    assert (await rates.admit(both)).admitted
    await rates.charge(both, 120)  # one answer overshoots the token limit (counted after it)
    refused = await rates.admit(both)
    assert not refused.admitted
    assert refused.refused_by is not None and refused.refused_by.limit == TPM
    assert refused.headers()["x-ratelimit-remaining-tokens"] == "0"
    assert "120 of 100 tokens" in refused.message() and "route 'chat'" in refused.message()
    # a refused request is not counted: the request limit still has two left
    clock.now += WINDOW_S + 1
    verdict = await rates.admit(both)
    assert verdict.admitted and {s.limit.kind: s.remaining for s in verdict.standings} == {"requests": 2,
                                                                                            "tokens": 100}
    await rates.close()


async def test_a_redis_that_is_down_leaves_each_replica_counting_alone() -> None:
    clock = Clock()
    rates = RateLimits("redis://127.0.0.1:1/0", timeout_s=0.05, clock=clock)  # nothing listens there
    assert [(await rates.admit([RPM])).admitted for _ in range(4)] == [True, True, True, False]
    await rates.close()


async def test_replicas_share_one_window_through_redis(redis_server: RedisServer) -> None:
    clock = Clock()
    a, b = _limits(clock, redis_server), _limits(clock, redis_server)
    assert (await a.admit([RPM])).admitted and (await b.admit([RPM])).admitted and (await a.admit([RPM])).admitted
    assert not (await b.admit([RPM])).admitted
    await a.close()
    await b.close()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0, 300, allow_nan=False), max_size=60), st.integers(1, 5))
def test_no_minute_ever_holds_more_than_the_limit(times: list[float], per_minute: int) -> None:
    """Whatever the arrivals, the requests let in during any window of 60 whole seconds are at most the limit;
    and one is refused only when the window it arrived in was full."""
    clock = Clock(0.0)
    rates = RateLimits(clock=clock)
    limit = Limit("key:k", "requests", per_minute)
    admitted: list[int] = []
    for t in sorted(times):
        clock.now = 1_000_000.0 + t
        second = int(clock.now)
        in_window = sum(1 for s in admitted if s > second - WINDOW_S)
        verdict = asyncio.run(rates.admit([limit]))
        assert verdict.admitted == (in_window < per_minute)
        if verdict.admitted:
            admitted.append(second)
