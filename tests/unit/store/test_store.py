"""The results store keeps every record exactly, written from a background thread (on SQLite and PostgreSQL)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

import tokometer.store.store as store_module
from tokometer.load.profiles import LoadStep
from tokometer.load.selfcheck import ClientHealth
from tokometer.metrics.summary import SLO, summarize
from tokometer.records import RequestRecord, ServerTiming
from tokometer.store import ResultStore, StoredRun
from tokometer.store.runs import load_of, stored_health
from tokometer.util.errors import StoreError


def _execute(url: str, sql: str, **params: object) -> None:
    """Change a store behind the code's back (as another program, or an older tokometer, would)."""
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text(sql), params)
    engine.dispose()


def test_records_round_trip(store_url: str) -> None:
    store = ResultStore(store_url)
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
    late = RequestRecord(index=5, warmup=True, due_ns=2**62, sent_ns=2**62 + 1, end_ns=2**63 - 1,
                         event_ns=[2**62 + 5, -1], event_tokens=[0.25, 1e300])  # 64-bit stamps, any float
    for record in (original, failed, late):
        store.append(run_id, record)
    store.finish_step(run_id, 0, {"requests_completed": 1, "ttft_ms": None, "nested": {"p": [1.5, 2]}},
                      {"saturated": False}, interrupted=False, server={"kv": 0.5}, gpu=[{"util": 1.0}])
    store.finish_run(run_id, "completed")
    loaded = store.load_records(run_id)
    original.output_text = ""  # answers' text is not stored
    assert loaded == [original, failed, late]
    run = store.get_run(run_id)
    assert run is not None and run["status"] == "completed" and run["steps"][0]["load"] == {"concurrency": 2}
    step = run["steps"][0]
    assert step["summary"]["nested"] == {"p": [1.5, 2]} and step["interrupted"] is False
    assert (step["server"], step["gpu"]) == ({"kv": 0.5}, [{"util": 1.0}])
    assert [r["id"] for r in store.list_runs()] == [run_id]
    assert store.get_run(2**62) is None and store.load_records(2**62) == []  # ids beyond 32 bits: none, no error
    store.close()


def test_json_that_is_not_finite_is_kept_as_null(store_url: str) -> None:
    store = ResultStore(store_url)
    run_id = store.create_run(target="t", api="a", model="m", spec={"x": float("nan")}, engine=None, host=None)
    store.start_step(run_id, 0, {"concurrency": 1})
    store.finish_step(run_id, 0, {"ratio": float("inf"), "ok": 1.0}, {}, interrupted=False)
    run = store.get_run(run_id)
    store.close()
    assert run is not None and run["spec"] == {"x": None} and run["steps"][0]["summary"] == {"ratio": None, "ok": 1.0}


def test_an_error_detail_with_a_nul_byte_is_kept_readable(store_url: str) -> None:
    store = ResultStore(store_url)
    run_id = store.create_run(target="t", api="a", model="m", spec={}, engine=None, host=None)
    store.append(run_id, RequestRecord(index=0, sent_ns=1, end_ns=2, error="http_5xx", error_detail="HTTP 500: a\x00b"))
    store.flush()
    assert [r.error_detail for r in store.load_records(run_id)] == ["HTTP 500: a\ufffdb"]
    store.close()


def test_store_survives_reopen(store_url: str) -> None:
    store = ResultStore(store_url)
    run_id = store.create_run(target="t", api="a", model="m", spec={}, engine=None, host=None)
    store.append(run_id, RequestRecord(index=0, sent_ns=1, end_ns=2))
    store.close()
    again = ResultStore(store_url)
    assert len(again.load_records(run_id)) == 1
    again.close()


