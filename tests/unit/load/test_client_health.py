"""The client-health verdict: lateness judged against the step's own yardsticks (pure values, no timing)."""

from __future__ import annotations

from typing import Any

import pytest

from tokometer.load.profiles import LoadStep
from tokometer.load.selfcheck import ClientHealth, StepTiming
from tokometer.records import RequestRecord

MS = 1_000_000


def _health(client_lag_p99_ms: float | None = 0.05, *, loop_lag_p99_ms: float = 0.2, cpu: float = 0.2,
            workers: int = 1, host: float | None = 0.3) -> ClientHealth:
    return ClientHealth(loop_lag_p99_ms=loop_lag_p99_ms, loop_lag_max_ms=loop_lag_p99_ms, cpu_fraction=cpu,
                        client_lag_p99_ms=client_lag_p99_ms, workers=workers, host_cpu_busy=host)


def _rate(rate: float, sends: int = 1000, late_by: float = 0.0, **extra: Any) -> StepTiming:
    """An open-loop step at ``rate``/s whose last send went out ``late_by`` (share of the span) late."""
    span = (sends - 1) / rate * 1000
    return StepTiming(open_loop=True, scheduled_span_ms=span, sent_span_ms=span * (1 + late_by), sends=sends,
                      **extra)


def test_a_millisecond_and_a_half_against_20_ms_gaps_is_not_saturation() -> None:
    # The case from the issue: a 50 req/s Poisson step, achieved rate right, client lag p99 1.55 ms.
    health = _health(1.55).judge(_rate(50.0, ttft_p50_ms=5.2))
    assert not health.saturated and health.problems == [] and health.verdict == "client kept up"
    assert health.client_lag_limit_ms == pytest.approx(5.0)  # a quarter of the 20 ms mean gap
    assert health.send_shortfall == 0.0


def test_the_same_lag_is_late_against_1_ms_gaps() -> None:
    health = _health(1.55).judge(_rate(1000.0))
    assert health.saturated and health.problems == ["late_sends"]
    assert health.client_lag_limit_ms == 1.0  # never below the timer's millisecond
    assert "could not keep up" in health.verdict and "client lag p99 1.55 ms" in health.verdict
    assert "arrivals strayed from the schedule" in health.verdict


def test_falling_behind_the_schedule_is_saturation_whatever_the_lag_percentile() -> None:
    behind = _health(0.5).judge(_rate(50.0, late_by=0.10))
    assert behind.problems == ["behind_schedule"] and behind.saturated
    assert behind.send_shortfall == pytest.approx(1 - 1 / 1.1)
    assert "offered 91% of the asked rate" in behind.verdict
    assert not _health(0.5).judge(_rate(50.0, late_by=0.04)).saturated


def test_a_closed_loop_allows_5_percent_of_a_typical_request() -> None:
    slow = StepTiming(open_loop=False, e2e_p50_ms=2000.0, ttft_p50_ms=300.0)
    assert not _health(60.0).judge(slow).saturated
    late = _health(150.0).judge(slow)
    assert late.problems == ["late_sends"] and late.client_lag_limit_ms == pytest.approx(100.0)
    assert "less concurrency than asked" in late.verdict
    fast = StepTiming(open_loop=False, e2e_p50_ms=10.0)
    assert _health(1.2).judge(fast).problems == ["late_sends"]  # the 1 ms floor: 5% of 10 ms is less


def test_a_full_core_is_still_saturation() -> None:
    # What bench/client_ceiling.py shows at 200 streams: client lag tiny, CPU 99%.
    health = _health(0.04, loop_lag_p99_ms=0.71, cpu=0.99).judge(StepTiming(e2e_p50_ms=300.0, ttft_p50_ms=6.0))
    assert health.saturated and health.problems == ["cpu"] and "could not keep up" in health.verdict
    assert not _health(cpu=1.5, workers=2).judge(StepTiming()).saturated


def test_loop_lag_is_judged_against_the_measured_ttft() -> None:
    assert not _health(loop_lag_p99_ms=5.0).judge(StepTiming(ttft_p50_ms=200.0)).saturated
    fast = _health(loop_lag_p99_ms=1.5).judge(StepTiming(ttft_p50_ms=5.0))
    assert fast.problems == ["loop_lag"] and fast.loop_lag_limit_ms == 1.0
    assert "arrival stamps may be late" in fast.verdict


