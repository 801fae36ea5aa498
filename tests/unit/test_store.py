"""The results store keeps every record exactly, written from a background thread."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from tokometer.load.health import ClientHealth
from tokometer.load.profiles import LoadStep
from tokometer.records import RequestRecord, ServerTiming
from tokometer.store import ResultStore, StoredRun
from tokometer.store.runs import load_of, stored_health
from tokometer.store.schema import ADDED_REQUEST_COLUMNS, ADDED_RUN_COLUMNS


def test_records_round_trip(tmp_path: Path) -> None:
    store = ResultStore(f"sqlite:///{tmp_path / 'r.db'}")
    run_id = store.create_run(target="http://x/v1", api="openai-chat", model="m", spec={"a": 1}, engine=None,
                              host={"cpu": "c"}, label="l")
    store.start_step(run_id, 0, {"concurrency": 2})
    original = RequestRecord(index=3, due_ns=1, connect_ns=2, sent_ns=3, first_byte_ns=4, first_token_ns=5,
                             last_token_ns=9, end_ns=10, event_ns=[5, 7, 9], event_tokens=[1.0, 2.0, 0.5],
                             chunk_count=4, input_tokens=11, input_tokens_source="usage", output_tokens=4,
                             output_tokens_source="native", status=200, finish_reason="length",
                             server=ServerTiming(prompt_tokens=11, prompt_ms=1.5), first_answer_ns=7,
                             reasoning_tokens=2, reasoning_tokens_source="usage", prefix_group=0, prefix_first=True,
                             session=5, turn=0)
    failed = RequestRecord(index=4, sent_ns=3, end_ns=4, error="http_5xx", error_detail="HTTP 500: x", status=500)
    for record in (original, failed):
        store.append(run_id, record)
    store.finish_step(run_id, 0, {"requests_completed": 1}, {"saturated": False}, interrupted=False)
    store.finish_run(run_id, "completed")
    loaded = store.load_records(run_id)
    original.output_text = ""  # answers' text is not stored
    assert loaded == [original, failed]
    run = store.get_run(run_id)
    assert run is not None and run["status"] == "completed" and run["steps"][0]["load"] == {"concurrency": 2}
    assert [r["id"] for r in store.list_runs()] == [run_id]
    store.close()


def test_store_survives_reopen(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'nested' / 'r.db'}"
    store = ResultStore(url)
    run_id = store.create_run(target="t", api="a", model="m", spec={}, engine=None, host=None)
    store.append(run_id, RequestRecord(index=0, sent_ns=1, end_ns=2))
    store.close()
    again = ResultStore(url)
    assert len(again.load_records(run_id)) == 1
    again.close()


def _version_1_store(path: Path, spec: dict[str, object]) -> None:
    """A store as version 1 made it: no process columns, headers saved as given."""
    ResultStore(f"sqlite:///{path}").close()
    db = sqlite3.connect(path)
    with db:
        for column in ADDED_RUN_COLUMNS:
            db.execute(f"ALTER TABLE runs DROP COLUMN {column}")
        db.execute("INSERT INTO runs (started_at, status, target, api, model, spec, tokometer_version, "
                   "schema_version) VALUES ('t', 'running', 'u', 'a', 'm', ?, '0.1.0', 1)", (json.dumps(spec),))
    db.close()


def test_an_old_store_is_read_as_it_is_and_migrated_by_a_writer(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    _version_1_store(path, {"url": "u", "headers": {"Authorization": "Bearer sk-old-secret", "X-A": "1"}})
    reader = ResultStore(f"sqlite:///{path}", read_only=True)
    run = reader.get_run(1)
    reader.close()
    assert run is not None and run["status"] == "running" and "pid" not in run
    assert run["spec"]["headers"] == {"Authorization": "<redacted>", "X-A": "1"}
    assert any(b"sk-old-secret" in p.read_bytes() for p in tmp_path.glob("old.db*"))  # a reader changes nothing
    writer = ResultStore(f"sqlite:///{path}")
    run_id = writer.create_run(target="u", api="a", model="m", spec={}, engine=None, host=None)
    writer.close()
    reopened = ResultStore(f"sqlite:///{path}", read_only=True)
    assert reopened.get_run(run_id)["pid"] == os.getpid()  # type: ignore[index]
    assert reopened.get_run(1)["status"] == "running"  # type: ignore[index]  # no process to judge it by
    reopened.close()
    assert all(b"sk-old-secret" not in p.read_bytes() for p in tmp_path.glob("old.db*"))


def test_a_version_3_store_without_workload_reads_and_gains_it(tmp_path: Path) -> None:
    path = tmp_path / "v3.db"
    store = ResultStore(f"sqlite:///{path}")
    run_id = store.create_run(target="t", api="a", model="m", spec={}, engine=None, host=None)
    store.append(run_id, RequestRecord(index=0, sent_ns=1, end_ns=2))
    store.close()
    db = sqlite3.connect(path)
    with db:
        for column in ADDED_REQUEST_COLUMNS:
            db.execute(f"ALTER TABLE requests DROP COLUMN {column}")
    db.close()
    reader = ResultStore(f"sqlite:///{path}", read_only=True)
    assert [r.session for r in reader.load_records(run_id)] == [None]
    reader.close()
    writer = ResultStore(f"sqlite:///{path}")
    writer.append(run_id, RequestRecord(index=1, sent_ns=1, end_ns=2, session=3, turn=1))
    writer.close()
    again = ResultStore(f"sqlite:///{path}", read_only=True)
    assert [(r.session, r.turn) for r in again.load_records(run_id)] == [(None, None), (3, 1)]
    again.close()


def test_a_run_of_a_process_that_is_gone_is_aborted_and_summarised(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'r.db'}"
    store = ResultStore(url)
    run_id = store.create_run(target="t", api="a", model="m", spec={"slo_e2e_ms": 1000}, engine=None, host=None)
    store.start_step(run_id, 0, {"concurrency": 1})
    for index in range(3):
        store.append(run_id, RequestRecord(index=index, sent_ns=10, first_token_ns=20, last_token_ns=40,
                                           end_ns=50, event_ns=[20, 30, 40], event_tokens=[1.0, 1.0, 1.0],
                                           output_tokens=3, output_tokens_source="usage", status=200))
    store.close()
    assert ResultStore(url, read_only=True).get_run(run_id)["status"] == "running"  # type: ignore[index]
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    db = sqlite3.connect(tmp_path / "r.db")
    with db:
        db.execute("UPDATE runs SET pid = ?", (dead.pid,))
    db.close()
    reader = ResultStore(url, read_only=True)
    assert reader.aborted == [run_id]
    run = reader.get_run(run_id)
    assert run is not None and run["status"] == "aborted"
    assert run["steps"][0]["interrupted"] and run["steps"][0]["summary"]["requests_completed"] == 3
    assert run["steps"][0]["summary"]["goodput_rps"] > 0
    reader.close()
    assert ResultStore(url).aborted == []  # done once


def test_a_run_reads_back_typed_and_round_trips(tmp_path: Path) -> None:
    store = ResultStore(f"sqlite:///{tmp_path / 'r.db'}")
    engine = {"engine": "llama.cpp", "model_file": "/m.gguf", "argv": ["llama-server", "-ctk", "q8_0"], "threads": 2}
    run_id = store.create_run(target="http://x/v1", api="openai-chat", model="m", spec={"a": 1}, engine=engine,
                              host={"cpu": "c"}, label="l")
    loads = [LoadStep("synchronous"), LoadStep("concurrency", 4),
             LoadStep("rate", rate=2.5, arrival="gamma", burstiness=0.5, max_concurrency=8)]
    health = ClientHealth(loop_lag_p99_ms=0.2, loop_lag_max_ms=0.4, cpu_fraction=0.1, client_lag_p99_ms=None,
                          problems=["cpu"], saturated=True, verdict="v")
    for index, load in enumerate(loads):
        store.start_step(run_id, index, load.label())
        store.finish_step(run_id, index, {"requests_completed": 0}, health.to_json(), interrupted=index == 2)
    store.finish_run(run_id, "completed")
    run, data, missing = store.run(run_id), store.get_run(run_id), store.run(run_id + 1)
    store.close()
    assert run is not None and data is not None and missing is None
    assert (run.id, run.status, run.target, run.label, run.spec) == (run_id, "completed", "http://x/v1", "l", {"a": 1})
    assert run.engine is not None and run.engine.is_llamacpp and run.engine.model_file == "/m.gguf"
    assert run.engine.argv == ("llama-server", "-ctk", "q8_0") and run.engine.facts["threads"] == 2
    assert [s.load for s in run.steps] == loads and [s.index for s in run.steps] == [0, 1, 2]
    assert all(s.health == health for s in run.steps) and [s.interrupted for s in run.steps] == [False, False, True]
    assert run.to_json() == data and StoredRun.from_json(data) == run


def test_a_partial_or_missing_health_reads_as_none() -> None:
    assert stored_health(None) is None and stored_health({"saturated": True}) is None
    old = stored_health({"loop_lag_p99_ms": 1, "loop_lag_max_ms": 2, "cpu_fraction": 0.5, "client_lag_p99_ms": None,
                         "queue_ms": 3})  # a field it no longer has is dropped
    assert old is not None and old.loop_lag_max_ms == 2 and not old.saturated
    assert load_of({}) is None and load_of({"concurrency": 2}) == LoadStep("concurrency", 2)
