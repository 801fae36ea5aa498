"""A step summarised again from the store (its process gone: `tokometer.store.orphans`) gets its steady state
and time slices as ``bench`` computes them: the same records, the saved load and the run's --time-slice and
--steady-tolerance. Records: two slots of 1 s requests, worked out in tests/unit/metrics/test_window.py."""

from __future__ import annotations

import subprocess
import sys

from sqlalchemy import create_engine, text

from tokometer.load.profiles import LoadStep
from tokometer.metrics.window import step_windows
from tokometer.records import RequestRecord
from tokometer.store import ResultStore, StoredRun

S = 1_000_000_000


def _req(index: int, sent: float) -> RequestRecord:
    stamps = [int((sent + 0.1 + k * 0.1) * S) + S for k in range(10)]
    return RequestRecord(index=index, due_ns=int(sent * S) + S, sent_ns=int(sent * S) + S, first_token_ns=stamps[0],
                         last_token_ns=stamps[-1], end_ns=int((sent + 1) * S) + S, event_ns=stamps,
                         event_tokens=[1.0] * 10, output_tokens=10, output_tokens_source="usage", status=200,
                         finish_reason="length")


def _abort(store_url: str, spec: dict[str, object], records: list[RequestRecord], load: LoadStep) -> StoredRun:
    """Save a run of one step with ``records``, make its process gone, open the store again: the aborted run."""
    store = ResultStore(store_url)
    run_id = store.create_run(target="t", api="a", model="m", spec=spec, engine=None, host=None)
    store.start_step(run_id, 0, load.label())
    for record in records:
        store.append(run_id, record)
    store.close()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    engine = create_engine(store_url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE runs SET pid = :pid"), {"pid": dead.pid})
    engine.dispose()
    reader = ResultStore(store_url, read_only=True)
    assert reader.aborted == [run_id]
    run = reader.run(run_id)
    reader.close()
    assert run is not None and run.status == "aborted"
    return run


def test_an_aborted_step_gets_its_steady_state_and_slices(store_url: str) -> None:
    records = [_req(i, t) for i, t in enumerate((0.0, 1.0, 2.0, 3.0, 0.5, 1.5, 2.5))]
    load = LoadStep("concurrency", 2)
    run = _abort(store_url, {"time_slice_s": 1.0, "steady_tolerance": 0.1}, records, load)
    summary = run.steps[0].summary
    assert summary is not None and summary.steady_state is not None and summary.time_slices is not None
    state = summary.steady_state
    assert state["found"] and (state["start_s"], state["end_s"], state["requests"]) == (0.5, 3.5, 4)
    assert [s["requests"] for s in summary.time_slices["slices"]] == [2, 2, 2, 1, 0]
    assert (state, summary.time_slices) == step_windows(records, load, 0.1, 1.0)  # what bench saved


def test_a_spec_edited_by_hand_does_not_break_opening_the_store(store_url: str) -> None:
    """Values bench would have refused (a zero slice, a tolerance that is text) are taken as absent: no slices,
    the default tolerance."""
    records = [_req(i, t) for i, t in enumerate((0.0, 1.0, 2.0, 3.0, 0.5, 1.5, 2.5))]
    run = _abort(store_url, {"time_slice_s": 0, "steady_tolerance": "x"}, records, LoadStep("concurrency", 2))
    summary = run.steps[0].summary
    assert summary is not None and summary.time_slices is None
    assert summary.steady_state is not None and summary.steady_state["tolerance"] == 0.1
