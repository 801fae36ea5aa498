"""Routing policies over a route's available upstreams: each policy's order from what the gateway knows."""

from __future__ import annotations

import time
from collections import Counter

from tokometer.gateway.balance import Balancer, Load, LoadBoard, metrics_url_of, prefix_of
from tokometer.gateway.config import RouteConfig, UpstreamConfig
from tokometer.gateway.upstream import Upstream

NAMES = ["a", "b", "c"]


def _setup(routing: str, **route: object) -> tuple[Balancer, dict[str, Upstream], RouteConfig]:
    upstreams = {n: Upstream(UpstreamConfig(name=n, url=f"http://127.0.0.1:{9000 + i}/v1"))
                 for i, n in enumerate(NAMES)}
    cfg = RouteConfig(model="m", upstreams=NAMES, routing=routing, **route)
    return Balancer(upstreams, LoadBoard(upstreams, [cfg])), upstreams, cfg


def _chat(text: str) -> dict[str, object]:
    return {"messages": [{"role": "system", "content": text}, {"role": "user", "content": "question"}]}


def test_ordered_keeps_the_list_and_round_robin_rotates() -> None:
    balancer, _, route = _setup("ordered")
    assert balancer.rank(route, NAMES, None) == NAMES
    balancer, _, route = _setup("round-robin")
    firsts = [balancer.rank(route, NAMES, None)[0] for _ in range(6)]
    assert firsts == ["a", "b", "c", "a", "b", "c"]


def test_least_outstanding_counts_in_flight_and_waiting() -> None:
    balancer, upstreams, route = _setup("least-outstanding")
    upstreams["a"].in_flight, upstreams["b"].in_flight, upstreams["b"].waiting = 3, 1, 1
    assert balancer.rank(route, NAMES, None) == ["c", "b", "a"]


def test_least_load_reads_the_engines_count_plus_what_was_sent_since() -> None:
    balancer, upstreams, route = _setup("least-load")
    now = time.monotonic()
    board = balancer.board
    board.loads["a"] = Load(held=8, kv_usage=0.2, at=now, in_flight_then=0)  # busy with others' requests
    board.loads["b"] = Load(held=1, kv_usage=0.9, at=now, in_flight_then=0)
    board.loads["c"] = Load(held=1, kv_usage=0.1, at=now, in_flight_then=0)
    assert balancer.rank(route, NAMES, None) == ["c", "b", "a"]  # ties on requests broken by the KV cache
    upstreams["c"].in_flight = 3  # sent since the reading: counted on top of it
    assert balancer.rank(route, NAMES, None) == ["b", "c", "a"]


def test_a_stale_or_missing_reading_falls_back_to_outstanding_requests() -> None:
    balancer, upstreams, route = _setup("least-load", scrape_interval_s=0.1)
    long_ago = time.monotonic() - 10
    balancer.board.loads["a"] = Load(held=0, kv_usage=0, at=long_ago, in_flight_then=0)  # stale: not used
    upstreams["a"].in_flight, upstreams["b"].in_flight, upstreams["c"].in_flight = 2, 1, 5
    assert balancer.rank(route, NAMES, None) == ["b", "a", "c"]


def test_prefix_affinity_sticks_spreads_and_gives_way_under_load() -> None:
    balancer, upstreams, route = _setup("prefix-affinity", affinity_slack=2)
    homes = {p: balancer.rank(route, NAMES, _chat(f"system prompt {p}"))[0] for p in range(60)}
    assert all(balancer.rank(route, NAMES, _chat(f"system prompt {p}"))[0] == homes[p] for p in range(60))
    assert set(Counter(homes.values())) == set(NAMES)  # prefixes spread over every upstream
    p, home = next(iter(homes.items()))
    upstreams[home].in_flight = 2  # within the slack: the prefix stays
    assert balancer.rank(route, NAMES, _chat(f"system prompt {p}"))[0] == home
    upstreams[home].in_flight = 3  # past it: the least busy takes it
    assert balancer.rank(route, NAMES, _chat(f"system prompt {p}"))[0] != home
    # an upstream that goes away moves only its own prefixes
    left = [n for n in NAMES if n != "c"]
    upstreams[home].in_flight = 0
    moved = [q for q, h in homes.items()
             if h != "c" and balancer.rank(route, left, _chat(f"system prompt {q}"))[0] != h]
    assert moved == []


def test_the_prefix_is_the_prompts_start_only() -> None:
    long = "x" * 1000
    assert prefix_of(_chat(long), 512) == prefix_of({"messages": [{"role": "system", "content": long + "tail"}]}, 512)
    assert prefix_of({"prompt": "abc"}, 2) == "ab"
    assert prefix_of({"messages": "not a list", "prompt": None}, 10) == ""


def test_the_metrics_url_is_the_origins_unless_set() -> None:
    up = Upstream(UpstreamConfig(name="a", url="http://10.0.0.1:8000/v1"))
    assert metrics_url_of(up) == "http://10.0.0.1:8000/metrics"
    assert metrics_url_of(Upstream(UpstreamConfig(name="a", url="http://h/v1", metrics_url="off"))) is None
    assert metrics_url_of(Upstream(UpstreamConfig(name="a", url="http://h/v1",
                                                  metrics_url="http://h:9/m"))) == "http://h:9/m"
