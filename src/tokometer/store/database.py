"""Opening a results store's database: writers create and migrate it, readers never change anything.

A writer (``tokometer bench``) makes the SQLite file and its directory if needed and brings the
schema to the newest Alembic revision (`tokometer.store.migrate`: under a lock, so several
processes opening one fresh store at once do it once; a store made before Alembic is completed in
place). A reader (``runs``, ``compare``, ``estimate --run``) opens SQLite with ``mode=ro`` and never
migrates: it reads the columns an older store has, and refuses a store made by a newer tokometer.
A store that is not there is one error line, never an empty new file. A reader is bounded whatever the
database holds (a store is input too: a file crafted by hand may hold views that never end, or huge values):
each statement has a deadline (`READ_DEADLINE_S`: SQLite's progress handler, PostgreSQL's
``statement_timeout``), no SQLite value is read beyond `MAX_VALUE_BYTES`, and a store without the tables it
needs is refused when opened. A URL whose database driver
is not installed says which package to install. Passwords in URLs are never shown, nor are the
database's errors more than one line.
"""

from __future__ import annotations

import os
import random
import re
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from sqlalchemy import Connection, Engine, create_engine, event, inspect
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, SQLAlchemyError
from sqlalchemy.pool import NullPool

from tokometer.util.errors import StoreError
from tokometer.util.jsontext import dumps
from tokometer.util.shown import clipped

__all__ = ["MAX_VALUE_BYTES", "READ_DEADLINE_S", "BoundedConnection", "NotText", "database_error", "display_url",
           "is_writable", "open_reader", "open_writer", "out_of_time", "read_failure", "request_columns", "run_columns",
           "sqlite_path", "step_columns", "store_exists"]

_RACES = ("already exists", "duplicate column", "duplicate key", "database is locked")
_ATTEMPTS = 8
_SQLITE_BUSY_S = 30.0
"""How long a SQLite writer waits for another one's write lock (a migration, a batch) before failing."""
_DRIVERS = {"psycopg2": "psycopg2-binary", "psycopg": "'psycopg[binary]'", "pymysql": "PyMySQL",
            "MySQLdb": "mysqlclient", "asyncpg": "asyncpg", "oracledb": "oracledb", "pyodbc": "pyodbc"}
_HINT = "(set --store or TOKOMETER_STORE)"
READ_DEADLINE_S = 60.0
"""The longest one statement of a reader may run (a view that never ends is stopped here)."""
MAX_VALUE_BYTES = 64 * 1024 * 1024
"""The largest single value (text or blob) a reader takes from a SQLite store; a larger one is an error."""
_TABLES_READ = ("runs", "steps", "requests")
_PROGRESS_EVERY = 10_000
"""SQLite virtual-machine steps between two looks at a statement's deadline."""


class NotText(str):
    """Text of a SQLite value that is not valid UTF-8 (decoded with replacement characters): the store's
    loader refuses it as a field's value."""


def _sqlite_text(raw: bytes) -> str:
    """A SQLite text value: UTF-8, or a `NotText` in place of one that is not (instead of failing the query)."""
    try:
        return raw.decode()
    except UnicodeDecodeError:
        return NotText(raw.decode(errors="replace"))


class BoundedConnection(sqlite3.Connection):
    """A reader's SQLite connection: each statement (each cursor) stopped after `READ_DEADLINE_S`, no value
    over `MAX_VALUE_BYTES`, text that is not UTF-8 read as a `NotText`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.deadline = time.monotonic() + READ_DEADLINE_S
        self.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
        self.set_progress_handler(self._late, _PROGRESS_EVERY)
        self.text_factory = _sqlite_text

    def cursor(self, *args: Any, **kwargs: Any) -> Any:
        self.deadline = time.monotonic() + READ_DEADLINE_S
        return super().cursor(*args, **kwargs)

    def _late(self) -> int:
        return int(time.monotonic() > self.deadline)


def out_of_time(exc: BaseException, url: str) -> bool:
    """Whether a statement failed on its deadline (SQLite's interrupt, PostgreSQL's statement timeout)."""
    message = database_error(exc, url)
    return "interrupted" in message or "statement timeout" in message


def read_failure(exc: BaseException, url: str) -> str:
    """Why a read failed, on one line: its deadline or a value's size named, else what the database said."""
    message = database_error(exc, url)
    if out_of_time(exc, url):
        return (f"a read took longer than {READ_DEADLINE_S:g} s (a table replaced by a view that does not end, "
                f"or a store far larger than tokometer writes)")
    if "too big" in message:
        return f"it holds a value larger than {MAX_VALUE_BYTES // (1024 * 1024)} MiB"
    return message


