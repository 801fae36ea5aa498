"""``tokometer quality`` against real servers: the embedded engine on the bundled Gemma 3 270M Q4_K_M (A), and on
a much coarser requantisation of it (Q2_K, made with the llama-quantize the llama.cpp build makes beside the
server). The coarse one must come out worse (lower agreement, KL > 0, accuracy not higher beyond noise), while
one endpoint asked twice, and the same model served twice, agree fully (exact match 100 %, KL ≈ 0)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import require_llama_server, run_cli
from tokometer.bundled import bundled_model_path
from tokometer.engines import EngineHandle, LlamaCppSettings, start_llamacpp
from tokometer.util.errors import EngineError

pytestmark = pytest.mark.engine

SMALL = ("--limit", "24", "--max-tokens", "8", "--concurrency", "2", "--json")


def _requantised_q2k() -> str:
    from tokometer.engines.quantize import find_llama_quantize, requantized

    required = os.environ.get("TOKOMETER_REQUIRE_ENGINE") == "1"  # make test and CI: build it, fail without it
    try:
        binary = find_llama_quantize(build=required)
    except EngineError as exc:
        if required:
            pytest.fail(f"llama-quantize is required here but could not be found or built: {exc}")
        pytest.skip(f"no llama-quantize, so no coarser model to compare with (run 'make engine'): {exc}")
    return str(requantized(bundled_model_path(), "Q2_K", binary=binary))  # cached in tokometer's cache dir


@pytest.fixture(scope="module")
def engines() -> Iterator[tuple[EngineHandle, EngineHandle]]:
    require_llama_server()
    coarse = _requantised_q2k()
    with start_llamacpp(LlamaCppSettings(parallel=2)) as base, \
            start_llamacpp(LlamaCppSettings(model_path=Path(coarse), parallel=2)) as q2k:
        yield base, q2k


def _quality(*args: str, expect: int = 0) -> dict[str, Any]:
    done = run_cli("quality", *args, timeout=600)
    assert done.returncode == expect, done.stderr
    data: dict[str, Any] = json.loads(done.stdout)
    return data


def test_a_coarse_requantisation_scores_worse(engines: tuple[EngineHandle, EngineHandle]) -> None:
    base, q2k = engines
    data = _quality(base.openai_url, q2k.openai_url, *SMALL, "--min-agreement", "0.9", expect=1)  # the gate fails
    assert data["compared"] == data["items"] == 24
    assert data["exact_match"] < 0.9
    assert data["mean_kl"] > 0.01 and data["top1_agreement"] < 1.0
    assert data["forced_positions"] > 0  # B was teacher-forced on A's path past the divergences
    assert "teacher-forced" in str(data["kl_method"])
    difference = data["difference"]
    assert isinstance(difference, dict) and difference["low"] <= 0.0  # not more accurate beyond noise
    a, b = data["a"], data["b"]
    assert isinstance(a, dict) and isinstance(b, dict)
    assert b["accuracy"] <= a["accuracy"] + difference["half_width"]
    assert a["failed"] == b["failed"] == 0 and a["decode_p50_tok_s"] > 0 and b["ttft_p50_ms"] > 0
    assert data["decode_ratio"] is not None
    verdict = data["verdict"]
    assert isinstance(verdict, dict) and verdict["kind"] in ("worse", "different")


def test_one_endpoint_asked_twice_agrees_fully(engines: tuple[EngineHandle, EngineHandle]) -> None:
    base, _ = engines
    done = run_cli("quality", base.openai_url, base.openai_url, "--limit", "12", "--max-tokens", "8",
                   "--min-agreement", "1.0", "--max-accuracy-drop", "0", "--format", "md", timeout=600)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("**same: gemma-3-270m-q4_k_m keeps 100% agreement (top-1 100%, KL 0 nats)")
    assert "+0.0 ± 0.0 points accuracy" in done.stdout
    assert "| accuracy (Wilson 95 %) |" in done.stdout


def test_the_same_model_served_twice_agrees_fully(engines: tuple[EngineHandle, EngineHandle]) -> None:
    base, _ = engines
    # B is a second engine the command starts itself; A's URL without /v1 (added)
    data = _quality(base.root_url, "engine:bundled", "--limit", "8", "--max-tokens", "8", "--json")
    assert data["exact_match"] == 1.0 and data["mean_kl"] is not None and data["mean_kl"] < 1e-6
    assert data["top1_agreement"] == 1.0 and data["forced_positions"] == 0
    assert data["verdict"]["kind"] == "same"


def test_bad_input_is_one_line_and_exit_2() -> None:
    for args, message in ((("engine:/no/such.gguf", "http://127.0.0.1:9/v1"), "model file /no/such.gguf not found"),
                          (("ftp://x", "http://127.0.0.1:9/v1"), "neither a server URL"),
                          (("http://127.0.0.1:9/v1", "http://127.0.0.1:9/v1", "--limit", "0"), "--limit"),
                          (("http://127.0.0.1:9/v1", "http://127.0.0.1:9/v1"), "could not list models")):
        done = run_cli("quality", *args)
        assert done.returncode == 2, (args, done.stderr)
        assert message in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
