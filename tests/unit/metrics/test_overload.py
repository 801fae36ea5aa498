"""The overload tests (`tokometer.metrics.overload`) on hand-built records of a queue with known capacity.

Each step is a single FIFO server with a fixed service time S, fed by Poisson arrivals at rate λ (Lindley's
recursion gives each request's start; its first token comes at the end of its service): the capacity is 1/S,
so whether it kept up is known, and so is the rate it sustained (1/S) when it did not.
"""

from __future__ import annotations

import random

import pytest

from tokometer.metrics.overload import ALPHA, Overload, overload
from tokometer.metrics.summary import StepSummary, summarize
from tokometer.records import RequestRecord

_MS = 1_000_000


def _queue(rate: float, service_s: float, n: int, seed: int | None) -> list[RequestRecord]:
    """Poisson arrivals from ``seed``; constant ones (exactly ``rate``) for None."""
    rng = random.Random(seed)
    sent, free, out = 0.0, 0.0, []
    for i in range(n):
        sent += rng.expovariate(rate) if seed is not None else 1 / rate
        start = max(sent, free)
        free = start + service_s
        first = free
        out.append(RequestRecord(index=i, sent_ns=int(sent * 1e9) + 1, first_token_ns=int(first * 1e9),
                                 last_token_ns=int(first * 1e9) + _MS, end_ns=int(first * 1e9) + 2 * _MS,
                                 output_tokens=2, event_ns=[int(first * 1e9), int(first * 1e9) + _MS],
                                 event_tokens=[1, 1]))
    return out


def _test(records: list[RequestRecord]) -> tuple[Overload | None, StepSummary]:
    s = summarize(records)
    return s.overload, s


def test_a_server_that_keeps_up_is_not_overloaded() -> None:
    test, summary = _test(_queue(10.0, 0.05, 100, seed=1))  # half its capacity of 20/s
    assert test is not None and not test.overloaded, test
    assert test.n == 100 and test.latency == "ttft" and test.why() == ""
    assert abs(test.slope) < 0.01 and test.rate_p is not None and test.slope_low < 0 < test.rate_p
    assert summary.send_rate_rps == test.send_rate_rps


def test_a_growing_queue_is_overloaded_and_shows_the_rate_sustained() -> None:
    test, _ = _test(_queue(16.875, 1 / 16, 100, seed=None))  # the rate of issue 26 against a capacity of 16/s
    assert test is not None and test.overloaded and test.queue_grew, test
    assert test.slope_low > 0 and test.rise_ms > 100
    assert test.sustained_rps == pytest.approx(16.0, rel=0.1)
    assert test.why().startswith("TTFT rose ") and "sustained about" in test.why()
    # Twice the capacity: the completions fall clearly behind the sends too.
    gross, _ = _test(_queue(32.0, 1 / 16, 400, seed=3))
    assert gross is not None and gross.queue_grew
    assert gross is not None and gross.fell_behind and gross.rate_p is not None and gross.rate_p < ALPHA
    assert gross.sustained_rps == pytest.approx(16.0, rel=0.1)


def test_false_alarms_stay_near_the_level_when_the_server_keeps_up() -> None:
    alarms = sum(bool((t := _test(_queue(10.0, 0.06, 100, seed))[0]) and t.overloaded) for seed in range(100))
    assert alarms <= 4, alarms  # 100 stable probes at 60 % load, a test at 1 %: a few at most
    caught = sum(bool((t := _test(_queue(20.0, 0.0625, 100, seed))[0]) and t.overloaded) for seed in range(100))
    assert caught >= 90, caught  # at 125 % of capacity nearly every probe


def test_too_few_requests_are_not_tested_and_the_test_survives_json() -> None:
    assert overload(_queue(10.0, 0.05, 7, seed=4), 10.0, 10.0) is None
    _, summary = _test(_queue(16.875, 1 / 16, 100, seed=None))
    again = StepSummary.from_json(summary.to_json())
    assert again.overload == summary.overload and again.percentile_ci == summary.percentile_ci
    assert summary.to_json()["overload"]["overloaded"] is True
    assert StepSummary.from_json({"requests_completed": 3}).overload is None  # a file older than the test
