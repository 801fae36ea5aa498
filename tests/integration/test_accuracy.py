"""Measured TTFT / TPOT / ITL against the simulator's own record of what it sent and when.

The simulator stamps every content event just before writing it (perf_counter_ns,
CLOCK_MONOTONIC: the same clock as the client), so each request has a known truth: its TTFT from the
client's send stamp to the simulator's first event (the request's way to the simulator on loopback is the
host's: on the Intel Xeon VM 1-4 ms at the median in a busy timing lane, 2026-12-07, where a truth counted
from the simulator's receipt failed the 3 ms bound by a millisecond).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.conftest import SimServer
from tests.helpers import bench, median

MS = 1e6
OUTPUT = 64
"""Tokens an answer: TPOT is read over 63 gaps of 5 ms. Measured on the 2-core AMD EPYC VM, 2 runs of each test:
TPOT p50 within 0.18 % of the truth and of 5 ms at 64 tokens (0.11 % at 128) against the 3 % asserted; TTFT, which
the answer's length does not touch, within 0.4-1.5 ms of the truth (0.9-2.4 ms at 128) against 3 ms."""


def _truth(trace: dict[str, Any], sent_ns: int) -> tuple[float, float]:
    """A request's true TTFT as its client sees it (from the client's send to the simulator's first event: the
    simulator's own TTFT plus the request's way to it on loopback, which is the host's, 1-15 ms at p99 on a noisy
    VM) and its true TPOT."""
    events, tokens = trace["event_ns"], trace["event_tokens"]
    ttft = (events[0] - sent_ns) / MS
    tpot = (events[-1] - events[0]) / (sum(tokens) - tokens[0]) / MS
    return ttft, tpot


class _Checked:
    def __init__(self, summary: Any, delivery_ms: float) -> None:
        self.summary, self.delivery_ms = summary, delivery_ms
        """The median time from the client's send to the simulator's receipt (loopback: the host's)."""


def _check(sim: SimServer, n: int = 12) -> _Checked:
    sim.clear_trace()
    result = bench(sim.openai_url, concurrency=[1], requests=n, input_tokens=16, output_tokens=OUTPUT)
    step = result.steps[0]
    traces = sim.trace()
    assert len(traces) == n and step.summary.requests_completed == n
    truths = [_truth(t, r.sent_ns) for t, r in zip(traces, step.records, strict=True)]
    for record, trace in zip(step.records, traces, strict=True):
        # Same clock on both sides: the client stamps before the server receives, and each
        # token after the server sent it (the bound is loose: a busy 2-core CI machine can
        # delay one wake-up by several ms; the p50 checks below are the accuracy claim).
        assert record.sent_ns < trace["received_ns"]
        assert 0 < record.first_token_ns - trace["event_ns"][0] < 20 * MS
        assert 0 < record.last_token_ns - trace["event_ns"][-1] < 20 * MS
    assert step.summary.ttft_ms.p50 == pytest.approx(median([t for t, _ in truths]), abs=3.0)
    assert step.summary.tpot_ms.p50 == pytest.approx(median([p for _, p in truths]), rel=0.03)
    assert step.summary.output_tokens_total == OUTPUT * n
    delivery_ms = median([(t["received_ns"] - r.sent_ns) / MS for t, r in zip(traces, step.records, strict=True)])
    assert delivery_ms < 10, delivery_ms  # (a client that stamped its send long before writing would show here)
    return _Checked(step.summary, delivery_ms)


@pytest.mark.timing  # within 3 ms and 3 % of the truth: a time, lost on a host busy with other tests
def test_ttft_and_tpot_match_the_simulators_send_times(sim_factory: Callable[..., SimServer]) -> None:
    checked = _check(sim_factory("--ttft-ms", "100", "--itl-ms", "5"))
    summary = checked.summary
    assert summary.ttft_ms.p50 == pytest.approx(100.0 + checked.delivery_ms, abs=3.0)  # scripted from its receipt
    assert summary.tpot_ms.p50 == pytest.approx(5.0, rel=0.03)
    assert summary.decode_speed_tok_s.p50 == pytest.approx(200.0, rel=0.03)
    assert summary.output_tokens_source == {"usage": 12}


@pytest.mark.timing  # within 3 ms and 3 % of the truth: a time, lost on a host busy with other tests
def test_four_tokens_per_event_keeps_tpot_and_normalises_itl(sim_factory: Callable[..., SimServer]) -> None:
    summary = _check(sim_factory("--ttft-ms", "100", "--itl-ms", "5", "--tokens-per-event", "4")).summary
    assert summary.tpot_ms.p50 == pytest.approx(5.0, rel=0.03)
    assert summary.itl_ms.mean == pytest.approx(5.0, rel=0.03)  # each 20 ms gap carries 4 tokens
    assert summary.chunk_gap_ms.mean == pytest.approx(20.0, rel=0.03)


@pytest.mark.timing
def test_empty_first_event_is_not_the_first_token(sim_factory: Callable[..., SimServer]) -> None:
    checked = _check(sim_factory("--ttft-ms", "100", "--itl-ms", "5", "--empty-first-event"))
    summary = checked.summary
    assert summary.ttft_ms.p50 == pytest.approx(100.0 + checked.delivery_ms, abs=3.0)
