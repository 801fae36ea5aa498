"""``tokometer import`` as a user runs it (a subprocess): the three tools' fixtures into one store, then
``compare`` and ``report --format llmd`` across tools, and hostile files refused in one line, exit 2.

The fixtures were made by each tool against ``tokometer sim`` (tests/fixtures/imports/README.md).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.llmd_schema import problems
from tokometer.imports.source import MAX_IMPORT_BYTES, MAX_NESTING
from tokometer.store import ResultStore

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "imports"
VLLM = FIXTURES / "vllm-bench-serve-0.32.0.json"
GUIDELLM = FIXTURES / "guidellm-0.8.1.json"
AIPERF = FIXTURES / "aiperf-0.13.0" / "profile_export.jsonl"


def _runs(store: Path) -> list[dict[str, object]]:
    if not store.exists():
        return []
    results = ResultStore(f"sqlite:///{store}", read_only=True)
    try:
        return results.list_runs(100)
    finally:
        results.close()


def test_three_tools_into_one_store_then_compare_and_llmd(tmp_path: Path) -> None:
    store = tmp_path / "runs.db"
    done = run_cli("import", str(VLLM), str(GUIDELLM), str(AIPERF), "--store", str(store))
    assert done.returncode == 0, done.stderr
    assert "vllm-bench-serve (version not in the file) -> run 1" in done.stdout
    assert "guidellm 0.8.1 -> run 2" in done.stdout and "aiperf 0.13.0 -> run 3" in done.stdout
    assert "not recomputed: itl" in done.stdout
    runs = _runs(store)
    assert len(runs) == 3 and {r["api"] for r in runs} == {"openai-chat"}

    compared = run_cli("compare", "1", "2", "--store", str(store))
    assert compared.returncode in (0, 1), compared.stderr  # alike runs of two tools: a verdict, not a refusal
    assert "Concurrency 4 (24 vs 24 requests)" in compared.stdout and "TTFT p50" in compared.stdout

    report = run_cli("report", "2", "--format", "llmd-0.1", "--store", str(store))  # the earlier schema
    assert report.returncode == 0, report.stderr
    llmd = json.loads(report.stdout)
    guidellm = json.loads(GUIDELLM.read_text())["benchmarks"][0]["requests"]["successful"]
    ttfts = sorted(r["time_to_first_token_ms"] for r in guidellm)
    assert llmd["version"] == "0.1" and llmd["scenario"]["load"]["name"] == "guidellm"
    assert llmd["scenario"]["metadata"]["imported_from"]["tool_version"] == "0.8.1"
    assert llmd["metrics"]["requests"]["total"] == 24
    assert llmd["metrics"]["latency"]["time_to_first_token"]["units"] == "ms"
    assert llmd["metrics"]["latency"]["time_to_first_token"]["min"] == pytest.approx(ttfts[0], abs=1e-3)
    assert llmd["metrics"]["latency"]["time_to_first_token"]["max"] == pytest.approx(ttfts[-1], abs=1e-3)
    assert "inter_token_latency" not in llmd["metrics"]["latency"]  # GuideLLM keeps no chunk stamps

    current = run_cli("report", "2", "--format", "llmd", "--store", str(store))  # the current schema, v0.2
    assert current.returncode == 0, current.stderr
    v02 = json.loads(current.stdout)
    assert problems(v02) == []
    assert v02["version"] == "0.2" and v02["scenario"]["load"]["standardized"]["tool"] == "guidellm"
    assert v02["scenario"]["load"]["standardized"]["tool_version"] == "0.8.1"
    ttft = v02["results"]["request_performance"]["aggregate"]["latency"]["time_to_first_token"]
    assert ttft["min"] == pytest.approx(ttfts[0], abs=1e-3) and ttft["max"] == pytest.approx(ttfts[-1], abs=1e-3)


def _refused(tmp_path: Path, *files: Path, says: str) -> None:
    store = tmp_path / "runs.db"
    done = run_cli("import", *map(str, files), "--store", str(store))
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tokometer: error: "), done.stderr
    assert says in lines[0], lines[0]
    assert _runs(store) == []  # nothing saved, not even the good file before the bad one


def test_a_file_over_the_size_limit(tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    with big.open("wb") as handle:
        handle.truncate(MAX_IMPORT_BYTES + 1)  # sparse: no disk used
    _refused(tmp_path, VLLM, big, says="larger than 256 MiB")


@pytest.mark.parametrize("depth", [MAX_NESTING + 1, 100_000])
def test_json_nested_too_deep(tmp_path: Path, depth: int) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text('{"benchmarks": ' + "[" * depth + "]" * depth + "}")
    _refused(tmp_path, deep, says=f"nested deeper than {MAX_NESTING} levels")


@pytest.mark.parametrize(("content", "says"), [
    (b"\x00\xff\xfe garbage", "not JSON"),
    (b'{"hello": "world"}', "not a result tokometer can import"),
    (b"[1, 2, 3]", "not a result tokometer can import"),
])
def test_files_that_are_not_a_tool_s_result(tmp_path: Path, content: bytes, says: str) -> None:
    path = tmp_path / "odd.json"
    path.write_bytes(content)
    _refused(tmp_path, path, says=says)


def test_wrong_types_inside_a_real_file(tmp_path: Path) -> None:
    data = json.loads(VLLM.read_text())
    data["latencies"][3] = "slow"
    bad = tmp_path / "vllm.json"
    bad.write_text(json.dumps(data))
    _refused(tmp_path, GUIDELLM, bad, says="latencies[3] should be a non-negative number")


def test_a_vllm_result_without_its_requests(tmp_path: Path) -> None:
    data = {k: v for k, v in json.loads(VLLM.read_text()).items() if not isinstance(v, list)}
    summary_only = tmp_path / "vllm.json"
    summary_only.write_text(json.dumps(data))
    _refused(tmp_path, summary_only, says="saved without --save-detailed")


def test_a_missing_file(tmp_path: Path) -> None:
    _refused(tmp_path, tmp_path / "nowhere.json", says="cannot read")
