"""`Ramp`'s target, slot openings and arrival schedule against hand-computed values."""

from __future__ import annotations

import itertools
import math

import pytest

from tokometer.load.profiles import LoadStep
from tokometer.load.ramp import Ramp
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
def test_a_ramp_that_does_not_rise_is_refused(args: tuple[str, float, float, float], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        Ramp(*args)  # type: ignore[arg-type]
