"""Gateway replicas sharing state through one real Redis: two real `tokometer gateway` processes (and one with
``--workers 2``) in front of real simulator upstreams."""

from __future__ import annotations

import json
import os
import signal
import time
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import RedisServer, SimServer, start_gateway, stop_all
from tests.integration.test_gateway import _chat, _metrics, _patch, _post, _upstream
from tokometer.gateway.auth import hash_key

# Each gateway here shares its state through Redis and gives Redis 50 ms to answer at start (then goes on
# without it): on a host loaded by other tests that deadline can pass, so these run in the timing lane.
pytestmark = pytest.mark.timing

SECRET = "replica-secret"
AUTH = {"Authorization": f"Bearer {SECRET}"}
SYNC = "sync_s = 0.05\n"


@pytest.fixture
def replicas(tmp_path: Path) -> Iterator[Callable[..., list[SimServer]]]:
    """Start gateway processes on one config: ``make(text, count=2, *args)``; all stopped at teardown."""
    started: list[SimServer] = []

    def make(text: str, count: int = 2, *args: str) -> list[SimServer]:
        path = tmp_path / "gateway.toml"
        path.write_text(text)
        servers = [start_gateway(path, *args) for _ in range(count)]
        started.extend(servers)
        return servers

    yield make
    stop_all(started)


def _two_upstreams(primary: SimServer, backup: SimServer, redis: RedisServer, route: str = "") -> str:
    return (_upstream("primary", primary, "big", "retries = 0\nbreaker_failures = 2\nbreaker_cooldown_s = 60")
            + _upstream("backup", backup, "small")
            + f'[[routes]]\nmodel = "chat"\nupstreams = ["primary", "backup"]\n{route}'
            + f'[cache]\nenabled = false\n[replicas]\nredis_url = "{redis.url}"\n{SYNC}')


def _served_by(gw: SimServer) -> str:
    status, headers, _ = _chat(gw, stream=True)
    assert status == 200
    return headers["x-tokometer-upstream"]


def _health(gw: SimServer) -> dict[str, Any]:
    with urllib.request.urlopen(gw.root + "/health", timeout=10) as response:
        data: dict[str, Any] = json.loads(response.read())
    return data


def _ask(gw: SimServer, max_tokens: int = 10) -> tuple[int, dict[str, str]]:
    status, headers, _ = _post(gw.openai_url + "/chat/completions", {
        "model": "chat", "max_tokens": max_tokens, "messages": [{"role": "user", "content": "a short question"}]},
        AUTH)
    return status, headers


def _budget_config(sim: SimServer, redis: RedisServer, tokens: int) -> str:
    return (_upstream("only", sim, "sim-model") + '[[routes]]\nmodel = "chat"\nupstreams = ["only"]\n'
            + f'[[keys]]\nname = "team-a"\nsha256 = "{hash_key(SECRET)}"\ntokens_per_period = {tokens}\n'
            + f'[cache]\nenabled = false\n[replicas]\nredis_url = "{redis.url}"\n{SYNC}')


def test_a_budget_spent_on_one_replica_is_refused_on_the_other(sim_factory: Callable[..., SimServer],
                                                               replicas: Callable[..., list[SimServer]],
                                                               redis_server: RedisServer) -> None:
    sim = sim_factory("--ttft-ms", "1", "--itl-ms", "1")
    a, b = replicas(_budget_config(sim, redis_server, 40))
    assert _ask(b, 5)[0] == 200  # B has spent some, under the limit
    assert _ask(a, 50)[0] == 200  # A spends the rest (an answer already under way is never cut)
    time.sleep(0.2)  # charged right after the answer
    assert _ask(b)[0] == 429  # refused on B: the count is the one in Redis
    assert _ask(a)[0] == 429
    assert len(sim.trace()) == 2  # the refused requests never reached the upstream
    assert _metrics(b.root)['tokometer_gateway_rejected_total{reason="budget"}'] == 1


def test_a_breaker_opened_through_one_replica_is_seen_by_the_other(sim_factory: Callable[..., SimServer],
                                                                   replicas: Callable[..., list[SimServer]],
                                                                   redis_server: RedisServer) -> None:
    primary = sim_factory("--model", "big", "--ttft-ms", "2", "--itl-ms", "1", "--fault", "http_500=1")
    backup = sim_factory("--model", "small", "--ttft-ms", "2", "--itl-ms", "1")
    a, b = replicas(_two_upstreams(primary, backup, redis_server))
    assert [_served_by(a), _served_by(a)] == ["backup", "backup"]  # two failures on the primary: open in A
    assert len(primary.trace()) == 2
    time.sleep(0.2)
    assert _health(b)["upstreams"]["primary"]["state"] == "open"
    assert [_served_by(b) for _ in range(3)] == ["backup"] * 3
    assert len(primary.trace()) == 2  # B never tried the primary
    assert 'tokometer_gateway_fallbacks_total{primary="primary",route="chat",upstream="backup"}' \
        in _metrics(b.root)


