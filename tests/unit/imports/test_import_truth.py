"""Imports that used to mislead (issue 31): a role-only first chunk taken for the first token, runs dated at
import, and files of versions the readers were never checked on imported without a word.

Each file is built with a known truth: a vLLM chat file whose role-only chunk came 3.9 ms after the send and
the first token 100 ms after that; files whose own date is known; a file of a version no reader was checked on.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tokometer.cli import main
from tokometer.imports import read_import
from tokometer.metrics import summarize
from tokometer.store import ResultStore

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "imports"
VLLM = FIXTURES / "vllm-bench-serve-0.32.0.json"
GUIDELLM = FIXTURES / "guidellm-0.8.1.json"


def _vllm_file(path: Path, endpoint: str, *, requests: int = 4, tokens: int = 8) -> Path:
    """Requests whose role-only chunk came 3.9 ms after the send (chat), then one token a chunk: the first
    100 ms after that, the others 10 ms apart. On the completions endpoint the first chunk is the first token."""
    chat = endpoint == "openai-chat"
    first_gaps = [0.1] if chat else []
    itls = [first_gaps + [0.01] * (tokens - 1) for _ in range(requests)]
    data: dict[str, Any] = {
        "date": "20250102-030405", "endpoint_type": endpoint, "backend": endpoint, "model_id": "m",
        "request_rate": "inf", "max_concurrency": 1, "median_ttft_ms": 3.9, "mean_ttft_ms": 3.9,
        "start_times": [10.0 + i for i in range(requests)], "ttfts": [0.0039] * requests, "itls": itls,
        "latencies": [0.0039 + sum(gaps) for gaps in itls], "input_lens": [5] * requests,
        "output_lens": [tokens] * requests, "errors": [""] * requests,
    }
    path.write_text(json.dumps(data))
    return path


def _import(path: Path, store: Path, capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    with pytest.raises(SystemExit) as exited:
        main(["import", str(path), "--store", str(store)])
    out, err = capsys.readouterr()
    assert exited.value.code == 0, err
    return out, err


def test_a_role_only_first_chunk_is_not_the_first_token(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _vllm_file(tmp_path / "chat.json", "openai-chat")
    run = read_import(path)
    summary = summarize(run.records)
    assert summary.ttft_ms.p50 == pytest.approx(103.9, abs=1e-3)  # the first token, not the role chunk's 3.9 ms
    assert summary.tpot_ms.p50 == pytest.approx(10.0, abs=1e-3)
    assert "ttft" not in run.agrees and "role-only" in run.differences["ttft"]
    out, _ = _import(path, tmp_path / "runs.db", capsys)
    ttft_line = next(line for line in out.splitlines() if "TTFT p50" in line)
    assert "103.90 ms" in ttft_line and "3.90 ms" in ttft_line and "defined differently" in ttft_line


def test_a_completions_file_s_first_chunk_is_the_first_token(tmp_path: Path) -> None:
    run = read_import(_vllm_file(tmp_path / "completions.json", "openai-completions"))
    assert summarize(run.records).ttft_ms.p50 == pytest.approx(3.9, abs=1e-3)
    assert "ttft" in run.agrees


def _started_at(store: Path) -> str:
    results = ResultStore(f"sqlite:///{store}", read_only=True)
    try:
        found = results.run(1)
        assert found is not None
        return found.started_at
    finally:
        results.close()


def test_a_run_is_dated_when_it_ran(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _vllm_file(tmp_path / "chat.json", "openai-chat")
    out, _ = _import(path, tmp_path / "a.db", capsys)
    ran = datetime(2025, 1, 2, 3, 4, 5).astimezone(UTC)  # vLLM's date is the local time it ran
    assert datetime.fromisoformat(_started_at(tmp_path / "a.db")) == ran
    assert "from vLLM's date" in out
    guidellm = json.loads(GUIDELLM.read_text())
    _import(GUIDELLM, tmp_path / "b.db", capsys)
    when = datetime.fromtimestamp(guidellm["benchmarks"][0]["start_time"], UTC)
    assert abs((datetime.fromisoformat(_started_at(tmp_path / "b.db")) - when).total_seconds()) < 0.001


def test_a_file_without_a_date_is_dated_by_its_modification_time(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    data = json.loads(VLLM.read_text())
    del data["date"]
    path = tmp_path / "undated.json"
    path.write_text(json.dumps(data))
    os.utime(path, (1_700_000_000, 1_700_000_000))
    out, _ = _import(path, tmp_path / "runs.db", capsys)
    assert datetime.fromisoformat(_started_at(tmp_path / "runs.db")) == datetime.fromtimestamp(1_700_000_000, UTC)
    assert "the file's modification time" in out


def test_an_unchecked_version_is_named_in_a_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = json.loads(GUIDELLM.read_text())
    data["metadata"]["guidellm_version"] = "9.9.9"
    path = tmp_path / "guidellm.json"
    path.write_text(json.dumps(data))
    _, err = _import(path, tmp_path / "a.db", capsys)
    assert "warning" in err and "guidellm 9.9.9" in err and "checked on 0.8.1" in err
    _, err = _import(GUIDELLM, tmp_path / "b.db", capsys)
    assert "warning" not in err
