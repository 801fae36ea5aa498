"""Routing by load through a real `tokometer gateway` in front of real simulators: an upstream kept busy by
requests the gateway never saw (sent to it directly) gets less, read from its own ``/metrics`` in each engine's
vocabulary; a prompt prefix sticks to one upstream, the same one in two gateway processes."""

from __future__ import annotations

import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import SimServer, start_gateway
from tests.integration.test_gateway import _post, gateway_factory

__all__ = ["gateway_factory"]  # the fixture, used by name


def _config(a: SimServer, b: SimServer, routing: str, extra: str = "") -> str:
    return (f'[[upstreams]]\nname = "a"\nurl = "{a.openai_url}"\nmodel = "sim-model"\n'
            f'[[upstreams]]\nname = "b"\nurl = "{b.openai_url}"\nmodel = "sim-model"\n'
            f'[[routes]]\nmodel = "chat"\nupstreams = ["a", "b"]\nrouting = "{routing}"\nscrape_interval_s = 0.1\n'
            f'{extra}[cache]\nenabled = false\n')


def _served_by(gw: SimServer, text: str = "hello") -> str:
    status, headers, _ = _post(gw.openai_url + "/chat/completions", {
        "model": "chat", "max_tokens": 2, "messages": [{"role": "user", "content": text}]})
    assert status == 200
    return headers["x-tokometer-upstream"]


@pytest.fixture
def busy() -> Iterator[Callable[[SimServer, int], None]]:
    """Keep ``n`` long requests running on a simulator, sent to it directly (the gateway never sees them)."""
    threads: list[threading.Thread] = []

    def make(sim: SimServer, n: int) -> None:
        def ask() -> None:
            _post(sim.openai_url + "/chat/completions", {"model": "sim-model", "max_tokens": 250, "messages": [
                {"role": "user", "content": "a long answer please"}]}, timeout=60)

        for _ in range(n):
            threads.append(threading.Thread(target=ask, daemon=True))
            threads[-1].start()

    yield make
    for thread in threads:
        thread.join(30)


@pytest.mark.timing  # the gateway's load readings must keep up: 2 of 8 went to the busy engine beside the other lanes
@pytest.mark.parametrize("names", ["vllm", "sglang", "llamacpp", "tgi"])
def test_least_load_sends_requests_away_from_an_engine_busy_with_others(
        sim_factory: Callable[..., SimServer], gateway_factory: Callable[[str], SimServer],
        busy: Callable[[SimServer, int], None], names: str) -> None:
    a = sim_factory("--ttft-ms", "5", "--itl-ms", "10", "--metrics-names", names)
    b = sim_factory("--ttft-ms", "5", "--itl-ms", "10", "--metrics-names", names)
    least_load = gateway_factory(_config(a, b, "least-load"))
    outstanding = gateway_factory(_config(a, b, "least-outstanding")) if names == "vllm" else None
    _served_by(least_load)  # the first request starts the readings
    busy(a, 6)  # a holds six 2.5-second answers it got from elsewhere
    deadline = time.monotonic() + 10
    while _metric(a, names) < 6 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.4)  # a few readings
    assert Counter(_served_by(least_load) for _ in range(8)) == {"b": 8}  # the busy one gets none
    if outstanding is not None:  # the gateway's own count cannot see that load: the list's first (a) gets them
        assert Counter(_served_by(outstanding) for _ in range(8)) == {"a": 8}


def _metric(sim: SimServer, names: str) -> float:
    running = {"vllm": "vllm:num_requests_running", "sglang": "sglang:num_running_reqs",
               "llamacpp": "llamacpp:requests_processing", "tgi": "tgi_batch_current_size"}[names]
    with urllib.request.urlopen(sim.root + "/metrics", timeout=10) as response:
        for line in response.read().decode().splitlines():
            if line.startswith(running):
                return float(line.rpartition(" ")[2])
    return 0.0


def test_a_metrics_endpoint_that_fails_falls_back_to_outstanding_requests(
        sim_factory: Callable[..., SimServer], gateway_factory: Callable[[str], SimServer]) -> None:
    a, b = sim_factory("--ttft-ms", "2", "--itl-ms", "1"), sim_factory("--ttft-ms", "2", "--itl-ms", "1")
    gw = gateway_factory(_config(a, b, "least-load").replace(
        'model = "sim-model"\n[[upstreams]]', 'model = "sim-model"\nmetrics_url = "http://127.0.0.1:9/metrics"\n'
        '[[upstreams]]', 1))
    assert {_served_by(gw) for _ in range(6)} <= {"a", "b"}  # answered: a's scrape fails, a is routed by count


def test_a_prefix_sticks_to_one_upstream_in_every_gateway_process(
        sim_factory: Callable[..., SimServer], tmp_path: Path) -> None:
    a, b = sim_factory("--ttft-ms", "2", "--itl-ms", "1"), sim_factory("--ttft-ms", "2", "--itl-ms", "1")
    path = tmp_path / "gateway.toml"
    path.write_text(_config(a, b, "prefix-affinity"))
    one, two = start_gateway(path), start_gateway(path)
    try:
        homes = {}
        for p in range(12):
            text = f"you are assistant number {p}; answer briefly"
            served = {_served_by(gw, text) for gw in (one, two, one, two)}
            assert len(served) == 1  # the same upstream, from either process, every time
            homes[p] = served.pop()
        assert set(homes.values()) == {"a", "b"}  # the prefixes are spread
    finally:
        one.stop()
        two.stop()
