"""Importing ``vllm bench serve`` JSON: the fixture was made by running vLLM 0.32.0's client against
``tokometer sim`` (tests/fixtures/imports/README.md); the expected numbers are vLLM's own, in the same file.

The simulator sent a role-only first chunk, then 2 tokens every 4 ms after an 80 ms TTFT: vLLM's TTFT is the
role-only chunk's stamp, and the prefill shows up in vLLM's first chunk gap. tokometer's TTFT is the first
token's (issue 31): the second chunk's stamp, vLLM's TTFT plus its first gap, so the two do not agree, and the
run says so.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tokometer.imports import read_import
from tokometer.imports.source import ImportFormatError
from tokometer.imports.vllm_bench import read
from tokometer.metrics import request as m
from tokometer.metrics import summarize

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "imports" / "vllm-bench-serve-0.32.0.json"


@pytest.fixture(scope="module")
def raw() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(FIXTURE.read_text())
    return data


def test_every_request_becomes_a_record_with_vllm_s_own_stamps(raw: dict[str, Any]) -> None:
    """The first token came in the second chunk (the first was role-only): TTFT runs to it."""
    run = read_import(FIXTURE)
    assert run.tool == "vllm-bench-serve" and run.model == "sim-model"
    assert len(run.records) == len(raw["ttfts"]) == 24
    for record, ttft, latency, itls in zip(run.records, raw["ttfts"], raw["latencies"], raw["itls"], strict=True):
        assert m.ttft_ns(record) == pytest.approx((ttft + itls[0]) * 1e9, abs=3)
        assert (m.ttft_ns(record) or 0) > 70e6  # the simulator's 80 ms prefill, not vLLM's stamp of the role chunk
        assert m.e2e_ns(record) == pytest.approx(latency * 1e9, abs=len(itls) + 2)
        assert m.chunk_gaps_ns(record) == pytest.approx([g * 1e9 for g in itls[1:]], abs=2)


def test_recomputed_summary_against_vllm_s_own(raw: dict[str, Any]) -> None:
    run = read_import(FIXTURE)
    summary = summarize(run.records)
    first_token = [(t + g[0]) * 1e3 for t, g in zip(raw["ttfts"], raw["itls"], strict=True)]
    assert summary.ttft_ms.mean == pytest.approx(float(np.mean(first_token)), rel=1e-6)
    assert summary.ttft_ms.p50 is not None
    assert summary.ttft_ms.p50 > 4 * raw["median_ttft_ms"]  # vLLM's TTFT is the role-only chunk's
    assert run.agrees == ("e2e",)  # TTFT and TPOT are not said to agree
    # TPOT: (latency - first token) / (output_len - 1), the first token's chunk taken as one token
    tpots = [(lat * 1e3 - ft) / (out - 1)
             for lat, ft, out in zip(raw["latencies"], first_token, raw["output_lens"], strict=True)]
    assert summary.tpot_ms.mean == pytest.approx(float(np.mean(tpots)), rel=1e-5)
    # the chunk gaps after the first token's chunk
    gaps = [g * 1e3 for itls in raw["itls"] for g in itls[1:]]
    assert summary.chunk_gap_ms.mean == pytest.approx(float(np.mean(gaps)), rel=1e-6)
    assert summary.output_tokens_total == raw["total_output_tokens"]


def test_the_documented_itl_difference_is_the_tokens_per_chunk(raw: dict[str, Any]) -> None:
    """tokometer's ITL divides each gap by its chunk's tokens: (output_len - 1) / gaps per chunk here."""
    records = read_import(FIXTURE).records
    for record, itls, out in zip(records, raw["itls"], raw["output_lens"], strict=True):
        share = (out - 1) / len(itls[1:])
        assert m.itl_ns(record) == pytest.approx([g * 1e9 / share for g in itls[1:]], rel=1e-6, abs=2)
    pooled = np.concatenate([m.itl_ns(r) for r in records]) / 1e6
    assert summarize(records).itl_ms.mean == pytest.approx(float(pooled.mean()), rel=1e-9)
    assert summarize(records).itl_ms.mean < raw["mean_itl_ms"]  # 2 tokens a chunk: about half vLLM's


def test_the_run_says_what_it_could_not_recompute() -> None:
    run = read_import(FIXTURE)
    assert {"itl", "ttft_from_due", "connect"} <= set(run.not_recomputed)
    assert "role-only" in run.differences["ttft"]
    assert run.tool_summary["ttft_p50_ms"] == pytest.approx(16.933, abs=1e-3)  # vLLM's median_ttft_ms


def test_a_failed_request_is_a_failed_record(raw: dict[str, list[object]], tmp_path: Path) -> None:
    broken = dict(raw)
    broken["errors"] = ["Bad Gateway", *list(raw["errors"])[1:]]
    run = read(broken, tmp_path / "x.json")
    assert not run.records[0].ok and run.records[0].error_detail == "Bad Gateway"
    assert summarize(run.records).requests_failed == 1


@pytest.mark.parametrize(("key", "value", "says"), [
    ("ttfts", "fast", "should be a list"),
    ("itls", [[0.1]] * 3, "has 3 entries, not 24"),
    ("latencies", [-1.0] * 24, "non-negative number"),
    ("output_lens", [1.5] * 24, "whole number"),
    ("errors", [7] * 24, "should be text"),
])
def test_wrong_types_are_one_line_errors(raw: dict[str, object], tmp_path: Path, key: str, value: object,
                                         says: str) -> None:
    with pytest.raises(ImportFormatError, match=says):
        read({**raw, key: value}, tmp_path / "bad.json")
