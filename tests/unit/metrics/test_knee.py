"""The knee of a sweep (`tokometer.metrics.knee`): Kleinrock's power on a hand-computed sweep."""

from __future__ import annotations

import pytest

from tokometer.metrics.knee import knee, power, summary_power
from tokometer.metrics.summary import StepSummary


def _summary(throughput: float, decode_p50: float | None) -> StepSummary:
    return StepSummary.from_json({"output_throughput_tok_s": throughput, "decode_speed_tok_s": {"p50": decode_p50}})


def test_the_knee_of_a_hand_computed_sweep() -> None:
    # load:             c=1       c=4       c=16      c=64
    # throughput tok/s  100       360       1000      1600
    # decode tok/s/req  100        90         50        25   (TPOT 10, 11.1, 20, 40 ms)
    # power             10,000    32,400    50,000    40,000  -> the knee is c=16 (index 2)
    steps = [_summary(100, 100), _summary(360, 90), _summary(1000, 50), _summary(1600, 25)]
    powers = [summary_power(s) for s in steps]
    assert powers == [10_000, 32_400, 50_000, 40_000]
    assert knee(powers) == 2
    # equivalently throughput / TPOT (in seconds)
    assert powers[2] == pytest.approx(1000 / 0.020)


def test_ties_go_to_the_lighter_load_and_steps_without_numbers_are_never_the_knee() -> None:
    assert knee([400.0, 400.0, 100.0]) == 0
    assert knee([None, 5.0, None, 6.0]) == 3
    assert knee([None, 5.0, None]) is None  # one load with a power: no trade-off, no knee
    assert knee([None, None]) is None
    assert knee([]) is None
    assert knee([7.0]) is None
    assert summary_power(None) is None
    assert summary_power(_summary(100, None)) is None
    assert summary_power(_summary(0, 50)) is None
    assert power(10, 2) == 20
    assert power(None, 2) is None