def test_a_concurrency_cap_on_a_rate_turns_lateness_into_a_note() -> None:
    health = _health(30.0).judge(_rate(50.0, late_by=0.2, capped=True))
    assert not health.saturated and health.problems == []
    assert health.note.startswith("--max-concurrency held sends back") and "fell behind" in health.note


def test_a_busy_host_is_a_note_not_a_verdict() -> None:
    health = _health(host=0.99).judge(StepTiming())
    assert not health.saturated and "99% busy" in health.note


def test_without_a_timing_the_limits_are_one_millisecond() -> None:
    health = _health(1.2).judge()
    assert health.client_lag_limit_ms == health.loop_lag_limit_ms == 1.0 and health.problems == ["late_sends"]
    assert health.judge().problems == ["late_sends"]  # judging twice gives the same answer
    assert set(health.to_json()) >= {"saturated", "verdict", "note", "problems", "client_lag_limit_ms",
                                     "loop_lag_limit_ms", "send_shortfall"}


def _record(index: int, due_ms: float, lag_ms: float, *, warmup: bool = False, e2e_ms: float = 100.0,
            ttft_ms: float = 10.0) -> RequestRecord:
    due = int(due_ms * MS)
    sent = due + int(lag_ms * MS)
    return RequestRecord(index=index, warmup=warmup, due_ns=due, sent_ns=sent, first_token_ns=sent + int(ttft_ms * MS),
                         end_ns=sent + int(e2e_ms * MS), status=200)


def test_step_timing_is_read_from_the_measured_requests() -> None:
    records = [_record(0, 0.0, 50.0, warmup=True, e2e_ms=900.0, ttft_ms=900.0)]
    records += [_record(i, 20.0 * i, 0.1 + (0.5 if i == 10 else 0.0)) for i in range(1, 11)]
    timing = StepTiming.of(LoadStep("rate", rate=50.0), records)
    assert timing.open_loop and not timing.capped and timing.sends == 10
    assert timing.scheduled_span_ms == pytest.approx(180.0) and timing.sent_span_ms == pytest.approx(180.5)
    assert timing.mean_gap_ms == pytest.approx(20.0)
    assert timing.shortfall == pytest.approx(1 - 180 / 180.5)
    assert timing.e2e_p50_ms == pytest.approx(100.0) and timing.ttft_p50_ms == pytest.approx(10.0)
    closed = StepTiming.of(LoadStep("concurrency", concurrency=4), records)
    assert not closed.open_loop and closed.shortfall is None and closed.mean_gap_ms is None
    assert StepTiming.of(LoadStep("rate", rate=5.0, max_concurrency=2), records).capped


def test_worker_healths_merge_and_are_judged_on_all_records() -> None:
    records = [_record(i, 20.0 * i, 0.2) for i in range(20)]
    merged = ClientHealth.merged([_health(cpu=0.6), _health(cpu=0.7, loop_lag_p99_ms=0.4)], records,
                                 LoadStep("rate", rate=50.0), workers=2)
    assert merged.cpu_fraction == pytest.approx(1.3) and merged.loop_lag_p99_ms == 0.4 and merged.workers == 2
    assert merged.client_lag_p99_ms == pytest.approx(0.2) and merged.client_lag_limit_ms == pytest.approx(5.0)
    assert not merged.saturated


def test_loop_monitor_sees_a_stall_of_the_loop_for_as_long_as_it_lasted() -> None:
    """One 300 ms block of the loop in a 1.5 s window (what parsing one huge event did): the lag p99
    must show it, where sampling only the next turn of the loop said 0.09 ms and "client kept up"."""
    import asyncio
    import time

    from tokometer.load.profiles import LoadStep
    from tokometer.load.selfcheck import LoopMonitor

    async def scenario() -> LoopMonitor:
        monitor = LoopMonitor()
        monitor.start()
        await asyncio.sleep(0.6)
        time.sleep(0.3)  # noqa: ASYNC251  (the point: the loop is held, nothing runs, no byte is stamped)
        await asyncio.sleep(0.6)
        monitor.stop()
        return monitor

    monitor = asyncio.run(scenario())
    health = monitor.health(LoadStep(mode="concurrency", concurrency=1), [])
    assert health.loop_lag_max_ms >= 250
    assert health.loop_lag_p99_ms >= 100
    assert health.saturated and "loop_lag" in health.problems
