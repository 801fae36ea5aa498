"""Speculative decoding in the estimate (`tokometer.perf.speculative`): the arithmetic against numbers worked
out by hand, and a published speculative per-user figure explained rather than fitted."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokometer.perf import Deployment, Efficiency, estimate
from tokometer.perf.catalog import BUILTIN_MODELS
from tokometer.perf.hardware import resolve_hardware
from tokometer.perf.roofline import decode_step_s
from tokometer.perf.speculative import (
    Speculation,
    expected_tokens_per_round,
    explain_speculative,
    required_acceptance,
    speculative_estimate,
)
from tokometer.util.errors import ConfigError


def _d(model: str = "llama-3.3-70b", hw: str = "H200-SXM", dtype: str = "fp8", tp: int = 1) -> Deployment:
    return Deployment(BUILTIN_MODELS[model], resolve_hardware(hw), dtype, "fp8", tp=tp)


@pytest.mark.parametrize(("a", "k", "truth"), [
    (0.7, 4, 1 + 0.7 + 0.49 + 0.343 + 0.2401),  # 2.7731
    (0.5, 1, 1.5), (0.0, 4, 1.0), (1.0, 4, 5.0), (0.8, 3, 1 + 0.8 + 0.64 + 0.512),
])
def test_expected_tokens_per_round_by_hand(a: float, k: int, truth: float) -> None:
    assert expected_tokens_per_round(a, k) == pytest.approx(truth, rel=1e-12)


@settings(max_examples=30)
@given(st.floats(0, 1), st.integers(1, 64))
def test_expected_tokens_is_the_sum_of_the_acceptance_powers(a: float, k: int) -> None:
    e = expected_tokens_per_round(a, k)
    assert e == pytest.approx(math.fsum(a ** i for i in range(k + 1)), rel=1e-9)
    assert 1 <= e <= k + 1 + 1e-9
    assert expected_tokens_per_round(a, k + 1) >= e - 1e-12


def test_a_round_with_a_draft_cost_by_hand() -> None:
    """70B fp8 on one H200 at batch 1, a = 0.7, k = 4, each draft step 5 % of a plain step."""
    d, eff = _d(), Efficiency()
    e = estimate(d, [1], 1000, 1000, eff)
    s = speculative_estimate(e, Speculation(0.7, 4, draft_cost=0.05))
    row = s.rows[0]
    plain = decode_step_s(d, 1, 1500, eff)
    verify = decode_step_s(d, 5, 1500, eff)
    assert row.plain_step_s == pytest.approx(plain) and row.verify_step_s == pytest.approx(verify)
    assert row.round_s == pytest.approx(4 * 0.05 * plain + verify)
    assert row.per_request_tok_s == pytest.approx(2.7731 / (0.2 * plain + verify), rel=1e-4)
    # Bandwidth bound at batch 1: verifying 5 tokens costs one plain step (the weights are read once), so the
    # speed-up is E / (1 + k × cost) = 2.7731 / 1.2.
    assert verify == pytest.approx(plain, rel=2e-3)  # the 5 tokens' activations and KV reads beside the weights
    assert row.speedup == pytest.approx(2.7731 / 1.2, rel=1e-3)


def test_at_a_compute_bound_batch_speculation_costs_aggregate_throughput() -> None:
    d = _d(tp=2)
    e = estimate(d, [1, 512], 1000, 1000)
    rows = speculative_estimate(e, Speculation(0.7, 4, draft_cost=0.05)).rows
    assert rows[0].speedup > 2 and rows[1].speedup < 1
    assert rows[1].to_json()["aggregate_tok_s"]["speculative"] < rows[1].to_json()["aggregate_tok_s"]["plain"]


def test_a_draft_model_runs_its_own_decode_step_on_the_same_gpus() -> None:
    d = _d(tp=2)
    e = estimate(d, [8], 1000, 1000)
    spec = Speculation(0.8, 5, draft_model=BUILTIN_MODELS["llama-3.2-1b"])
    s = speculative_estimate(e, spec)
    draft = Deployment(BUILTIN_MODELS["llama-3.2-1b"], d.hardware, "fp8", "fp8", tp=2)
    assert s.rows[0].draft_step_s == pytest.approx(decode_step_s(draft, 8, 8 * 1500, Efficiency()))
    assert s.to_json()["draft_model"] == "llama-3.2-1b" and s.to_json()["draft_tp"] == 2
    # A draft whose heads do not split over the target's GPUs runs on one.
    gemma = Speculation(0.8, 5, draft_model=BUILTIN_MODELS["gemma-3-270m"]).draft_deployment(_d(tp=8))
    assert gemma is not None and gemma.tp == 1
    text = explain_speculative(s)
    assert "(1 − 0.8^6) / (1 − 0.8) = 3.689" in text and "8 × 6 = 48 tokens" in text


@pytest.mark.parametrize(("kwargs", "words"), [
    ({"acceptance": 1.2, "draft_cost": 0.1}, "--spec-acceptance must be in [0, 1]"),
    ({"acceptance": -0.1, "draft_cost": 0.1}, "--spec-acceptance must be in [0, 1]"),
    ({"acceptance": 0.5, "tokens": 0, "draft_cost": 0.1}, "--spec-tokens must be 1 to 64"),
    ({"acceptance": 0.5, "tokens": 65, "draft_cost": 0.1}, "--spec-tokens must be 1 to 64"),
    ({"acceptance": 0.5}, "give --draft-model NAME or --draft-cost"),
    ({"acceptance": 0.5, "draft_cost": 1.5}, "--draft-cost must be in [0, 1]"),
    ({"acceptance": 0.5, "draft_cost": 0.1, "draft_model": BUILTIN_MODELS["llama-3.2-1b"]}, "not both"),
])
def test_a_bad_speculation_is_one_error(kwargs: dict[str, object], words: str) -> None:
    with pytest.raises(ConfigError, match=words.replace("[", r"\[").replace("]", r"\]")):
        Speculation(**kwargs)  # type: ignore[arg-type]


def test_groqs_published_speculative_figure_explained_not_fitted() -> None:
    """Groq served Llama 3.1 70B at 250 tok/s per user and, with speculative decoding, 1,665 (Artificial
    Analysis' measurement; groq.com, November 2024): a 6.66 × speed-up. With the verify step costing one plain
    step (bandwidth bound at batch 1) and a free draft, 4 draft tokens cannot give it at any acceptance
    (E ≤ 5); 8 need a ≥ 0.923 (E(0.92, 8) = 6.60, E(0.93, 8) = 6.85 by hand), and with a draft step costing
    5 % of a plain one not even a = 1 does (9 / 1.4 = 6.4); 16 draft tokens need a ≥ 0.862 with a free draft,
    0.954 with the 5 % one. Groq's draft and its baseline are not public: this is what it would take, not a fit."""
    speedup = 1665 / 250
    assert required_acceptance(speedup, 4) is None
    a8 = required_acceptance(speedup, 8)
    assert a8 is not None and 0.92 < a8 < 0.93
    assert expected_tokens_per_round(a8, 8) == pytest.approx(speedup, rel=1e-6)
    assert required_acceptance(speedup, 8, draft_cost=0.05) is None
    assert required_acceptance(speedup, 16) == pytest.approx(0.862, abs=5e-4)
    assert required_acceptance(speedup, 16, draft_cost=0.05) == pytest.approx(0.954, abs=5e-4)
    assert required_acceptance(1.0, 4) == pytest.approx(0.0, abs=1e-9)
