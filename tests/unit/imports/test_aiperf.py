"""Importing AIPerf's ``profile_export.jsonl``: the fixture was made by running AIPerf 0.13.0 against
``tokometer sim`` (tests/fixtures/imports/README.md); the expected numbers are AIPerf's own per-request
metrics in the same file.

AIPerf's TTFT runs from before the connection is opened; tokometer's from the send, so the two differ by
exactly AIPerf's ``http_req_connection_overhead`` per request. AIPerf's per-request ``inter_token_latency``
is tokometer's TPOT, and its ``inter_chunk_latency`` tokometer's chunk gaps.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tokometer.imports import read_import
from tokometer.imports.aiperf import read
from tokometer.imports.jsonstream import ImportStream
from tokometer.imports.source import ImportedRun, ImportFormatError
from tokometer.metrics import request as m
from tokometer.metrics import summarize

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "imports" / "aiperf-0.13.0" / "profile_export.jsonl"


@pytest.fixture(scope="module")
def rows() -> list[dict[str, Any]]:
    return [json.loads(line) for line in FIXTURE.read_text().splitlines() if line.strip()]


def _value(row: dict[str, Any], name: str) -> Any:
    return row["metrics"][name]["value"]


def test_per_request_numbers_and_the_documented_ttft_difference(rows: list[dict[str, Any]]) -> None:
    run = read_import(FIXTURE)
    assert run.tool == "aiperf" and run.tool_version == "0.13.0" and run.model == "sim-model"
    assert run.steps[0].load == {"concurrency": 4}
    assert len(run.records) == len(rows) == 24
    for record, row in zip(run.records, rows, strict=True):
        overhead = _value(row, "http_req_connection_overhead")
        ttft, tpot = m.ttft_ns(record), m.tpot_ns(record)
        assert ttft is not None and tpot is not None
        assert ttft / 1e6 == pytest.approx(_value(row, "time_to_first_token") - overhead, abs=1e-5)
        assert m.connect_ns(record) == pytest.approx(overhead * 1e6, abs=1) or overhead == 0
        assert tpot / 1e6 == pytest.approx(_value(row, "inter_token_latency"), rel=1e-5)
        assert [g / 1e6 for g in m.chunk_gaps_ns(record)] == pytest.approx(_value(row, "inter_chunk_latency"),
                                                                          abs=1e-5)
        assert record.due_ns == row["metadata"]["credit_issued_ns"]
    assert any(_value(r, "http_req_connection_overhead") > 0 for r in rows)  # the difference is exercised


def test_aiperf_s_own_aggregates_come_from_the_file_beside(tmp_path: Path) -> None:
    run = read_import(FIXTURE)
    assert run.tool_summary["ttft_p50_ms"] > 0 and run.tool_summary["output_tok_s"] > 0
    alone = tmp_path / "profile_export.jsonl"
    shutil.copy(FIXTURE, alone)
    bare = read_import(alone)
    assert bare.tool_version is None and bare.tool_summary == {}
    assert "tool_summary" in bare.not_recomputed
    assert summarize(bare.records).ttft_ms == summarize(run.records).ttft_ms


def _read(raw: bytes, path: Path) -> ImportedRun:
    """``raw`` written to ``path`` and read back as the importer reads it, a line at a time."""
    path.write_bytes(raw)
    return read(ImportStream(path), path)


def test_an_error_record_is_a_failed_request(rows: list[dict[str, Any]], tmp_path: Path) -> None:
    bad = dict(rows[0], error={"code": 500, "type": "Internal Server Error", "message": "boom"})
    raw = b"\n".join(json.dumps(r).encode() for r in [bad, *rows[1:]])
    run = _read(raw, tmp_path / "profile_export.jsonl")
    assert not run.records[0].ok and run.records[0].error_detail == "boom"
    assert summarize(run.records).requests_failed == 1


@pytest.mark.parametrize(("line", "says"), [
    (b'{"metadata": {"request_start_ns": "x"}, "metrics": {}}', "non-negative number"),
    (b'{"metadata": {"request_start_ns": 5}, "metrics": {"time_to_first_token": {"value": -3}}}',
     "non-negative number"),
    (b'{"metadata": {"request_start_ns": 5}, "metrics": []}', "should be an object"),
])
def test_wrong_types_are_one_line_errors(rows: list[dict[str, Any]], tmp_path: Path, line: bytes,
                                         says: str) -> None:
    raw = json.dumps(rows[0]).encode() + b"\n" + line
    with pytest.raises(ImportFormatError, match=says):
        _read(raw, tmp_path / "profile_export.jsonl")