def test_tags_name_runs_and_move(store_url: str) -> None:
    store = ResultStore(store_url)
    first, second = (store.create_run(target="t", api="a", model="m", spec={}, engine=None, host=None)
                     for _ in range(2))
    store.tag("main", first)
    store.tag("main", second)
    store.tag("old", first)
    assert store.tags() == {"main": second, "old": first} and store.resolve("baseline:main") == second
    store.close()
    reader = ResultStore(store_url, read_only=True)
    assert reader.resolve("tag:old") == first
    reader.close()


def test_a_run_of_a_process_that_is_gone_is_aborted_and_summarised(store_url: str) -> None:
    store = ResultStore(store_url)
    run_id = store.create_run(target="t", api="a", model="m", spec={"slo_e2e_ms": 1000}, engine=None, host=None)
    store.start_step(run_id, 0, {"concurrency": 1})
    for index in range(3):
        store.append(run_id, RequestRecord(index=index, sent_ns=10, first_token_ns=20, last_token_ns=40,
                                           end_ns=50, event_ns=[20, 30, 40], event_tokens=[1.0, 1.0, 1.0],
                                           output_tokens=3, output_tokens_source="usage", status=200))
    store.close()
    alive = ResultStore(store_url, read_only=True)
    assert alive.get_run(run_id)["status"] == "running"  # type: ignore[index]
    alive.close()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    _execute(store_url, "UPDATE runs SET pid = :pid", pid=dead.pid)
    reader = ResultStore(store_url, read_only=True)
    assert reader.aborted == [run_id]
    run = reader.get_run(run_id)
    assert run is not None and run["status"] == "aborted"
    assert run["steps"][0]["interrupted"] and run["steps"][0]["summary"]["requests_completed"] == 3
    assert run["steps"][0]["summary"]["goodput_rps"] > 0
    reader.close()
    again = ResultStore(store_url)
    assert again.aborted == []  # done once
    again.close()


def test_a_run_reads_back_typed_and_round_trips(store_url: str) -> None:
    store = ResultStore(store_url)
    engine = {"engine": "llama.cpp", "model_file": "/m.gguf", "argv": ["llama-server", "-ctk", "q8_0"], "threads": 2}
    run_id = store.create_run(target="http://x/v1", api="openai-chat", model="m", spec={"a": 1}, engine=engine,
                              host={"cpu": "c"}, label="l")
    loads = [LoadStep("synchronous"), LoadStep("concurrency", 4),
             LoadStep("rate", rate=2.5, arrival="gamma", burstiness=0.5, max_concurrency=8)]
    health = ClientHealth(loop_lag_p99_ms=0.2, loop_lag_max_ms=0.4, cpu_fraction=0.1, client_lag_p99_ms=None,
                          problems=["cpu"], saturated=True, verdict="v")
    records = [RequestRecord(index=i, sent_ns=1_000 * i, first_token_ns=1_000 * i + 5_000_000,
                             last_token_ns=1_000 * i + 9_000_000, end_ns=1_000 * i + 9_500_000, event_ns=[5, 7, 9],
                             event_tokens=[1.0, 1.0, 1.0], status=200, output_tokens=3, output_tokens_source="usage",
                             input_tokens=8, input_tokens_source="usage") for i in range(12)]
    records.append(RequestRecord(index=12, sent_ns=3, end_ns=4, error="http_5xx", error_detail="HTTP 500", status=500))
    summaries = [summarize(records[:n], SLO(ttft_ms=5.0)) for n in (0, 5, 13)]  # none measured, a few, all
    for index, (load, summary) in enumerate(zip(loads, summaries, strict=True)):
        store.start_step(run_id, index, load.label())
        store.finish_step(run_id, index, summary.to_json(), health.to_json(), interrupted=index == 2)
    sessions = LoadStep("concurrency", 2, sessions=True)  # a mark a LoadStep is not rebuilt with: kept as saved
    store.start_step(run_id, 3, {**sessions.label(), "trial": 1}, started_at="2026-01-01T00:00:00.000+00:00")
    store.finish_run(run_id, "completed")
    run, data, missing = store.run(run_id), store.get_run(run_id), store.run(run_id + 1)
    store.close()
    assert run is not None and data is not None and missing is None
    assert (run.id, run.status, run.target, run.label) == (run_id, "completed", "http://x/v1", "l")
    assert dict(run.spec) == {"a": 1}
    assert run.engine is not None and run.engine.is_llamacpp and run.engine.model_file == "/m.gguf"
    assert run.engine.argv == ("llama-server", "-ctk", "q8_0") and run.engine.facts["threads"] == 2
    assert [s.load for s in run.steps[:3]] == loads and [s.index for s in run.steps] == [0, 1, 2, 3]
    assert all(s.health == health for s in run.steps[:3]) and [s.interrupted for s in run.steps] == [False, False, True,
                                                                                                    False]
    assert [s.summary for s in run.steps] == [*summaries, None]  # typed, as they were written
    assert run.steps[3].trial == 1 and run.steps[3].started_at == "2026-01-01T00:00:00.000+00:00"
    assert run.steps[3].to_json()["load"] == {"concurrency": 2, "sessions": True, "trial": 1}
    assert run.to_json() == data and StoredRun.from_json(data) == run


