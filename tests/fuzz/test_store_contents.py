"""Generated stores: a real small run saved by ``bench``, then its SQLite file changed as an attacker would change
it by hand (a column's value replaced by malformed or wrongly typed JSON, a value inside its JSON replaced, NULLs,
wrong column types, huge text, blobs of odd lengths, a table replaced by a view that never ends, a trigger, a
schema revision from the future, a missing table). ``runs``, ``runs --id``, ``report`` and ``compare`` must then
answer, or fail with one line naming what is wrong (exit status 2), within the reader's deadline, never with a
traceback (`tokometer.store.load` is the boundary that checks what is read).

The commands run in this process (`tokometer.cli.main`), so that the reader's deadline can be made short here
(`tokometer.store.database.READ_DEADLINE_S`: 60 s for users, 0.3 s in this test). Bounded by the suite's
Hypothesis profile (tests/fuzz/conftest.py): 30 examples of 6 commands each, about half a minute on 2 busy
cores with the run saved first.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import start_sim

_COMMANDS = (("runs",), ("runs", "--json"), ("runs", "--id", "2"), ("report", "2", "--format", "md"),
             ("report", "2", "--format", "json"), ("compare", "1", "2"))

_HOSTILE_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70), st.floats(),
    st.text(max_size=20), st.just([]), st.just({}), st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3), st.just("x" * 70_000))


@pytest.fixture(scope="module")
def saved_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A store holding two real runs of the simulator (the second with a time slice and a steady state)."""
    sim = start_sim("--ttft-ms", "1", "--itl-ms", "1")
    store = tmp_path_factory.mktemp("stores") / "base.db"
    try:
        for extra in ((), ("--time-slice", "1s", "--slo-ttft-ms", "500")):
            done = subprocess.run([sys.executable, "-m", "tokometer", "bench", "--url", sim.openai_url, "-c", "2",
                                   "-n", "6", "--input-tokens", "4", "--output-tokens", "5", "--store", str(store),
                                   *extra], capture_output=True, text=True, timeout=120)
            assert done.returncode == 0, done.stderr
    finally:
        sim.stop()
    with sqlite3.connect(store) as db:
        db.execute("PRAGMA journal_mode=DELETE")  # one file, copied whole
    yield store


def _loosen(db: sqlite3.Connection) -> None:
    """Each table again without its constraints (NOT NULL, types), as a file written by hand may hold them."""
    for table in ("runs", "steps", "requests"):
        db.executescript(f"CREATE TABLE {table}_loose AS SELECT * FROM {table}; DROP TABLE {table}; "
                         f"ALTER TABLE {table}_loose RENAME TO {table};")


def _columns(db: sqlite3.Connection, table: str) -> list[str]:
    return [row[1] for row in db.execute(f"PRAGMA table_info({table})")]


def _replace_inside(document: Any, path: list[int], value: Any) -> Any:
    """``document`` with the value ``path`` leads to (each number picks a key or an item) replaced by ``value``."""
    if not path or not isinstance(document, (dict, list)) or not document:
        return value
    if isinstance(document, dict):
        key = sorted(document)[path[0] % len(document)]
        return {**document, key: _replace_inside(document[key], path[1:], value)}
    i = path[0] % len(document)
    return [*document[:i], _replace_inside(document[i], path[1:], value), *document[i + 1:]]


@st.composite
def _column_change(draw: st.DrawFn) -> tuple[str, str, str, Any]:
    """Which table's which column (by position) and how: a raw SQL value, or a value put inside its JSON."""
    table = draw(st.sampled_from(["runs", "steps", "requests"]))
    column = draw(st.integers(min_value=0, max_value=30))
    how = draw(st.sampled_from(["inside", "inside", "inside", "raw"]))
    if how == "raw":
        raw = draw(st.sampled_from(["NULL", "'{bad'", "'[1,2]'", "'\"text\"'", "x'010203'", "x'00ff'", "-1",
                                    "9223372036854775807", "1e308", "'nan'", "hex(zeroblob(40000))",
                                    "'[' || replace(hex(zeroblob(600)), '00', '[') || ''"]))
        return table, str(column), how, raw
    path = draw(st.lists(st.integers(min_value=0, max_value=50), min_size=0, max_size=6))
    return table, str(column), how, (path, draw(_HOSTILE_VALUES))