def test_one_replica_sends_the_half_open_trial_and_its_success_closes_the_circuit_everywhere(
        sim_factory: Callable[..., SimServer], replicas: Callable[..., list[SimServer]],
        redis_server: RedisServer) -> None:
    primary = sim_factory("--model", "big", "--ttft-ms", "2", "--itl-ms", "1", "--fault", "http_500=1")
    backup = sim_factory("--model", "small", "--ttft-ms", "2", "--itl-ms", "1")
    text = _two_upstreams(primary, backup, redis_server, "probe_interval_s = 0.1\n")
    a, b = replicas(text.replace("breaker_cooldown_s = 60", "breaker_cooldown_s = 1"))
    assert [_served_by(a), _served_by(a)] == ["backup", "backup"]  # open in A, then in B
    _patch(primary, {"faults": {}})  # recovered: only a trial will tell
    primary.clear_trace()
    time.sleep(0.2)
    assert _health(b)["upstreams"]["primary"]["state"] == "open"
    deadline = time.monotonic() + 10
    while {_health(gw)["upstreams"]["primary"]["state"] for gw in (a, b)} != {"closed"}:
        assert time.monotonic() < deadline, "the circuit never closed"
        time.sleep(0.05)
    assert len(primary.trace()) == 1  # one probe from one replica: the trial
    assert _served_by(b) == "primary"


def test_slow_answers_through_one_replica_make_the_other_fall_back(sim_factory: Callable[..., SimServer],
                                                                   replicas: Callable[..., list[SimServer]],
                                                                   redis_server: RedisServer) -> None:
    primary = sim_factory("--model", "big", "--ttft-ms", "300", "--itl-ms", "1")
    backup = sim_factory("--model", "small", "--ttft-ms", "2", "--itl-ms", "1")
    a, b = replicas(_two_upstreams(primary, backup, redis_server,
                                   "slow_ttft_ms = 150\nslow_window = 3\nprobe_interval_s = 30\n"))
    assert [_served_by(a), _served_by(a)] == ["primary", "primary"]  # slow, still answers: A's window fills
    assert _served_by(a) == "backup"
    time.sleep(0.2)
    assert _served_by(b) == "backup"  # B has served nothing, yet judges the primary on A's requests
    assert len(primary.trace()) == 2


def test_without_redis_each_replica_goes_on_alone_and_they_converge_after(
        sim_factory: Callable[..., SimServer], replicas: Callable[..., list[SimServer]],
        redis_server: RedisServer) -> None:
    primary = sim_factory("--model", "big", "--ttft-ms", "2", "--itl-ms", "1")
    backup = sim_factory("--model", "small", "--ttft-ms", "2", "--itl-ms", "1")
    text = _two_upstreams(primary, backup, redis_server)
    text += f'[[keys]]\nname = "team-a"\nsha256 = "{hash_key(SECRET)}"\ntokens_per_period = 40\n'
    a, b = replicas(text)
    assert _ask(a, 5)[0] == 200 and _ask(b, 5)[0] == 200
    redis_server.stop()
    _patch(primary, {"faults": {"http_500": 1.0}})
    assert [_ask(a)[1]["x-tokometer-upstream"] for _ in range(2)] == ["backup"] * 2  # open in A only
    assert _ask(a, 50)[0] == 200  # A's own count goes over the budget ...
    time.sleep(0.1)
    assert _ask(a)[0] == 429  # ... and A refuses
    assert _health(b)["upstreams"]["primary"]["state"] == "closed"  # B knows of neither
    primary.clear_trace()
    redis_server.start()  # empty
    time.sleep(1.0 + 0.4)  # the replicas' back-off after a failure (1 s), then a few synchronisations
    assert _health(b)["upstreams"]["primary"]["state"] == "open"  # A's breaker reached B
    status, _ = _ask(b)  # and so did A's tokens: refused, without B having served anything since
    assert status == 429
    assert primary.trace() == []  # B never tried the primary


def test_workers_share_one_port_and_one_budget(sim_factory: Callable[..., SimServer],
                                              replicas: Callable[..., list[SimServer]],
                                              redis_server: RedisServer) -> None:
    sim = sim_factory("--ttft-ms", "30", "--itl-ms", "1")
    (gw,) = replicas(_budget_config(sim, redis_server, 400), 1, "--workers", "2")
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: _ask(gw, 5), range(16)))
    assert {status for status, _ in answers} == {200}
    assert {headers["x-tokometer-worker"] for _, headers in answers} == {"0", "1"}  # both served
    values = _metrics(gw.root)  # every worker's counters, added up
    assert values['tokometer_gateway_requests_total{route="chat",status="200",upstream="only"}'] == 16
    assert _ask(gw, 400)[0] == 200
    time.sleep(0.2)
    with ThreadPoolExecutor(8) as pool:
        refused = list(pool.map(lambda _: _ask(gw)[0], range(8)))
    assert refused == [429] * 8  # whichever worker took them
    # a worker that dies is replaced; the port keeps answering
    children = Path(f"/proc/{gw.process.pid}/task/{gw.process.pid}/children")
    pids = children.read_text().split()
    assert len(pids) == 2
    os.kill(int(pids[0]), signal.SIGKILL)
    deadline = time.monotonic() + 10
    while len(set(children.read_text().split()) - {pids[0]}) < 2:
        assert time.monotonic() < deadline, "the dead worker was not replaced"
        time.sleep(0.05)
    workers = children.read_text().split()
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: _ask(gw), range(8)))
    assert {status for status, _ in answers} == {429}
    gw.stop()  # SIGINT: the supervisor stops its workers, and is gone only after them
    assert gw.process.returncode == 0
    assert not any(Path(f"/proc/{pid}").exists() for pid in workers)
