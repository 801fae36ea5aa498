"""Fuzzing ``tokometer import`` at the byte level (issue 31, deliverable 7): a real file of each tool
(tests/fixtures/imports) cut short, with junk bytes, a huge number, a huge line, a value of the wrong type or
deep nesting spliced in.

Documented behaviour: `read_import` raises `ImportFormatError` (one line naming the file) or returns a run the
store and the metrics take whole, and its peak of Python memory stays under `PEAK_BOUND` (the file is ~30 KB,
the largest splice 6 MiB). The streamed parser gives what ``json.loads`` gives at any window size, or refuses
what ``json.loads`` refuses.
"""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tokometer.imports import ImportFormatError, read_import
from tokometer.imports.jsonstream import ImportStream
from tokometer.metrics import StepSummary, summarize
from tokometer.store.rows import record_row

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "imports"
FILES = {"vllm.json": (FIXTURES / "vllm-bench-serve-0.32.0.json").read_bytes(),
         "guidellm.json": (FIXTURES / "guidellm-0.8.1.json").read_bytes(),
         "profile_export.jsonl": (FIXTURES / "aiperf-0.13.0" / "profile_export.jsonl").read_bytes(),
         "llmd.json": (FIXTURES / "llmd-0.2-harness.json").read_bytes()}
PEAK_BOUND = 64 * 2**20
"""Python memory one import of a mutated file may peak at (tracemalloc)."""
_INT64 = 2**63

splices = st.one_of(
    st.binary(max_size=64),  # junk
    st.sampled_from([b"1" * 5000, b"1e999", b"-1e999", b"NaN", b"9" * 400, b"2.5e-400", b'"x"', b"[]", b"{}",
                     b"true", b"null", b"-", b"\\u00", b'"\\ud800"', b"[" * 40, b"]" * 3, b"\n", b"\x00\xff"]),
    st.integers(min_value=1, max_value=6).map(lambda mib: b"x" * (mib * 2**20)),  # a huge line
    st.integers(min_value=1, max_value=6).map(lambda mib: b'"' + b"y" * (mib * 2**20) + b'"'),  # a huge string
)


@st.composite
def mutated(draw: st.DrawFn) -> tuple[str, bytes]:
    """A fixture's name and its bytes, cut at a point or with a span replaced by a splice."""
    name = draw(st.sampled_from(sorted(FILES)))
    raw = FILES[name]
    start = draw(st.integers(min_value=0, max_value=len(raw)))
    if draw(st.booleans()):
        return name, raw[:start]  # truncated
    end = draw(st.integers(min_value=start, max_value=min(len(raw), start + 40)))
    return name, raw[:start] + draw(splices) + raw[end:]


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz-mutations")


@given(mutated())
def test_a_mutated_file_is_imported_or_refused_in_one_line_within_bounded_memory(folder: Path,
                                                                                  case: tuple[str, bytes]) -> None:
    name, content = case
    path = folder / name
    path.write_bytes(content)
    tracemalloc.start()
    try:
        run = read_import(path)
    except ImportFormatError as exc:
        assert "\n" not in str(exc) and str(path) in str(exc)
        run = None
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peak < PEAK_BOUND + len(content), f"{peak / 2**20:.0f} MiB"
    if run is not None:
        for record in run.records:
            row = record_row(1, record)
            assert all(-_INT64 <= v < _INT64 for v in row.values() if isinstance(v, int) and not isinstance(v, bool))
        summarize(run.records)
        for step in run.steps:  # a file of statistics (an llm-d report): its summary reads whole
            if step.summary is not None:
                StepSummary.from_json(step.summary).to_json()


@given(mutated(), st.sampled_from([1, 2, 3, 5, 11, 64, 4096]))
def test_the_streamed_parse_is_json_loads(folder: Path, case: tuple[str, bytes], window: int) -> None:
    name, content = case
    if name.endswith(".jsonl") or len(content) > 2**20:
        return  # documents only; a huge splice is the test above's
    path = folder / f"doc-{name}"
    path.write_bytes(content)
    try:
        expected = json.loads(content.decode("utf-8"))
    except (ValueError, RecursionError):
        with pytest.raises(ImportFormatError):
            ImportStream(path, window=window).document()
        return
    try:
        got = ImportStream(path, window=window).document()
    except ImportFormatError as exc:
        assert "nested deeper" in str(exc), exc  # the one limit a ~30 KB file can pass
        return
    assert json.dumps(got) == json.dumps(expected)
