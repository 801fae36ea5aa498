"""The ramp's target on the report's timeline (`tokometer.report.ramps`), from hand-built steps and records."""

from __future__ import annotations

import pytest

from tokometer.load.profiles import LoadStep
from tokometer.load.ramp import Ramp
from tokometer.records import RequestRecord
from tokometer.report.ramps import SAMPLES, ramp_targets
from tokometer.store.runs import StoredStep

S = 1_000_000_000


def _sent(step: int, at_s: float) -> RequestRecord:
    return RequestRecord(index=0, step=step, sent_ns=int(at_s * S), due_ns=int(at_s * S))


def test_each_ramped_step_gets_its_target_held_to_its_last_send() -> None:
    steps = [StoredStep(0, LoadStep("rate", rate=10.0), "t"),
             StoredStep(1, LoadStep("rate", rate=20.0, ramp=Ramp("linear", 2.0, 20.0, 4.0)), "t"),
             StoredStep(2, LoadStep("concurrency", concurrency=8, ramp=Ramp("exponential", 1.0, 8.0, 3.0)), "t")]
    records = [_sent(0, 100.0), _sent(0, 105.0), _sent(1, 110.0), _sent(1, 116.5), _sent(2, 120.0), _sent(2, 122.0)]
    t0 = 100 * S
    linear, exponential = ramp_targets(steps, records, t0)
    assert linear == {"step": 1, "unit": "req/s", "t_s": [10.0, 14.0, 16.5], "target": [2.0, 20.0, 20.0]}
    # Exponential: the same factor every equal stretch; its last send came before the ramp's end (no hold).
    assert exponential["step"] == 2 and exponential["unit"] == "concurrency"
    assert len(exponential["t_s"]) == SAMPLES + 1 and exponential["t_s"][0] == 20.0 and exponential["t_s"][-1] == 23.0
    middle = exponential["target"][SAMPLES // 2]
    assert middle == pytest.approx(8 ** 0.5, rel=1e-6)


def test_a_step_without_a_ramp_or_requests_draws_nothing() -> None:
    steps = [StoredStep(0, LoadStep("rate", rate=20.0, ramp=Ramp("linear", 2.0, 20.0, 4.0)), "t"),
             StoredStep(1, None, "t")]
    assert ramp_targets(steps, [], 0) == []
