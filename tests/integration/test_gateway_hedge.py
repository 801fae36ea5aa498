"""Hedged requests against real upstreams: `tokometer sim` processes with a slow first token behind a real
gateway process; the simulators' traces say which request was cancelled, and when."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import SimServer
from tests.integration.gateway_streams import Streamed, gateway_factory, metrics, patch_sim, stream_chat, upstream
from tokometer.gateway.auth import hash_key

__all__ = ["gateway_factory"]  # the fixture, used by name

# Every test here checks a time against the simulators' scripted ones (a hedge 200 ms in, the winner's TTFT within
# 0.4 s of its deadline): in the timing lane. Beside the other lanes on 2 cores the backup once answered after the
# primary's scripted 2 s (the primary won the race it should lose).
pytestmark = pytest.mark.timing

_ASK = {"model": "chat", "messages": [{"role": "user", "content": "a quick question"}], "max_tokens": 8,
        "stream_options": {"include_usage": True}}
_NS = 1e9


def _hedged_config(primary: SimServer, backup: SimServer, route: str, tail: str = "") -> str:
    return (upstream("primary", primary, "big", "retries = 0") + upstream("backup", backup, "small") +
            f'[[routes]]\nmodel = "chat"\nupstreams = ["primary", "backup"]\n{route}\n[cache]\nenabled = false\n'
            + tail)


@pytest.mark.parametrize("late", ["first_token", "response_head"])
def test_a_late_primary_is_hedged_and_the_hedge_wins(sim_factory: Callable[..., SimServer],
                                                     gateway_factory: Callable[[str], SimServer],
                                                     tmp_path: Path, late: str) -> None:
    """Late with its first token (the response head came at once), or with the whole response (no head yet:
    the cancel must reach a request still waiting for its head)."""
    slow = ["--ttft-ms", "2000"] if late == "first_token" else ["--ttft-ms", "5", "--fault", "slow_first_byte=1",
                                                                 "--slow-first-byte-ms", "2000"]
    primary = sim_factory("--model", "big", "--itl-ms", "2", *slow)
    backup = sim_factory("--model", "small", "--ttft-ms", "50", "--itl-ms", "2")
    log = tmp_path / "requests.jsonl"
    secret = "team-a-secret"
    gw = gateway_factory(_hedged_config(primary, backup, 'hedge_after = "200ms"',
                                        f'[[keys]]\nname = "team-a"\nsha256 = "{hash_key(secret)}"\n'
                                        f'tokens_per_period = 1000\n[log]\npath = "{log}"\n'))
    out = stream_chat(gw.openai_url, _ASK, headers={"Authorization": f"Bearer {secret}"})
    assert out.status == 200 and out.dones == 1 and not out.errors
    assert out.headers["x-tokometer-upstream"] == "backup" and out.headers["x-tokometer-hedge"] == "hedge"
    assert len(out.text.split()) == 8 and out.usages[0]["completion_tokens"] == 8
    assert 0.2 + 0.05 <= out.ttft_s < 0.2 + 0.05 + 0.4  # the deadline, then the backup's TTFT (and some slack)
    lost, won = primary.trace()[-1], backup.trace()[-1]
    assert lost["event_ns"] == [] and lost["disconnected_ns"]  # the primary sent nothing and saw the cancel ...
    cancelled_after = (lost["disconnected_ns"] - lost["received_ns"]) / _NS
    assert 0.2 <= cancelled_after < 0.2 + 0.05 + 0.4  # ... as soon as the hedge won, long before its 2 s TTFT
    assert won["completion_tokens"] == 8 and not won["disconnected"]
    values = metrics(gw.root)
    assert values['tokometer_gateway_hedges_total{outcome="hedge",route="chat"}'] == 1
    assert values['tokometer_gateway_tokens_total{route="chat",type="output",upstream="backup"}'] == 8
    assert not any('upstream="primary"' in name and name.startswith("tokometer_gateway_tokens_total")
                   for name in values)  # only the winner's tokens count ...
    assert values['tokometer_gateway_requests_total{route="chat",status="200",upstream="backup"}'] == 1
    gw.api_key = secret  # /health shows timings to a key holder
    health = json.loads(gw.call("/health"))
    assert health["upstreams"]["primary"]["state"] == "closed"  # cancelled, not failed
    assert health["upstreams"]["primary"]["ttft_p50_ms"] >= 200  # it was at least that slow
    gw.stop()
    [line] = [json.loads(line) for line in log.read_text().splitlines()]
    assert line["upstream"] == "backup" and line["hedge"] == "hedge" and line["completion_tokens"] == 8
    assert line["key"] == "team-a" and line["prompt_tokens"] == 3  # ... and are billed, once
    assert line["overhead_ms"] is None  # the wait for the deadline is the route's policy, not gateway overhead
    assert line["upstream_ttft_ms"] < line["ttft_ms"] - 150  # the backup's own TTFT, from the hedge's send


def test_the_primary_can_still_win_the_race(sim_factory: Callable[..., SimServer],
                                            gateway_factory: Callable[[str], SimServer]) -> None:
    primary = sim_factory("--model", "big", "--ttft-ms", "400", "--itl-ms", "2")
    backup = sim_factory("--model", "small", "--ttft-ms", "3000", "--itl-ms", "2")
    gw = gateway_factory(_hedged_config(primary, backup, 'hedge_after = "100ms"'))
    out = stream_chat(gw.openai_url, _ASK)
    assert out.status == 200 and out.dones == 1 and len(out.text.split()) == 8
    assert out.headers["x-tokometer-upstream"] == "primary" and out.headers["x-tokometer-hedge"] == "primary"
    assert 0.4 <= out.ttft_s < 0.4 + 0.4
    hedge = backup.trace()[-1]
    assert hedge["event_ns"] == [] and hedge["disconnected_ns"]  # the hedge was sent, then cancelled
    assert 0.25 <= (hedge["disconnected_ns"] - hedge["received_ns"]) / _NS < 0.3 + 0.4
    values = metrics(gw.root)
    assert values['tokometer_gateway_hedges_total{outcome="primary",route="chat"}'] == 1
    assert values['tokometer_gateway_tokens_total{route="chat",type="output",upstream="primary"}'] == 8
    assert not any('upstream="backup"' in name and name.startswith("tokometer_gateway_tokens_total")
                   for name in values)


def test_percentile_deadline_needs_samples_and_has_a_floor(sim_factory: Callable[..., SimServer],
                                                           gateway_factory: Callable[[str], SimServer]) -> None:
    primary = sim_factory("--model", "big", "--ttft-ms", "300", "--itl-ms", "1")
    backup = sim_factory("--model", "small", "--ttft-ms", "20", "--itl-ms", "1")
    gw = gateway_factory(_hedged_config(primary, backup, 'hedge_after = "p50"\nhedge_min_ms = 100'))
    out = stream_chat(gw.openai_url, _ASK)  # no TTFTs known yet: no hedge, however slow the primary
    assert out.headers["x-tokometer-upstream"] == "primary" and "x-tokometer-hedge" not in out.headers
    assert out.ttft_s >= 0.3
    patch_sim(primary, {"ttft_ms": 10})
    for _ in range(4):  # five samples now: 300, 10, 10, 10, 10 ms; p50 is 10 ms, under the 100 ms floor
        assert "x-tokometer-hedge" not in stream_chat(gw.openai_url, _ASK).headers
    patch_sim(primary, {"ttft_ms": 2000})
    out = stream_chat(gw.openai_url, _ASK)
    assert out.headers["x-tokometer-hedge"] == "hedge" and out.headers["x-tokometer-upstream"] == "backup"
    assert 0.1 + 0.02 <= out.ttft_s < 0.1 + 0.02 + 0.4  # the 100 ms floor, then the backup's 20 ms


def test_hedge_budget_bounds_the_races_under_load(sim_factory: Callable[..., SimServer],
                                                  gateway_factory: Callable[[str], SimServer]) -> None:
    """Four requests at once to a primary that is slow for all of them: with hedge_budget = 0.25, one race at
    a time (a quarter of four in flight); the other three wait for the primary and are counted over budget."""
    primary = sim_factory("--model", "big", "--ttft-ms", "1000", "--itl-ms", "1")
    backup = sim_factory("--model", "small", "--ttft-ms", "400", "--itl-ms", "1")
    gw = gateway_factory(_hedged_config(primary, backup, 'hedge_after = "100ms"\nhedge_budget = 0.25'))
    results: list[Streamed] = []
    threads = [threading.Thread(target=lambda: results.append(stream_chat(gw.openai_url, _ASK))) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(results) == 4 and all(r.status == 200 and r.dones == 1 for r in results)
    assert sorted(r.headers["x-tokometer-upstream"] for r in results) == ["backup", "primary", "primary", "primary"]
    values = metrics(gw.root)
    assert values['tokometer_gateway_hedges_total{outcome="hedge",route="chat"}'] == 1
    assert values['tokometer_gateway_hedges_total{outcome="over_budget",route="chat"}'] == 3
    assert len(backup.trace()) == 1
