"""The shared results store on SQLite and PostgreSQL alike: migrations, old stores, newer stores, concurrent
benches, every reading command, and the one-line errors of a server that refuses."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, inspect, text

from tests.conftest import SimServer, run_cli, run_cli_here
from tests.store_backends import postgres_server
from tokometer.records import RequestRecord
from tokometer.store import ResultStore
from tokometer.store.migrate import head
from tokometer.store.schema import ADDED_REQUEST_COLUMNS, ADDED_RUN_COLUMNS, ADDED_STEP_COLUMNS, metadata
from tokometer.util.errors import StoreError

_SECRET = "sk-old-secret"


def _sql(url: str, sql: str, **params: object) -> list[tuple[object, ...]]:
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            result = conn.execute(text(sql), params)
            return [tuple(row) for row in result] if result.returns_rows else []
    finally:
        engine.dispose()


def _schema_drift(url: str) -> list[object]:
    """What differs between the store's tables and `tokometer.store.schema` (nothing, when migrated right)."""
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return list(compare_metadata(MigrationContext.configure(conn), metadata))
    finally:
        engine.dispose()


def _columns(url: str) -> dict[str, set[str]]:
    engine = create_engine(url)
    try:
        found = inspect(engine)
        return {table: {c["name"] for c in found.get_columns(table)} for table in found.get_table_names()}
    finally:
        engine.dispose()


def test_the_migrations_make_the_schema_the_code_declares(store_url: str) -> None:
    ResultStore(store_url).close()
    assert _schema_drift(store_url) == []
    assert _sql(store_url, "SELECT version_num FROM alembic_version") == [(head(),)]


def _old_store(url: str, version: int) -> None:
    """A store as tokometer made it before Alembic, at schema ``version`` (1 or 3): its tables and columns
    only, no ``alembic_version``; one run with a step, two requests and headers saved as given."""
    engine = create_engine(url)
    metadata.create_all(engine)
    dropped = {"requests": ADDED_REQUEST_COLUMNS, "runs": ("prompt_source", "warnings")}  # 4's, and revision 0002's
    if version < 3:
        dropped |= {"runs": ADDED_RUN_COLUMNS, "steps": ADDED_STEP_COLUMNS}
    with engine.begin() as conn:
        if version < 3:
            conn.execute(text("DROP TABLE tags"))
        for table, columns in dropped.items():
            for column in columns:
                conn.execute(text(f"ALTER TABLE {table} DROP COLUMN {column}"))
        spec = json.dumps({"url": "u", "headers": {"Authorization": f"Bearer {_SECRET}", "X-A": "1"}})
        conn.execute(text("INSERT INTO runs (started_at, status, target, api, model, spec, tokometer_version, "
                          "schema_version) VALUES ('t', 'completed', 'u', 'a', 'm', :spec, '0.1.0', :v)"),
                     {"spec": spec, "v": version})
        conn.execute(text("INSERT INTO steps (run_id, step, load, started_at, summary, interrupted) "
                          "VALUES (1, 0, '{\"concurrency\": 1}', 't', '{\"requests_completed\": 2}', false)"))
        for index in range(2):
            conn.execute(text("INSERT INTO requests (run_id, step, idx, warmup, due_ns, connect_ns, sent_ns, "
                              "first_byte_ns, first_token_ns, last_token_ns, end_ns, chunk_count, status) "
                              "VALUES (1, 0, :i, false, 0, 1, 2, 3, 4, 5, :end, 1, 200)"),
                         {"i": index, "end": 6 + index})
    engine.dispose()


@pytest.mark.parametrize("version", [1, 3])
def test_an_old_store_is_read_as_it_is_and_upgraded_by_a_writer(store_url: str, version: int) -> None:
    _old_store(store_url, version)
    before = _columns(store_url)
    reader = ResultStore(store_url, read_only=True)
    run, records = reader.get_run(1), reader.load_records(1)
    reader.close()
    assert run is not None and run["status"] == "completed" and run["spec"]["headers"]["Authorization"] == "<redacted>"
    assert [r.end_ns for r in records] == [6, 7] and records[0].session is None
    assert _columns(store_url) == before and "alembic_version" not in before  # a reader changed nothing
    writer = ResultStore(store_url)
    new = writer.create_run(target="t", api="a", model="m", spec={}, engine=None, host=None)
    writer.append(new, RequestRecord(index=0, sent_ns=1, end_ns=2, session=3, turn=1))
    writer.close()
    assert _schema_drift(store_url) == [] and _sql(store_url, "SELECT version_num FROM alembic_version") == [(head(),)]
    again = ResultStore(store_url, read_only=True)
    kept, records = again.get_run(1), again.load_records(1)
    assert kept is not None and {k: kept[k] for k in ("status", "target", "model")} == \
        {"status": "completed", "target": "u", "model": "m"}
    assert kept["steps"][0]["summary"] == {"requests_completed": 2} and [r.end_ns for r in records] == [6, 7]
    assert [(r.session, r.turn) for r in again.load_records(new)] == [(3, 1)]
    assert again.tags() == {}
    saved = again.run(1)
    assert saved is not None and (saved.prompt_source, saved.warnings) == (None, ())  # none kept before 0002
    again.close()
    stored_spec = str(_sql(store_url, "SELECT spec FROM runs WHERE id = 1")[0][0])
    assert (_SECRET in stored_spec) == (version >= 2)  # version 1's secrets are overwritten on upgrade


