"""A tune variant that changes the weights, judged by ``quality`` against the baseline, on real engines: the
embedded llama.cpp on the bundled Gemma 3 270M Q4_K_M (the baseline) and on its Q2_K requantisation (made with
the llama-quantize built beside the server). The coarse one does not answer as the baseline does; the baseline
against itself agrees fully; an endpoint that answers nothing is an ``error`` in the result, not an exception."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import require_llama_server
from tests.hostile_servers import hostile
from tests.integration.test_quality import _requantised_q2k
from tokometer.engines import EngineHandle, LlamaCppSettings, start_llamacpp
from tokometer.tune.quality import quality_against_baseline

pytestmark = pytest.mark.engine

ITEMS = 6
"""Fewer than the default 16: on two cores shared with other work a token can take half a second, and the Q2_K
build differs from the baseline on nearly every item (0 of 16 alike when measured)."""


@pytest.fixture(scope="module")
def engines() -> Iterator[tuple[EngineHandle, EngineHandle]]:
    require_llama_server()
    coarse = _requantised_q2k()
    with start_llamacpp(LlamaCppSettings(parallel=1)) as base, \
            start_llamacpp(LlamaCppSettings(model_path=Path(coarse), parallel=1)) as q2k:
        yield base, q2k


def test_a_coarse_requantisation_does_not_answer_as_the_baseline(engines: tuple[EngineHandle, EngineHandle]) -> None:
    base, q2k = engines
    result = quality_against_baseline(base, q2k, items=ITEMS)
    assert json.loads(json.dumps(result)) == result  # plain JSON, as a tune saves it
    assert result["error"] is None and result["items"] == result["compared"] == ITEMS
    assert result["agreement"] < 0.9 and result["mean_kl"] > 0.01 and result["top1_agreement"] < 1.0
    low, high = result["agreement_interval"]
    assert low <= result["agreement"] <= high
    accuracy = result["accuracy"]
    assert accuracy["difference"] == pytest.approx(accuracy["variant"] - accuracy["baseline"])
    assert accuracy["interval"][0] <= 0.0  # not more accurate beyond noise
    assert result["failed"] == {"baseline": 0, "variant": 0}
    assert result["verdict"] in ("worse", "different") and result["headline"].startswith(result["verdict"] + ":")
    assert result["line"].startswith("agrees with the baseline on ")
    assert result["line"].endswith(f": {result['verdict']}")


def test_the_same_engines_give_the_same_figures(engines: tuple[EngineHandle, EngineHandle]) -> None:
    base, q2k = engines
    first, second = (quality_against_baseline(base, q2k, items=3) for _ in range(2))
    answers = ("agreement", "agreement_interval", "top1_agreement", "mean_kl", "accuracy", "verdict", "line")
    assert first["error"] is None and {k: first[k] for k in answers} == {k: second[k] for k in answers}


def test_the_baseline_against_itself_agrees_fully(engines: tuple[EngineHandle, EngineHandle]) -> None:
    base, _ = engines
    result = quality_against_baseline(base, base, items=4)
    assert (result["error"], result["items"], result["agreement"], result["verdict"]) == (None, 4, 1.0, "same")
    assert result["top1_agreement"] == 1.0 and result["mean_kl"] == pytest.approx(0.0, abs=1e-9)
    assert result["accuracy"]["difference"] == 0.0


def test_an_endpoint_that_answers_nothing_is_an_error_not_an_exception(
        engines: tuple[EngineHandle, EngineHandle]) -> None:
    base, _ = engines
    with hostile({}) as server:  # a real server on loopback that answers every request with a 404
        broken = EngineHandle(server.root, "gemma", {"engine": "llama.cpp"}, None)
        result = quality_against_baseline(base, broken, items=2)
    assert set(result) == {"items", "error"} and result["items"] == 2
    assert result["error"].startswith(f"endpoint B (gemma at {server.url})")
    assert "every request failed" in result["error"]
