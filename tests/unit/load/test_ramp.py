"""`Ramp`'s target, slot openings and arrival schedule against hand-computed values."""

from __future__ import annotations

import itertools
import math

import pytest

from tokometer.load.profiles import LoadStep
from tokometer.load.ramp import Ramp, RampStrategy
from tokometer.load.runner import StepLimits, step_offsets


def test_linear_ramp_target_and_slot_openings() -> None:
    ramp = Ramp("linear", 1.0, 8.0, 7.0)  # one more slot every second
    assert [ramp.at(t) for t in (0.0, 3.5, 7.0, 20.0)] == [1.0, 4.5, 8.0, 8.0]
    assert ramp.slot_opens(8) == pytest.approx([0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0])


def test_exponential_ramp_doubles_in_equal_times() -> None:
    ramp = Ramp("exponential", 1.0, 16.0, 4.0)  # x2 a second
    assert ramp.at(2.0) == pytest.approx(4.0)
    opens = ramp.slot_opens(16)
    assert [opens[k - 1] for k in (1, 2, 4, 8, 16)] == pytest.approx([0.0, 1.0, 2.0, 3.0, 4.0])


@pytest.mark.parametrize("ramp", [Ramp("linear", 2.0, 20.0, 3.0), Ramp("exponential", 0.5, 40.0, 2.0),
                                  Ramp("linear", 0.0, 10.0, 1.0)])
def test_due_at_inverts_the_expected_count(ramp: Ramp) -> None:
    # Λ by hand: linear (s + e) / 2 * R over the ramp; exponential R (e - s) / ln(e / s); then e a second.
    s, e, r = ramp.start, ramp.end, ramp.duration_s
    over = (s + e) / 2 * r if ramp.strategy == "linear" else r * (e - s) / math.log(e / s)
    assert ramp.expected(r) == pytest.approx(over)
    assert ramp.expected(r + 2.0) == pytest.approx(over + 2 * e)
    for t in (0.1, 0.5 * r, 0.99 * r, r, r + 1.3):
        assert ramp.due_at(ramp.expected(t)) == pytest.approx(t, rel=1e-9)


def test_constant_arrivals_follow_the_ramp() -> None:
    """With constant arrivals request i is due when Λ reaches i: the rate grows through the ramp, then holds."""
    ramp = Ramp("linear", 5.0, 25.0, 2.0)  # Λ(2 s) = 30 requests
    step = LoadStep("rate", rate=25.0, arrival="constant", ramp=ramp)
    offsets = [t / 1e9 for t in step_offsets(step, StepLimits(requests=80), seed=0)]
    assert len(offsets) == 80
    assert sum(1 for t in offsets if t < 2.0) == 30  # i = 0..29 fall before Λ = 30
    gaps = [b - a for a, b in itertools.pairwise(offsets)]
    assert gaps[0] == pytest.approx((-5 + math.sqrt(45)) / 10, abs=1e-6)  # Λ(t) = 5 t + 5 t^2 reaches 1
    assert gaps[-1] == pytest.approx(1 / 25.0, abs=1e-6)  # holds at 25/s


def test_a_duration_step_sends_the_ramps_expected_count() -> None:
    ramp = Ramp("exponential", 2.0, 32.0, 4.0)
    step = LoadStep("rate", rate=32.0, arrival="poisson", ramp=ramp)
    n = len(step_offsets(step, StepLimits(requests=None, duration_s=10.0), seed=3))
    assert n == int(ramp.expected(10.0))  # R (e - s) / ln 16 + 6 s x 32 = 108.2 + 192


def test_the_ramp_is_in_the_load_label_and_reads_back() -> None:
    from tokometer.store.runs import load_of

    step = LoadStep("concurrency", concurrency=8, ramp=Ramp("linear", 1.0, 8.0, 30.0))
    label = step.label()
    assert label["ramp"] == {"strategy": "linear", "from": 1.0, "to": 8.0, "duration_s": 30.0}
    assert load_of(label) == step
    assert step.short() == "c=1\u21978" and "ramped linear from 1 over 30 s" in step.describe()
    assert step.target_at(15.0) == pytest.approx(4.5) and step.target_at(31.0) == 8.0


@pytest.mark.parametrize(("args", "match"), [(("linear", 4.0, 2.0, 1.0), "rises"),
                                             (("exponential", 0.0, 2.0, 1.0), "above 0"),
                                             (("linear", 1.0, 2.0, 0.0), "positive")])
def test_a_ramp_that_does_not_rise_is_refused(args: tuple[RampStrategy, float, float, float], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        Ramp(*args)


@pytest.mark.parametrize(("args", "match"), [
    (("exponential", 1e-320, 10.0, 5.0), "start"),  # e / s is infinite: Λ(t) and Λ⁻¹ were NaN
    (("exponential", 1e-7, 10.0, 5.0), "start"),
    (("linear", 1.0, 2e9, 5.0), "end"),
    (("linear", 0.0, math.inf, 5.0), "end"),
    (("linear", 0.0, 1e-300, 5.0), "end"),
    (("linear", 1.0, 2.0, 1e-12), "duration"),
    (("linear", 1.0, 2.0, 1e300), "duration"),
    (("linear", 1.0, 2.0, math.nan), "duration"),
])
def test_a_ramp_out_of_range_is_refused(args: tuple[RampStrategy, float, float, float], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        Ramp(*args)


@pytest.mark.parametrize("strategy", ["linear", "exponential"])
@pytest.mark.parametrize(("start", "end"), [(1e-6, 1e9), (1e-6, 2e-6), (1e9 - 1, 1e9), (0.0, 1e-6)])
@pytest.mark.parametrize("duration", [1e-9, 1.0, 1e7])
def test_every_ramp_in_range_has_finite_arrivals_and_times(strategy: RampStrategy, start: float, end: float,
                                                           duration: float) -> None:
    if strategy == "exponential" and start == 0:
        return
    ramp = Ramp(strategy, start, end, duration)
    total = ramp.expected(duration)
    assert math.isfinite(total) and total > 0
    for arrivals in (total * 1e-9, total / 2, total, total * 2 + 1):
        t = ramp.due_at(arrivals)
        assert math.isfinite(t) and t >= 0
    assert all(math.isfinite(t) for t in ramp.slot_opens(3))


@pytest.mark.parametrize("label", [
    {"strategy": "linear", "from": 1, "to": 10**400, "duration_s": 5},  # float() overflows
    {"strategy": "linear", "from": True, "to": 8, "duration_s": 5},
    {"strategy": "linear", "from": "1", "to": 8, "duration_s": 5},
    {"strategy": "linear", "from": 1, "to": 8, "duration_s": "5"},
    {"strategy": "exponential", "from": 1e-320, "to": 8, "duration_s": 5},
    {"strategy": "linear", "from": 1, "to": 8},
])
def test_a_stored_ramp_that_is_not_one_reads_as_none(label: dict[str, object]) -> None:
    assert Ramp.from_label(label) is None
    assert Ramp.from_label({"strategy": "linear", "from": 1, "to": 8, "duration_s": 5}) == Ramp("linear", 1, 8, 5)
