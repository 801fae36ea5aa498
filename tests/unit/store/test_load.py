"""A store is input: what is read back is bounded and checked at one boundary (`tokometer.store.load`), and a bad
row is one StoreError line naming the run and the field. Each case here is a file changed as an attacker would
change it by hand (tests/fuzz/test_store_contents.py generates many more, through the commands)."""

from __future__ import annotations

import socket
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from tokometer.load.profiles import LoadStep
from tokometer.load.selfcheck import ClientHealth
from tokometer.metrics.summary import summarize
from tokometer.records import RequestRecord
from tokometer.store import ResultStore, database
from tokometer.store.load import MAX_TEXT_CHARS
from tokometer.util.errors import StoreError


def _saved(path: Path) -> Path:
    """A store of one finished run of one step of two requests, at ``path``."""
    store = ResultStore(f"sqlite:///{path}")
    run_id = store.create_run(target="http://x/v1", api="openai-chat", model="m", spec={"seed": 1}, engine=None,
                              host=None)
    store.start_step(run_id, 0, LoadStep("concurrency", concurrency=2).label())
    records = [RequestRecord(index=i, sent_ns=10, first_byte_ns=20, first_token_ns=20, last_token_ns=40, end_ns=50,
                             event_ns=[20, 40], event_tokens=[1.0, 1.0], output_tokens=2, status=200)
               for i in range(2)]
    for record in records:
        store.append(run_id, record)
    health = ClientHealth(loop_lag_p99_ms=0.1, loop_lag_max_ms=0.2, cpu_fraction=0.1, client_lag_p99_ms=None)
    store.finish_step(run_id, 0, summarize(records).to_json(), health.to_json(), interrupted=False)
    store.finish_run(run_id, "completed")
    store.close()
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA journal_mode=DELETE")
        for table in ("runs", "steps", "requests"):  # without NOT NULL or types, as a file written by hand may be
            db.executescript(f"CREATE TABLE {table}_x AS SELECT * FROM {table}; DROP TABLE {table}; "
                             f"ALTER TABLE {table}_x RENAME TO {table};")
    return path


def _read_all(path: Path) -> None:
    reader = ResultStore(f"sqlite:///{path}", read_only=True)
    try:
        reader.newest()
        reader.load_records(1)
    finally:
        reader.close()