def test_a_partial_or_missing_health_reads_as_none() -> None:
    assert stored_health(None) is None and stored_health({"saturated": True}) is None
    old = stored_health({"loop_lag_p99_ms": 1, "loop_lag_max_ms": 2, "cpu_fraction": 0.5, "client_lag_p99_ms": None,
                         "queue_ms": 3})  # a field it no longer has is dropped
    assert old is not None and old.loop_lag_max_ms == 2 and not old.saturated
    assert load_of({}) is None and load_of({"concurrency": 2}) == LoadStep("concurrency", 2)


def _sqlite_store(tmp_path: Path) -> tuple[ResultStore, int]:
    store = ResultStore(f"sqlite:///{tmp_path / 'runs.db'}")
    return store, store.create_run(target="t", api="a", model="m", spec={}, engine=None, host=None)


def _flush_within(store: ResultStore, seconds: float) -> BaseException | None:
    """What ``store.flush()`` raised (None: nothing), failing the test if it has not returned within ``seconds``."""
    raised: list[BaseException | None] = []

    def flush() -> None:
        try:
            store.flush()
        except BaseException as exc:  # handed to the test
            raised.append(exc)
        else:
            raised.append(None)

    waiter = threading.Thread(target=flush, daemon=True)
    waiter.start()
    waiter.join(seconds)
    assert raised, f"flush() still waiting after {seconds} s"
    return raised[0]


def test_a_row_beyond_sqlite_s_integers_is_the_flush_s_error_and_the_writer_goes_on(tmp_path: Path) -> None:
    store, run_id = _sqlite_store(tmp_path)
    store.append(run_id, RequestRecord(index=0, sent_ns=1, end_ns=10**21))  # sqlite3: OverflowError, not SQLAlchemy's
    error = _flush_within(store, 60)
    assert isinstance(error, StoreError) and "too large" in str(error) and "\n" not in str(error)
    store.append(run_id, RequestRecord(index=1, sent_ns=1, end_ns=2))  # the writer is still there
    store.flush()
    assert [r.index for r in store.load_records(run_id)] == [1]
    store.close()


def test_a_failed_batch_never_leaves_flush_waiting_for_the_rest(tmp_path: Path) -> None:
    store, run_id = _sqlite_store(tmp_path)
    store.append(run_id, RequestRecord(index=0, sent_ns=1, end_ns=10**21))
    for index in range(1, 20_001):
        store.append(run_id, RequestRecord(index=index, sent_ns=1, end_ns=2))
    assert isinstance(_flush_within(store, 120), StoreError)
    assert 0 < len(store.load_records(run_id)) <= 20_000  # the batches after the bad one are kept
    store.close()


