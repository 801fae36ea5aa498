"""Measured TTFT / TPOT / ITL against the simulator's own record of what it sent and when.

The simulator stamps every content event just before writing it (perf_counter_ns,
CLOCK_MONOTONIC: the same clock as the client), so each request has a known truth: its TTFT from the
client's send stamp to the simulator's first event (the request's way to the simulator on loopback is the
host's: on the Intel Xeon VM 1-4 ms at the median in a busy timing lane, 2026-12-07, where a truth counted
from the simulator's receipt failed the 3 ms bound by a millisecond).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import pytest

from tests.conftest import SimServer
from tests.helpers import (
    bench,
    check_client_against_trace,
    kept_to_script,
    median,
    simulator_medians_ms,
    trace_gap_means_ms,
)

MS = 1e6
OUTPUT = 64
"""Tokens an answer: TPOT is read over 63 gaps of 5 ms. Measured on the 2-core AMD EPYC VM, 2 runs of each test:
TPOT p50 within 0.18 % of the truth and of 5 ms at 64 tokens (0.11 % at 128) against the 3 % asserted; TTFT, which
the answer's length does not touch, within 0.4-1.5 ms of the truth (0.9-2.4 ms at 128) against 3 ms."""


class _Checked(NamedTuple):
    """A checked run's summary (its figures already held to the truth) and the simulator's trace of it."""

    summary: Any
    traces: list[dict[str, Any]]


def _check(sim: SimServer, n: int = 12) -> _Checked:
    sim.clear_trace()
    result = bench(sim.openai_url, concurrency=[1], requests=n, input_tokens=16, output_tokens=OUTPUT)
    step = result.steps[0]
    traces = sim.trace()
    assert len(traces) == n and step.summary.requests_completed == n
    check_client_against_trace(step, traces)
    assert step.summary.output_tokens_total == OUTPUT * n
    delivery_ms = median([(t["received_ns"] - r.sent_ns) / MS for t, r in zip(traces, step.records, strict=True)])
    assert delivery_ms < 10, delivery_ms  # (a client that stamped its send long before writing would show here)
    return _Checked(step.summary, traces)


@pytest.mark.timing  # within 3 ms and 3 % of the truth: a time, lost on a host busy with other tests
def test_ttft_and_tpot_match_the_simulators_send_times(sim_factory: Callable[..., SimServer]) -> None:
    checked = _check(sim_factory("--ttft-ms", "100", "--itl-ms", "5"))
    summary = checked.summary
    ttft_ms, tpot_ms = simulator_medians_ms(checked.traces)  # the simulator kept to its script
    assert kept_to_script(ttft_ms, 100.0) and tpot_ms == pytest.approx(5.0, rel=0.1), (ttft_ms, tpot_ms)
    assert summary.decode_speed_tok_s.p50 == pytest.approx(1000 / summary.tpot_ms.p50, rel=0.03)
    assert summary.output_tokens_source == {"usage": 12}


@pytest.mark.timing  # within 3 ms and 3 % of the truth: a time, lost on a host busy with other tests
def test_four_tokens_per_event_keeps_tpot_and_normalises_itl(sim_factory: Callable[..., SimServer]) -> None:
    checked = _check(sim_factory("--ttft-ms", "100", "--itl-ms", "5", "--tokens-per-event", "4"))
    summary = checked.summary
    gap_ms, per_token_ms = trace_gap_means_ms(checked.traces)
    assert summary.itl_ms.mean == pytest.approx(per_token_ms, rel=0.03)  # each 20 ms gap carries 4 tokens
    assert summary.chunk_gap_ms.mean == pytest.approx(gap_ms, rel=0.03)
    assert simulator_medians_ms(checked.traces)[1] == pytest.approx(5.0, rel=0.1)  # the simulator kept to its script
    assert gap_ms == pytest.approx(20.0, rel=0.1) and per_token_ms == pytest.approx(5.0, rel=0.1)


@pytest.mark.timing
def test_empty_first_event_is_not_the_first_token(sim_factory: Callable[..., SimServer]) -> None:
    checked = _check(sim_factory("--ttft-ms", "100", "--itl-ms", "5", "--empty-first-event"))
    summary = checked.summary
    server_ttft_ms = simulator_medians_ms(checked.traces)[0]
    assert kept_to_script(server_ttft_ms, 100.0), server_ttft_ms  # its first token 100 ms after the empty event
    assert summary.ttft_ms.p50 >= server_ttft_ms  # each request's TTFT is its token's, past the empty event
