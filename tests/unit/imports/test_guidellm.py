"""Importing GuideLLM's benchmarks JSON: the fixture was made by running GuideLLM 0.8.1 against
``tokometer sim`` (tests/fixtures/imports/README.md); the expected numbers are GuideLLM's own per-request
fields in the same file.

GuideLLM keeps a request's first and last token times, not each chunk's: TTFT and TPOT are recomputed
(tokometer's TPOT is GuideLLM's ``inter_token_latency_ms``), ITL is not, and the run says so.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tokometer.imports import read_import
from tokometer.imports.guidellm import read
from tokometer.imports.source import ImportFormatError
from tokometer.metrics import request as m
from tokometer.metrics import summarize

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "imports" / "guidellm-0.8.1.json"


@pytest.fixture(scope="module")
def raw() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(FIXTURE.read_text())
    return data


def test_per_request_numbers_match_guidellm_where_the_definitions_agree(raw: dict[str, Any]) -> None:
    run = read_import(FIXTURE)
    assert run.tool == "guidellm" and run.tool_version == "0.8.1" and run.model == "sim-model"
    theirs = raw["benchmarks"][0]["requests"]["successful"]
    assert len(run.records) == len(theirs) == 24
    assert run.steps[0].load == {"concurrency": 4}
    for record, row in zip(run.records, theirs, strict=True):
        ttft, tpot, e2e = m.ttft_ns(record), m.tpot_ns(record), m.e2e_ns(record)
        assert ttft is not None and tpot is not None and e2e is not None and record.output_tokens is not None
        assert ttft / 1e6 == pytest.approx(row["time_to_first_token_ms"], abs=1e-3)
        # tokometer's TPOT is GuideLLM's inter_token_latency_ms ...
        assert tpot / 1e6 == pytest.approx(row["inter_token_latency_ms"], rel=1e-5)
        # ... and GuideLLM's time_per_output_token_ms is (last token - start) / output tokens: TTFT included
        tpot_guidellm = (record.last_token_ns - record.sent_ns) / record.output_tokens / 1e6
        assert tpot_guidellm == pytest.approx(row["time_per_output_token_ms"], rel=1e-5)
        assert e2e / 1e9 == pytest.approx(row["request_latency"], abs=1e-6)
        assert m.itl_ns(record) == []  # no per-chunk stamps: not made up


def test_itl_is_said_not_recomputed_and_the_summary_has_none() -> None:
    run = read_import(FIXTURE)
    assert "itl" in run.not_recomputed and "chunk_gap" in run.not_recomputed
    summary = summarize(run.records)
    assert summary.itl_ms.count == 0 and summary.chunk_gap_ms.count == 0
    assert summary.tpot_ms.count == 24
    assert "TTFT included" in run.differences["tpot"]


def test_an_errored_request_is_a_failed_record(raw: dict[str, Any], tmp_path: Path) -> None:
    data = json.loads(json.dumps(raw))
    requests = data["benchmarks"][0]["requests"]
    moved = requests["successful"].pop(0)
    moved["info"]["error"] = "HTTP 503: busy"
    requests["errored"] = [moved]
    run = read(data, tmp_path / "g.json")
    failed = [r for r in run.records if not r.ok]
    assert len(failed) == 1 and failed[0].error_detail == "HTTP 503: busy"


@pytest.mark.parametrize(("change", "says"), [
    (lambda d: d["benchmarks"][0].__setitem__("requests", []), "should be an object"),
    (lambda d: d["benchmarks"][0]["requests"].__setitem__("successful", {"a": 1}), "should be a list"),
    (lambda d: d["benchmarks"][0]["requests"]["successful"][0]["info"]["timings"].__setitem__(
        "request_start", "soon"), "non-negative number"),
    (lambda d: d["benchmarks"][0]["requests"]["successful"][0]["info"]["timings"].__setitem__(
        "first_token_iteration", 1.0), "in that order"),
])
def test_wrong_types_are_one_line_errors(raw: dict[str, Any], tmp_path: Path, change: Any, says: str) -> None:
    data = json.loads(json.dumps(raw))
    change(data)
    with pytest.raises(ImportFormatError, match=says):
        read(data, tmp_path / "bad.json")