def test_stamps_beyond_64_bits_are_a_store_error_not_a_traceback(tmp_path: Path) -> None:
    store, run_id = _sqlite_store(tmp_path)
    with pytest.raises(StoreError, match=r"request 7 .*64-bit"):
        store.append(run_id, RequestRecord(index=7, sent_ns=1, end_ns=2, event_ns=[10**20], event_tokens=[1.0]))
    store.close()


def test_flush_and_close_give_up_on_a_writer_that_makes_no_progress(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_module, "WRITE_DEADLINE_S", 0.5)
    store, run_id = _sqlite_store(tmp_path)
    locker = sqlite3.connect(tmp_path / "runs.db", isolation_level=None)
    locker.execute("BEGIN EXCLUSIVE")  # another program holds the write lock: the writer waits on SQLite's busy timeout
    try:
        store.append(run_id, RequestRecord(index=0, sent_ns=1, end_ns=2))
        started = time.monotonic()
        error = _flush_within(store, 10)
        assert isinstance(error, StoreError) and "1 request" in str(error) and "0.5 s" in str(error)
        with pytest.raises(StoreError, match=r"0\.5 s"):
            store.close()
        assert time.monotonic() - started < 10
    finally:
        locker.execute("ROLLBACK")
        locker.close()


def test_a_run_keeps_its_prompt_source_warnings_and_times_as_given(store_url: str) -> None:
    """What ``bench --json`` writes of a run beyond its rows: kept, so ``runs --id`` prints the same document;
    a run saved without them (an import, a run of an older tokometer) reads as having none."""
    store = ResultStore(store_url)
    given = store.create_run(target="t", api="a", model="m", spec={}, engine=None, host=None,
                             prompt_source="synthetic(8 tokens, words)", started_at="2026-01-01T00:00:00.001+00:00")
    store.finish_run(given, "completed", warnings=["the run's", "a step's"],
                     finished_at="2026-01-01T00:00:09.999+00:00")
    bare = store.create_run(target="t", api="a", model="m", spec={}, engine=None, host=None)
    store.finish_run(bare, "completed", warnings=[])
    run, none = store.run(given), store.run(bare)
    store.close()
    assert run is not None and none is not None
    assert (run.prompt_source, run.warnings) == ("synthetic(8 tokens, words)", ("the run's", "a step's"))
    assert (run.started_at, run.finished_at) == ("2026-01-01T00:00:00.001+00:00", "2026-01-01T00:00:09.999+00:00")
    assert (none.prompt_source, none.warnings) == (None, ())
    assert run.saved_by is not None and run.saved_by.pid is not None and run.saved_by.schema_version == 5


def test_a_database_error_hides_the_password_but_not_the_words_that_hold_its_letters() -> None:
    """A one-letter password had turned "port" into "***ort" and "accepting" into "acce***ting": a short secret is
    hidden where it stands as a word of its own, a long one wherever it appears, either in its URL-quoted
    spelling too. The refused connection is a real one (psycopg, to a closed port on loopback)."""
    from sqlalchemy import create_engine

    from tokometer.store.database import database_error

    url = "postgresql+psycopg://u:p@127.0.0.1:1/x"
    try:
        with create_engine(url).connect():
            raise AssertionError("port 1 accepted a PostgreSQL connection")
    except Exception as exc:  # the driver's own error, whatever its class
        message = database_error(exc, url)
    assert "port 1 failed" in message and "accepting" in message and "***" not in message, message
    short = RuntimeError("authentication failed for user u (password p) at port 1")
    assert database_error(short, url) == "authentication failed for user u (password ***) at port 1"
    long_url = "postgresql+psycopg://u:p%40ss%20w%C3%B6rd@127.0.0.1:1/x"  # the password "p@ss wörd"
    echoed = RuntimeError("password p%40ss%20w%C3%B6rd, or xp@ss wördy, at port 1")
    assert database_error(echoed, long_url) == "password ***, or x***y, at port 1"
