"""Sharing a load step between N generators (`tokometer.load.share`): every request once, warm-up first, in
proportion to each generator's slots, and nobody left holding requests without a slot to send them."""

from __future__ import annotations

import pytest

from tokometer.load.profiles import LoadStep
from tokometer.load.runner import StepLimits
from tokometer.load.share import share


def _numbers(step: LoadStep, limits: StepLimits, workers: int) -> tuple[list[int], list[int]]:
    """The step's numbers every generator sends, and those of their warm-up requests."""
    sent: list[int] = []
    warm: list[int] = []
    for w in range(workers):
        part = share(step, limits, workers, w)
        if part.idle:
            continue
        assert part.limits.requests is not None
        local = part.limits.requests + part.limits.warmup
        sent += [part.index(i) for i in range(local)]
        warm += [part.index(i) for i in range(part.limits.warmup)]
    return sorted(sent), sorted(warm)


@pytest.mark.parametrize("workers", [1, 2, 3, 4, 7])
@pytest.mark.parametrize("step", [
    LoadStep("concurrency", concurrency=1), LoadStep("concurrency", concurrency=3),
    LoadStep("concurrency", concurrency=8), LoadStep("synchronous"), LoadStep("rate", rate=50.0),
    LoadStep("trace", offsets=tuple(range(0, 103_000_000, 1_000_000))),
])
def test_every_request_is_sent_once_and_the_first_ones_are_the_warm_up(step: LoadStep, workers: int) -> None:
    sent, warm = _numbers(step, StepLimits(requests=100, warmup=3), workers)
    assert sent == list(range(103))
    assert warm == [0, 1, 2]


def test_a_closed_loop_with_fewer_slots_than_generators_leaves_the_rest_idle() -> None:
    parts = [share(LoadStep("concurrency", concurrency=1), StepLimits(requests=100, warmup=3), 2, w) for w in (0, 1)]
    assert not parts[0].idle and parts[1].idle
    assert (parts[0].step.concurrency, parts[0].limits.requests, parts[0].limits.warmup) == (1, 100, 3)


def test_requests_follow_the_slots() -> None:
    """c=3 on 2 generators: slots 2 and 1, so requests 2:1, and both finish together."""
    a, b = (share(LoadStep("concurrency", concurrency=3), StepLimits(requests=90, warmup=0), 2, w) for w in (0, 1))
    assert (a.step.concurrency, b.step.concurrency) == (2, 1)
    assert (a.limits.requests, b.limits.requests) == (60, 30)
    assert [a.index(i) for i in range(4)] == [0, 1, 3, 4] and [b.index(i) for i in range(2)] == [2, 5]


def test_a_rate_is_split_evenly_and_constant_arrivals_interleave() -> None:
    parts = [share(LoadStep("rate", rate=40.0, arrival="constant"), StepLimits(requests=10), 4, w) for w in range(4)]
    assert [p.step.rate for p in parts] == [10.0] * 4
    assert [p.phase_ns for p in parts] == [0, 25_000_000, 50_000_000, 75_000_000]
