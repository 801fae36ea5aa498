"""Saving an imported run: a record the store cannot hold fails the run (``failed``, never ``completed`` with
records missing), in one line, and what was written before it is kept."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokometer.imports.save import save_import
from tokometer.imports.source import ImportedRun, ImportedStep
from tokometer.records import RequestRecord
from tokometer.store import ResultStore
from tokometer.util.errors import StoreError


def _run(*steps: list[RequestRecord]) -> ImportedRun:
    return ImportedRun(tool="guidellm", tool_version="0.8.1", source="g.json", model="m", target="t",
                       steps=[ImportedStep({"concurrency": 1}, list(records)) for records in steps])


def test_a_record_beyond_the_store_s_integers_fails_the_run(tmp_path: Path) -> None:
    store = ResultStore(f"sqlite:///{tmp_path / 'runs.db'}")
    good = [RequestRecord(index=i, sent_ns=1, end_ns=2, error="protocol") for i in range(3)]
    bad = RequestRecord(index=0, sent_ns=10**21, end_ns=10**21, error="protocol")  # sqlite3: OverflowError
    with pytest.raises(StoreError, match="too large") as raised:
        save_import(store, _run(good, [bad]))
    assert "\n" not in str(raised.value)
    run = store.get_run(1)
    assert run is not None and run["status"] == "failed"
    assert len(store.load_records(1)) == 3  # the first step, written before, is kept
    store.close()
