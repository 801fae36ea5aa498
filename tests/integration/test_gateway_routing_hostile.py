"""Least-load routing reads each upstream's ``/metrics``: one that never answers, trickles, never ends or is not
metrics at all (real sockets, `tests.hostile_servers`) costs one bounded reading (a deadline of two intervals,
16 MiB), leaves no load behind, and the upstream is routed by its outstanding requests."""

from __future__ import annotations

import time

import pytest

from tests.hostile_servers import Answer, endless_body, hostile, json_answer, silent, trickle
from tokometer.gateway.balance import LoadBoard
from tokometer.gateway.config import RouteConfig, UpstreamConfig
from tokometer.gateway.upstream import Upstream

INTERVAL_S = 0.2


@pytest.mark.parametrize("answer", [silent, trickle(0.05), endless_body(b"text/plain"), json_answer({"a": 1})],
                         ids=["silent", "trickle", "endless", "not-metrics"])
async def test_a_hostile_metrics_endpoint_costs_one_bounded_reading(answer: Answer) -> None:
    with hostile({"/metrics": answer}) as server:
        upstream = Upstream(UpstreamConfig(name="a", url=server.url))
        route = RouteConfig(model="m", upstreams=["a"], routing="least-load", scrape_interval_s=INTERVAL_S)
        board = LoadBoard({"a": upstream}, [route])
        started = time.monotonic()
        await board._read("a", board.urls["a"])
        took = time.monotonic() - started
        await upstream.close()
    assert took < 2 * INTERVAL_S + 2.0  # the reading's deadline, with room for a loaded host
    assert "a" not in board.loads and board.failures["a"]  # no load believed; the reason kept for /health
    assert board.reading("a")["error"] == board.failures["a"]