def display_url(url: str) -> str:
    """``url`` as it may be shown: the file path of a SQLite store, any password hidden."""
    path = sqlite_path(url)
    if path is not None:
        return str(path)
    parsed = _parsed(url)
    if parsed is None:  # where its password ends cannot be told: only the dialect is shown
        return f"{clipped(url.split('://', 1)[0], 40)}://…" if "://" in url else "(a URL that does not parse)"
    return parsed.render_as_string(hide_password=True)


def database_error(exc: BaseException, url: str) -> str:
    """What the database said, on one line, without the URL's password (nor SQLAlchemy's background link)."""
    cause = exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc
    message = " ".join(line.strip() for line in str(cause).splitlines() if line.strip()
                       and not line.lstrip().startswith(("(Background on this error", "[SQL:", "[parameters:")))
    parsed = _parsed(url)
    password = parsed.password if parsed is not None else None
    if password:
        message = _hide_secret(message, str(password))
    return message or type(cause).__name__


def _hide_secret(message: str, secret: str) -> str:
    """``message`` with ``secret`` (and its URL-quoted spelling) shown as ``***``: wherever it stands as a word of
    its own, and inside longer words too once it is `_SECRET_INSIDE_WORDS` characters or more; a password of
    ``p`` no longer turns "port" into "***ort" while any password the server echoes stays hidden."""
    for spelling in dict.fromkeys((secret, quote(secret, safe=""))):
        if len(spelling) >= _SECRET_INSIDE_WORDS:
            message = message.replace(spelling, "***")
        else:
            message = re.sub(rf"(?<!\w){re.escape(spelling)}(?!\w)", "***", message)
    return message


_SECRET_INSIDE_WORDS = 8
"""A secret this long is hidden inside longer words as well: there it is the secret, not a word that happens to
hold its letters."""


def _parsed(url: str) -> URL | None:
    """``url`` as SQLAlchemy reads it; None where it does not parse (`url_problem`)."""
    try:
        return make_url(url)
    except (ArgumentError, ValueError):
        return None


def url_problem(url: str) -> str | None:
    """Why ``url`` is no store URL SQLAlchemy can read (no ``dialect://``, a port that is no number, an IPv6 host's
    bracket left open), as a sentence's end, without the parser's words (they may quote a password); None where
    it parses. One check for every reader of the URL: it had been a ValueError's traceback (``postgresql://[::1``)
    where only SQLAlchemy's ArgumentError was expected."""
    if _parsed(url) is None:
        return ("does not parse (no dialect://, a port that is no number, or an IPv6 host's bracket left open): "
                "give a SQLAlchemy URL (postgresql://user@host:5432/db) or a SQLite file's path")
    return None


def sqlite_path(url: str) -> Path | None:
    """The file of a SQLite URL; None for an in-memory or non-SQLite database (or a URL that does not parse)."""
    parsed = _parsed(url)
    if parsed is None:
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


def _json(value: Any) -> str:
    """JSON every database takes: PostgreSQL refuses NaN and Infinity, so they are kept as null."""
    return dumps(value)


def _create_engine(url: str, **kwargs: Any) -> Engine:
    try:
        return create_engine(url, json_serializer=_json, **kwargs)
    except ImportError as exc:
        module = (exc.name or "").split(".")[0]
        package = _DRIVERS.get(module, module or "its driver")
        also = (" (or pip install 'psycopg[binary]' and write the URL as postgresql+psycopg://...)"
                if module == "psycopg2" else "")
        raise StoreError(f"the results store {display_url(url)} needs the database driver {module or '?'}, which is "
                         f"not installed: pip install {package}{also}") from None


def _retry_races(action: Callable[[], None]) -> None:
    """Run ``action``; when another process held SQLite's lock too long or won a race, look again (a few times)."""
    for attempt in range(_ATTEMPTS):
        try:
            action()
            return
        except SQLAlchemyError as exc:
            if attempt == _ATTEMPTS - 1 or not any(race in str(exc).lower() for race in _RACES):
                raise
            time.sleep(random.uniform(0.01, 0.05) * (attempt + 1))


