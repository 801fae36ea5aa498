"""Opening a results store's database: writers create and migrate it, readers never create anything.

A writer (``tokometer bench``) makes the SQLite file and its directory if needed, creates the
tables and adds the columns of newer schema versions. Several processes may do that at once on a
fresh store: whoever loses a race ("table runs already exists", "duplicate column") looks again
and finds the work done. A reader (``runs``, ``estimate --run``) opens SQLite with ``mode=ro``: a
store that is not there is one error line, never an empty new file. A URL whose database driver is
not installed says which package to install. Passwords in URLs are never shown.
"""

from __future__ import annotations

import os
import random
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from sqlalchemy import Engine, create_engine, event, inspect, select, text, update
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError
from sqlalchemy.pool import NullPool

from tokometer.errors import StoreError
from tokometer.secrets import redact_saved_spec
from tokometer.store.schema import (
    ADDED_REQUEST_COLUMNS,
    ADDED_RUN_COLUMNS,
    ADDED_STEP_COLUMNS,
    metadata,
    requests,
    runs,
    steps,
)

__all__ = ["display_url", "is_writable", "open_reader", "open_writer", "request_columns", "run_columns",
           "sqlite_path", "step_columns", "store_exists"]

_RACES = ("already exists", "duplicate column", "duplicate key", "database is locked")
_ATTEMPTS = 8
_DRIVERS = {"psycopg2": "psycopg2-binary", "psycopg": "'psycopg[binary]'", "pymysql": "PyMySQL",
            "MySQLdb": "mysqlclient", "asyncpg": "asyncpg", "oracledb": "oracledb", "pyodbc": "pyodbc"}
_HINT = "(set --store or TOKOMETER_STORE)"


def display_url(url: str) -> str:
    """``url`` as it may be shown: the file path of a SQLite store, any password hidden."""
    path = sqlite_path(url)
    if path is not None:
        return str(path)
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return url


def sqlite_path(url: str) -> Path | None:
    """The file of a SQLite URL; None for an in-memory or non-SQLite database (or a URL that does not parse)."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        return None
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return Path(parsed.database).expanduser()


def store_exists(url: str) -> bool:
    """False only for a SQLite store whose file is not there (other databases are asked when opened)."""
    path = sqlite_path(url)
    return path is None or path.is_file()


def is_writable(url: str) -> bool:
    """Whether this process may write the store (for SQLite: the file and its directory, for the WAL)."""
    path = sqlite_path(url)
    return path is None or (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK))


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def _create_engine(url: str, **kwargs: Any) -> Engine:
    try:
        return create_engine(url, **kwargs)
    except ImportError as exc:
        module = (exc.name or "").split(".")[0]
        package = _DRIVERS.get(module, module or "its driver")
        also = (" (or pip install 'psycopg[binary]' and write the URL as postgresql+psycopg://...)"
                if module == "psycopg2" else "")
        raise StoreError(f"the results store {display_url(url)} needs the database driver {module or '?'}, which is "
                         f"not installed: pip install {package}{also}") from None


def _retry_races(action: Callable[[], None]) -> None:
    """Run ``action``; when another process won a race to change the schema, look again (a few times)."""
    for attempt in range(_ATTEMPTS):
        try:
            action()
            return
        except SQLAlchemyError as exc:
            if attempt == _ATTEMPTS - 1 or not any(race in str(exc).lower() for race in _RACES):
                raise
            time.sleep(random.uniform(0.01, 0.05) * (attempt + 1))


def _migrate(engine: Engine) -> None:
    """Add the columns of newer versions to an older store, and redact the secrets it kept."""
    have = {c["name"] for c in inspect(engine).get_columns("runs")}
    missing = [runs.c[name] for name in ADDED_RUN_COLUMNS if name not in have]
    have_steps = {c["name"] for c in inspect(engine).get_columns("steps")}
    missing_steps = [steps.c[name] for name in ADDED_STEP_COLUMNS if name not in have_steps]
    missing_requests = [requests.c[name] for name in ADDED_REQUEST_COLUMNS if name not in request_columns(engine)]
    if not missing and not missing_steps and not missing_requests:
        return
    with engine.begin() as conn:
        for table, columns in (("runs", missing), ("steps", missing_steps), ("requests", missing_requests)):
            for column in columns:
                conn.execute(text(f"ALTER TABLE {table} ADD COLUMN {column.name} "
                                  f"{column.type.compile(engine.dialect)}"))
        if missing:
            _redact_saved_specs(conn)


def _redact_saved_specs(conn: Connection) -> None:
    """Stores made before headers were redacted may hold secrets in their specs: overwrite them."""
    if conn.dialect.name == "sqlite":
        conn.exec_driver_sql("PRAGMA secure_delete=ON")  # the old bytes are zeroed, not left in free space
    for row in conn.execute(select(runs.c.id, runs.c.spec)).all():
        clean = redact_saved_spec(row.spec)
        if clean != row.spec:
            conn.execute(update(runs).where(runs.c.id == row.id).values(spec=clean))


def open_writer(url: str) -> Engine:
    """An engine on the store at ``url``, created (file, directory, tables) and migrated as needed."""
    try:
        path = sqlite_path(url)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
        engine = _create_engine(url)
        if engine.dialect.name == "sqlite":
            event.listen(engine, "connect", _sqlite_pragmas)
        _retry_races(lambda: metadata.create_all(engine))
        _retry_races(lambda: _migrate(engine))
    except (SQLAlchemyError, OSError) as exc:
        raise StoreError(f"cannot open the results store {display_url(url)}: {exc} {_HINT}") from exc
    return engine


def open_reader(url: str) -> Engine:
    """An engine that only reads the existing store at ``url`` (SQLite: ``mode=ro``)."""
    path = sqlite_path(url)
    if path is not None and not path.is_file():
        raise StoreError(f"there is no results store at {path} {_HINT}")
    try:
        if path is not None:
            uri = f"file:{quote(str(path.resolve()))}?mode=ro"
            engine = _create_engine("sqlite://", poolclass=NullPool,
                                    creator=lambda: sqlite3.connect(uri, uri=True, check_same_thread=False))
        else:
            engine = _create_engine(url)
        found = inspect(engine).has_table("runs")
    except SQLAlchemyError as exc:
        raise StoreError(f"cannot read the results store {display_url(url)}: {exc} {_HINT}") from exc
    if not found:
        engine.dispose()
        raise StoreError(f"{display_url(url)} is not a tokometer results store (it has no runs table) {_HINT}")
    return engine


def run_columns(engine: Engine) -> set[str]:
    """The names of the columns the store's `runs` table has (an old store lacks the newer ones)."""
    return {c["name"] for c in inspect(engine).get_columns("runs")}


def step_columns(engine: Engine) -> set[str]:
    """The names of the columns the store's `steps` table has."""
    return {c["name"] for c in inspect(engine).get_columns("steps")}


def request_columns(engine: Engine) -> set[str]:
    """The names of the columns the store's `requests` table has."""
    return {c["name"] for c in inspect(engine).get_columns("requests")}
