"""Arrival schedules: exact offered rate, shapes of the gap distributions, determinism."""

from __future__ import annotations

import numpy as np
import pytest

from tokometer.load.profiles import Arrival, LoadStep, schedule_offsets


@pytest.mark.parametrize("arrival", ["poisson", "gamma", "constant"])
def test_schedule_offers_exactly_the_rate(arrival: Arrival) -> None:
    offsets = schedule_offsets(1000, 50.0, arrival, burstiness=0.5, seed=3)
    assert offsets[0] == 0
    assert offsets == sorted(offsets)
    assert (offsets[-1] - offsets[0]) / 1e9 == pytest.approx(999 / 50.0, rel=1e-9)


def test_constant_gaps_are_equal() -> None:
    gaps = np.diff(schedule_offsets(11, 10.0, "constant"))
    assert np.allclose(gaps, 100_000_000, atol=1)


def test_gap_dispersion_follows_the_process() -> None:
    def cv(arrival: Arrival, burstiness: float = 1.0) -> float:
        gaps = np.diff(schedule_offsets(20000, 100.0, arrival, burstiness, seed=1))
        return float(gaps.std() / gaps.mean())

    assert cv("poisson") == pytest.approx(1.0, abs=0.05)  # exponential gaps: CV 1
    assert cv("gamma", 0.25) == pytest.approx(2.0, abs=0.15)  # gamma shape k: CV 1/sqrt(k)
    assert cv("gamma", 4.0) == pytest.approx(0.5, abs=0.05)


def test_seeded_and_validated() -> None:
    assert schedule_offsets(50, 5.0, "poisson", seed=7) == schedule_offsets(50, 5.0, "poisson", seed=7)
    assert schedule_offsets(50, 5.0, "poisson", seed=7) != schedule_offsets(50, 5.0, "poisson", seed=8)
    assert schedule_offsets(1, 5.0, "poisson") == [0]
    with pytest.raises(ValueError):
        schedule_offsets(5, 0.0, "poisson")


def test_step_labels() -> None:
    assert LoadStep("concurrency", concurrency=4).label() == {"concurrency": 4}
    assert LoadStep("rate", rate=10.0).label() == {"rate": 10.0, "arrival": "poisson"}
    assert LoadStep("synchronous").label() == {"concurrency": 1, "synchronous": True}