def _refused(path: Path, sql: str) -> str:
    with sqlite3.connect(path) as db:
        db.executescript(sql.replace("HOST", socket.gethostname()))
    with pytest.raises(StoreError) as caught:
        _read_all(path)
    message = str(caught.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize(("sql", "says"), [
    ("UPDATE runs SET spec = '{bad'", "run 1: spec: not valid JSON"),
    ("UPDATE runs SET spec = '[1, 2]'", "run 1: spec: not an object"),
    ("UPDATE runs SET status = NULL", "run 1: status: missing (NULL)"),
    ("UPDATE runs SET engine = '\"x\"'", "run 1: engine: not an object"),
    ("UPDATE runs SET warnings = '[1]'", "run 1: warnings[0]: not text"),
    ("UPDATE runs SET id = 'abc'", "run abc: id: not a whole number"),
    (f"UPDATE runs SET label = hex(zeroblob({MAX_TEXT_CHARS}))", "run 1: label: not UTF-8 text of at most"),
    ("UPDATE steps SET summary = '{nope'", "run 1: steps[0].summary: not valid JSON"),
    ("UPDATE steps SET summary = json_set(summary, '$.ttft_ms.p50', 'slow')", "run 1: steps[0].summary"),
    ("UPDATE steps SET summary = json_set(summary, '$.requests_completed', 1e300)", "steps[0].summary"),
    ("UPDATE steps SET load = '{\"concurrency\": \"many\"}'", "run 1: steps[0].load"),
    ("UPDATE steps SET health = json_set(health, '$.cpu_fraction', 'x')", "run 1: steps[0].health"),
    ("UPDATE steps SET step = 'first'", "run 1: steps[0].step: not a whole number"),
    ("UPDATE steps SET gpu = '{\"a\": 1}'", "run 1: steps[0].gpu: not a list"),
    ("UPDATE requests SET event_ns = x'010203'", "run 1: requests.event_ns: not an array of 8-byte values"),
    ("UPDATE requests SET event_ns = 'text'", "run 1: requests.event_ns: not an array of 8-byte values"),
    ("UPDATE requests SET event_tokens = x'00'", "run 1: requests.event_tokens"),
    ("UPDATE requests SET server = '[1]'", "run 1: requests.server: not an object"),
    ("UPDATE requests SET server = '{\"prompt_tokens\": \"many\"}'", "server.prompt_tokens: not a whole number"),
    ("UPDATE requests SET error = 'gremlins'", "error: not one of"),
    ("UPDATE requests SET due_ns = 'soon'", "run 1: requests.due_ns: not a whole number"),
    ("UPDATE requests SET due_ns = 1e30", "run 1: requests.due_ns: not a whole number"),
    ("UPDATE requests SET chunk_count = NULL", "run 1: requests.chunk_count: missing (NULL)"),
    ("UPDATE requests SET event_tokens = x'000000000000f07f000000000000f07f'", "event_tokens: not finite"),
    ("UPDATE requests SET workload = '{\"session\": \"one\"}'", "workload.session: not a whole number"),
    ("UPDATE requests SET workload = '[' || replace(hex(zeroblob(2000)), '00', '[')", "requests.workload"),
    ("UPDATE runs SET status = 'running', hostname = 'HOST', pid = 'abc'", "run 1: pid: not a whole number"),
])
def test_a_bad_value_is_one_line_naming_the_run_and_the_field(tmp_path: Path, sql: str, says: str) -> None:
    message = _refused(_saved(tmp_path / "runs.db"), sql)
    assert says in message, message


@pytest.mark.parametrize(("sql", "says"), [
    ("UPDATE alembic_version SET version_num = 'ffffffff'", "made by a newer tokometer"),
    ("DROP TABLE steps", "has no steps table"),
    ("DROP TABLE requests", "has no requests table"),
])
def test_a_store_of_another_shape_is_refused_when_opened(tmp_path: Path, sql: str, says: str) -> None:
    assert says in _refused(_saved(tmp_path / "runs.db"), sql)


_ENDLESS = "WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c)"


@pytest.mark.parametrize("table", ["runs", "steps", "requests"])
def test_a_table_replaced_by_an_endless_view_is_stopped_at_the_deadline(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, table: str) -> None:
    monkeypatch.setattr(database, "READ_DEADLINE_S", 0.5)
    sql = f"ALTER TABLE {table} RENAME TO {table}_kept; CREATE VIEW {table} AS {_ENDLESS} SELECT t.* FROM c, " \
          f"{table}_kept t"
    assert "a read took longer than 0.5 s" in _refused(_saved(tmp_path / "runs.db"), sql)


def test_a_value_beyond_the_readers_bound_is_refused_not_read(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(database, "MAX_VALUE_BYTES", 1 << 20)
    message = _refused(_saved(tmp_path / "runs.db"), "UPDATE runs SET model = hex(zeroblob(1 << 20))")
    assert "run 1: model" in message or "larger than 1 MiB" in message, message


def test_the_recovery_of_a_killed_run_checks_what_it_reads(tmp_path: Path) -> None:
    path = _saved(tmp_path / "runs.db")
    sql = ("UPDATE runs SET status = 'running', hostname = 'HOST', pid = 999999999; UPDATE steps SET summary = NULL; "
           "UPDATE requests SET event_ns = x'0102'")
    message = _refused(path, sql)
    assert "run 1: requests.event_ns" in message, message
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT status FROM runs").fetchone() == ("running",)  # nothing of it changed


@pytest.mark.timing  # the reads after the stopped trigger must each take under the shortened deadline
def test_a_trigger_that_never_ends_is_stopped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(database, "READ_DEADLINE_S", 2.0)
    path = _saved(tmp_path / "runs.db")
    with sqlite3.connect(path) as db:
        db.executescript(f"UPDATE runs SET status = 'running', hostname = '{socket.gethostname()}', pid = 999999999;"
                         f"CREATE TABLE sink(n); CREATE TRIGGER t AFTER UPDATE ON runs BEGIN INSERT INTO sink "
                         f"{_ENDLESS} SELECT n FROM c; END;")
    reader = ResultStore(f"sqlite:///{path}", read_only=True)  # the recovery fails; the runs stay as they were
    try:
        assert reader.aborted == [] and reader.newest()[0].status == "running"
    finally:
        reader.close()


def test_an_endless_view_on_postgresql_is_stopped_by_its_statement_timeout(
        new_store_url: Callable[[], str], monkeypatch: pytest.MonkeyPatch) -> None:
    url = new_store_url()
    if not url.startswith("postgresql"):
        return  # SQLite: above
    monkeypatch.setattr(database, "READ_DEADLINE_S", 0.5)
    ResultStore(url).close()
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text(f"ALTER TABLE runs RENAME TO runs_kept; CREATE VIEW runs AS {_ENDLESS} SELECT r.* "
                          f"FROM c, runs_kept r"))
    engine.dispose()
    with pytest.raises(StoreError, match=r"a read took longer than 0\.5 s"):
        reader = ResultStore(url, read_only=True)
        try:
            reader.newest()
        finally:
            reader.close()


def test_a_bench_json_file_is_checked_as_the_store_checks_a_run(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from tokometer.cli import main
    from tokometer.report.json_out import run_json

    reader = ResultStore(f"sqlite:///{_saved(tmp_path / 'runs.db')}", read_only=True)
    run = reader.run(1)
    reader.close()
    assert run is not None
    document = run_json(run)
    document["steps"][0]["summary"]["requests_completed"] = "many"
    path = tmp_path / "result.json"
    path.write_text(json.dumps(document))
    with pytest.raises(SystemExit) as done:
        main(["report", str(path), "--format", "csv"])
    err = capsys.readouterr().err.strip()
    assert done.value.code == 2 and len(err.splitlines()) == 1, err
    assert "steps[0].summary.requests_completed: not a whole number" in err, err