def _change_column(db: sqlite3.Connection, change: tuple[str, str, str, Any]) -> None:
    table, position, how, what = change
    names = _columns(db, table)
    name = names[int(position) % len(names)]
    if how == "raw":
        db.execute(f'UPDATE {table} SET "{name}" = {what}')
        return
    path, value = what
    for rowid, stored in db.execute(f'SELECT rowid, "{name}" FROM {table}').fetchall():
        try:
            document = json.loads(stored) if isinstance(stored, str) else stored
        except ValueError:
            document = stored
        changed = _replace_inside(document, path, value)
        text = json.dumps(changed) if not isinstance(changed, (bytes, int, float)) or isinstance(changed, bool) \
            else changed
        if isinstance(text, int) and not -(2**63) <= text < 2**63:  # past SQLite's INTEGER: stored as its digits
            text = str(text)
        db.execute(f'UPDATE {table} SET "{name}" = ? WHERE rowid = ?', (text, rowid))


_ENDLESS = "WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c)"
_STRUCTURAL = [
    f"ALTER TABLE runs RENAME TO runs_kept; CREATE VIEW runs AS {_ENDLESS} SELECT r.* FROM c, runs_kept r",
    f"ALTER TABLE steps RENAME TO steps_kept; CREATE VIEW steps AS {_ENDLESS} SELECT s.* FROM c, steps_kept s",
    f"ALTER TABLE requests RENAME TO req_kept; CREATE VIEW requests AS {_ENDLESS} SELECT q.* FROM c, req_kept q",
    "UPDATE alembic_version SET version_num = 'ffffffffffff'",
    "DROP TABLE steps", "DROP TABLE requests", "DROP TABLE alembic_version",
    "CREATE TRIGGER t AFTER UPDATE ON runs BEGIN SELECT count(*) FROM runs, runs, runs, runs; END",
    "UPDATE runs SET status = 'running', hostname = 'HOST', pid = 999999999",
    "INSERT INTO steps SELECT run_id, step + 1000, load, started_at, summary, health, interrupted, server, gpu "
    "FROM steps",
    "DELETE FROM steps",
]


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    from tokometer.cli import main

    try:
        main(argv)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 2
    else:
        code = 0
    return code, capsys.readouterr().err


def _check_commands(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for command in _COMMANDS:
        code, err = _run([*command, "--store", str(store)], capsys)
        assert code in (0, 1, 2), (command, code, err)
        if code == 2:
            lines = err.strip().splitlines()
            assert len(lines) == 1 and "Traceback" not in err, (command, err)


@pytest.mark.slow  # 90-120 s in the parallel lane
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(changes=st.lists(_column_change(), min_size=1, max_size=3),
       structural=st.sampled_from(_STRUCTURAL) | st.just("") | st.just("") | st.just(""))
def test_a_changed_store_is_answered_or_refused_in_one_line(
        saved_store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        changes: list[tuple[str, str, str, Any]], structural: str) -> None:
    import socket

    from tokometer.store import database

    monkeypatch.setattr(database, "READ_DEADLINE_S", 0.3)
    store = tmp_path / f"changed-{uuid.uuid4().hex}.db"  # a new file each example (no WAL left behind)
    shutil.copy(saved_store, store)
    with sqlite3.connect(store) as db:
        _loosen(db)
        for change in changes:
            _change_column(db, change)
        db.executescript(structural.replace("HOST", socket.gethostname()))
    _check_commands(store, capsys)