def open_writer(url: str, *, migrate: bool = True) -> Engine:
    """An engine on the store at ``url``, created (file, directory, tables) and migrated as needed.

    ``migrate=False``: an engine that writes rows of an existing store and leaves its schema as it is
    (a reader marking killed runs aborted)."""
    from tokometer.store.migrate import upgrade

    if problem := url_problem(url):
        raise StoreError(f"the results store URL {display_url(url)} {problem} {_HINT}")
    try:
        path = sqlite_path(url)
        if path is not None and migrate:
            path.parent.mkdir(parents=True, exist_ok=True)
        sqlite = make_url(url).get_backend_name() == "sqlite"
        engine = _create_engine(url, **({"connect_args": {"timeout": _SQLITE_BUSY_S}} if sqlite else {}))
        if sqlite:
            event.listen(engine, "connect", _sqlite_pragmas)
        if migrate:
            try:
                _retry_races(lambda: upgrade(engine, display_url(url)))
            except BaseException:
                engine.dispose()
                raise
    except (SQLAlchemyError, OSError) as exc:
        raise StoreError(f"cannot open the results store {display_url(url)}: {database_error(exc, url)} "
                         f"{_HINT}") from exc
    return engine


def open_reader(url: str) -> Engine:
    """An engine that only reads the existing store at ``url`` (SQLite: ``mode=ro``; PostgreSQL: read-only
    transactions); it never migrates."""
    from tokometer.store.migrate import check_known, stored_revision

    if problem := url_problem(url):
        raise StoreError(f"the results store URL {display_url(url)} {problem} {_HINT}")
    path = sqlite_path(url)
    if path is not None and not path.is_file():
        raise StoreError(f"there is no results store at {path} {_HINT}")
    try:
        if path is not None:
            uri = f"file:{quote(str(path.resolve()))}?mode=ro"
            engine = _create_engine("sqlite://", poolclass=NullPool,
                                    creator=lambda: sqlite3.connect(uri, uri=True, check_same_thread=False,
                                                                    factory=BoundedConnection))
        elif make_url(url).get_backend_name() == "postgresql":
            timeout = f"-c statement_timeout={int(READ_DEADLINE_S * 1000)}"
            engine = _create_engine(url, execution_options={"postgresql_readonly": True},  # READ ONLY transactions
                                    connect_args={"options": timeout})
        else:
            engine = _create_engine(url)
        try:
            with engine.connect() as conn:
                found = inspect(conn).has_table("runs")
                revision = stored_revision(conn) if found else None
                lacking = [name for name in _TABLES_READ if found and not _has_relation(conn, name)]
        except BaseException:
            engine.dispose()
            raise
    except SQLAlchemyError as exc:
        raise StoreError(f"cannot read the results store {display_url(url)}: {read_failure(exc, url)} "
                         f"{_HINT}") from exc
    if lacking:
        engine.dispose()
        raise StoreError(f"the results store {display_url(url)} has no {lacking[0]} table: it is damaged or not "
                         f"tokometer's {_HINT}")
    if not found:
        engine.dispose()
        raise StoreError(f"{display_url(url)} is not a tokometer results store (it has no runs table) {_HINT}")
    try:
        check_known(revision, display_url(url))
    except StoreError:
        engine.dispose()
        raise
    return engine


def _has_relation(conn: Connection, name: str) -> bool:
    """Whether the database has a table (or a view) ``name``."""
    return bool(inspect(conn).has_table(name)) or name in inspect(conn).get_view_names()


def run_columns(engine: Engine) -> set[str]:
    """The names of the columns the store's `runs` table has (an old store lacks the newer ones)."""
    return {c["name"] for c in inspect(engine).get_columns("runs")}


def step_columns(engine: Engine) -> set[str]:
    """The names of the columns the store's `steps` table has."""
    return {c["name"] for c in inspect(engine).get_columns("steps")}


def request_columns(engine: Engine) -> set[str]:
    """The names of the columns the store's `requests` table has."""
    return {c["name"] for c in inspect(engine).get_columns("requests")}
