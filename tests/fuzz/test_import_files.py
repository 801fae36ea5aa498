"""Fuzzing ``tokometer import``'s readers: one value anywhere in a real file of each tool (tests/fixtures/imports)
replaced by a hostile one (a huge or non-finite number, a bool, a string, a list, an object).

Documented behaviour: `read_import` raises `ImportFormatError` (one line) or returns a run whose every record
the store can hold (its stamps within 64-bit integers, packed by `record_row`) and that `summarize` summarises.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.strategies import json_values, numbers
from tokometer.imports import ImportFormatError, read_import
from tokometer.metrics import StepSummary, summarize
from tokometer.store.rows import record_row

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "imports"
DOCUMENTS = {"vllm.json": json.loads((FIXTURES / "vllm-bench-serve-0.32.0.json").read_text()),
             "guidellm.json": json.loads((FIXTURES / "guidellm-0.8.1.json").read_text()),
             "llmd.json": json.loads((FIXTURES / "llmd-0.2-harness.json").read_text()),
             "llmd-tokometer.json": json.loads((FIXTURES / "llmd-0.2-tokometer.json").read_text())}
AIPERF_ROWS = [json.loads(line) for line in
               (FIXTURES / "aiperf-0.13.0" / "profile_export.jsonl").read_text().splitlines() if line.strip()]
_INT64 = 2**63

hostile = (numbers | json_values
           | st.sampled_from([float("nan"), float("inf"), -float("inf"), 1e300, -1e300, 10**400, 2**62, 2**63, True]))


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every key path in ``value`` (a list's first two entries only, so each kind of field is as likely)."""
    if prefix:
        yield prefix
    if isinstance(value, dict):
        for key, child in value.items():
            yield from _paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value[:2]):
            yield from _paths(child, (*prefix, index))


PATHS = {name: sorted(_paths(doc), key=repr) for name, doc in DOCUMENTS.items()}
AIPERF_PATHS = sorted(_paths(AIPERF_ROWS[0]), key=repr)


def _replaced(document: Any, path: tuple[Any, ...], value: Any) -> Any:
    copy = json.loads(json.dumps(document))
    target = copy
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return copy


def _check(path: Path) -> None:
    """`read_import` refuses ``path`` in one line, or reads a run the store and the metrics take whole."""
    try:
        run = read_import(path)
    except ImportFormatError as exc:
        assert "\n" not in str(exc) and str(path) in str(exc)
        return
    for record in run.records:
        row = record_row(1, record)  # packs the per-event stamps as int64
        assert all(-_INT64 <= v < _INT64 for v in row.values() if isinstance(v, int) and not isinstance(v, bool))
    summarize(run.records)
    for step in run.steps:  # a file of statistics (an llm-d report): its summary reads whole
        if step.summary is not None:
            StepSummary.from_json(step.summary).to_json()


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz-import")


@given(st.sampled_from(sorted(DOCUMENTS)).flatmap(lambda name: st.tuples(st.just(name), st.sampled_from(PATHS[name]))),
       hostile)
def test_one_value_of_a_json_result(folder: Path, where: tuple[str, tuple[Any, ...]], value: Any) -> None:
    name, key_path = where
    path = folder / name
    path.write_text(json.dumps(_replaced(DOCUMENTS[name], key_path, value)))
    _check(path)


@given(st.sampled_from(AIPERF_PATHS), hostile)
def test_one_value_of_an_aiperf_record(folder: Path, key_path: tuple[Any, ...], value: Any) -> None:
    path = folder / "profile_export.jsonl"
    rows = [_replaced(AIPERF_ROWS[0], key_path, value), *AIPERF_ROWS[1:]]
    path.write_text("\n".join(json.dumps(row) for row in rows))
    _check(path)


@given(st.sampled_from(PATHS["llmd.json"]), hostile)
def test_an_accepted_llmd_report_is_saved_and_written_out_again(folder: Path, key_path: tuple[Any, ...],
                                                                value: Any) -> None:
    """What the llm-d reader accepts the store saves, and the run reads back and is written as JSON and as an
    llm-d report again (the values it keeps as the file gave them are used there)."""
    from tokometer.imports import save_import
    from tokometer.report.json_out import run_json
    from tokometer.report.llmd_v02 import llmd_v02_reports
    from tokometer.store import ResultStore

    path = folder / "llmd.json"
    path.write_text(json.dumps(_replaced(DOCUMENTS["llmd.json"], key_path, value)))
    try:
        run = read_import(path)
    except ImportFormatError as exc:
        assert "\n" not in str(exc) and str(path) in str(exc)
        return
    (folder / "llmd.db").unlink(missing_ok=True)
    store = ResultStore(f"sqlite:///{folder / 'llmd.db'}")
    try:
        saved = store.run(save_import(store, run)[0])
    finally:
        store.close()
    assert saved is not None
    json.dumps(run_json(saved), allow_nan=False)
    json.dumps(llmd_v02_reports(saved), allow_nan=False)