def test_an_old_sqlite_store_keeps_its_bytes_until_a_writer_opens_it(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    _old_store(f"sqlite:///{path}", 1)
    ResultStore(f"sqlite:///{path}", read_only=True).close()
    assert any(_SECRET.encode() in p.read_bytes() for p in tmp_path.glob("old.db*"))
    ResultStore(f"sqlite:///{path}").close()
    assert all(_SECRET.encode() not in p.read_bytes() for p in tmp_path.glob("old.db*"))  # zeroed, not freed


def _one_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    return lines[0]


def test_a_store_made_by_a_newer_tokometer_is_refused(store_url: str) -> None:
    ResultStore(store_url).close()
    _sql(store_url, "UPDATE alembic_version SET version_num = 'f00d_future'")
    for read_only in (True, False):
        with pytest.raises(StoreError, match=r"made by a newer tokometer \(schema revision f00d_future"):
            ResultStore(store_url, read_only=read_only)
    line = _one_line(run_cli("runs", "--store", store_url))
    assert "upgrade tokometer" in line and "tokometer:tokometer@" not in line


_OPEN_AT = """
import sys, time
from tokometer.store import ResultStore
start = float(sys.argv[2])
time.sleep(max(0.0, start - time.time()))
store = ResultStore(sys.argv[1])
store.create_run(target="t", api="a", model="m", spec={}, engine=None, host=None)
store.close()
"""


def test_a_fresh_store_opened_by_several_processes_at_once(new_store_url: Callable[[], str]) -> None:
    for _ in range(3):
        url = new_store_url()
        start = __import__("time").time() + 1.5  # every process has imported everything by then
        processes = [subprocess.Popen([sys.executable, "-c", _OPEN_AT, url, str(start)],
                                      stderr=subprocess.PIPE, text=True) for _ in range(4)]
        errors = [p.communicate(timeout=60)[1] for p in processes]
        assert [p.returncode for p in processes] == [0] * 4, errors
        assert _sql(url, "SELECT count(*) FROM runs") == [(4,)]
        assert _sql(url, "SELECT count(*) FROM alembic_version") == [(1,)]


@pytest.mark.slow  # about 50 s in the parallel lane
def test_benches_write_one_store_at_once_and_every_reader_reads_it(
        sim_factory: Callable[..., SimServer], store_url: str, tmp_path: Path) -> None:
    sim = sim_factory("--ttft-ms", "5", "--itl-ms", "1")
    benches = [subprocess.Popen(
        [sys.executable, "-m", "tokometer", "bench", "--url", sim.openai_url, "-c", "4", "-n", "60", "--warmup", "2",
         "--input-tokens", "8", "--output-tokens", "8", "--label", f"b{i}", "--store", store_url, "-q"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(3)]
    outcomes = [b.communicate(timeout=120) for b in benches]
    assert [b.returncode for b in benches] == [0, 0, 0], outcomes
    reader = ResultStore(store_url, read_only=True)
    runs = reader.list_runs()
    counts = {r["label"]: len(reader.load_records(r["id"])) for r in runs}
    reader.close()
    assert sorted(r["status"] for r in runs) == ["completed"] * 3 and counts == {"b0": 62, "b1": 62, "b2": 62}
    first, second = sorted(r["id"] for r in runs)[:2]
    listed = run_cli("runs", "--store", store_url)
    assert listed.returncode == 0 and listed.stdout.count("completed") == 3, listed.stderr
    shown = run_cli_here("runs", "--id", str(first), "--store", store_url)
    assert shown.returncode == 0 and json.loads(shown.stdout)["steps"][0]["summary"]["requests_completed"] == 60
    tagged = run_cli_here("runs", "--tag", "main", "--id", str(first), "--store", store_url)
    assert tagged.returncode == 0, tagged.stderr
    compared = run_cli_here("compare", "baseline:main", str(second), "--store", store_url, "--json")
    assert compared.returncode in (0, 1) and json.loads(compared.stdout), compared.stderr
    report = tmp_path / "report.html"
    made = run_cli_here("report", str(first), str(second), "--store", store_url, "-o", str(report))
    assert made.returncode == 0 and report.stat().st_size > 1000, made.stderr
    hardware = tmp_path / "hw.toml"
    hardware.write_text('[[hardware]]\nname = "box"\nkind = "cpu"\nmemory_gb = 16\nbandwidth_gbs = 100\n'
                        'bf16_tflops_dense = 1\nsource = "made up"\n')
    estimated = run_cli("estimate", "--run", str(first), "--store", store_url, "-m", "gemma-3-270m", "-H", "box",
                        "--hardware-file", str(hardware))
    assert estimated.returncode == 0 and "MBU" in estimated.stdout, estimated.stderr


def test_a_server_that_refuses_is_one_line_without_the_password() -> None:
    from sqlalchemy.engine import make_url

    server = make_url(postgres_server())
    wrong = server.set(password="hunter2-wrong").render_as_string(hide_password=False)
    for command in (("runs",), ("bench", "--url", "http://127.0.0.1:9/v1", "-n", "1")):
        line = _one_line(run_cli(*command, "--store", wrong))
        assert "password authentication failed" in line and "hunter2" not in line, line
    closed = server.set(port=9, password="hunter2").render_as_string(hide_password=False)
    line = _one_line(run_cli("runs", "--store", closed))
    assert "Connection refused" in line and "hunter2" not in line and "***" in line, line
