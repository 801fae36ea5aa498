"""The results store's two backends for tests: a SQLite file, or a PostgreSQL database made for the test.

PostgreSQL is the server named by ``TOKOMETER_TEST_POSTGRES`` (a SQLAlchemy URL whose user may CREATE
DATABASE), else `DEFAULT_POSTGRES` (what ``scripts/test-postgres`` sets up; ``make test`` runs it first).
Each store is a database of its own with a unique name, dropped at teardown. Without a server the
PostgreSQL tests skip, except where one is required (``make test`` and CI set
TOKOMETER_REQUIRE_POSTGRES=1): there they fail, saying how to get one.
"""

from __future__ import annotations

import functools
import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

DEFAULT_POSTGRES = "postgresql+psycopg://tokometer:tokometer@127.0.0.1:5432/tokometer_test"
BACKENDS = ("sqlite", "postgresql")

_FIX = ("as root on Debian/Ubuntu: apt-get install postgresql && scripts/test-postgres; or set "
        "TOKOMETER_TEST_POSTGRES to a server URL whose user may CREATE DATABASE")


@functools.cache
def _unreachable(url: str) -> str | None:
    """Why the server at ``url`` cannot be used (one line, no password); None when it answers."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.exc import SQLAlchemyError

    from tokometer.store.database import database_error, display_url

    try:
        engine = create_engine(url)
        try:
            with engine.connect() as conn:
                conn.execute(text("SELECT 1"))
        finally:
            engine.dispose()
    except (SQLAlchemyError, ImportError) as exc:
        return f"no PostgreSQL server at {display_url(url)}: {database_error(exc, url)}"
    return None


def postgres_server() -> str:
    """The URL of the test server, after checking it answers (else skip, or fail where it is required)."""
    url = os.environ.get("TOKOMETER_TEST_POSTGRES") or DEFAULT_POSTGRES
    why = _unreachable(url)
    if why is not None:
        if os.environ.get("TOKOMETER_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"PostgreSQL is required here but {why}; {_FIX}", pytrace=False)
        pytest.skip(f"{why} ({_FIX})")
    return url


@contextmanager
def postgres_databases() -> Iterator[Callable[[], str]]:
    """A maker of empty PostgreSQL databases (each one's URL); all of them are dropped at the end."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    server = make_url(postgres_server())
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    made: list[str] = []

    def make() -> str:
        name = f"tokometer_t_{uuid.uuid4().hex[:16]}"
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        made.append(name)
        return server.set(database=name).render_as_string(hide_password=False)

    try:
        yield make
    finally:
        with admin.connect() as conn:
            for name in made:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@contextmanager
def store_urls(backend: str, directory: Path) -> Iterator[Callable[[], str]]:
    """A maker of URLs of new, empty results stores on ``backend`` (``sqlite`` or ``postgresql``)."""
    if backend == "sqlite":
        count = iter(range(1_000_000))

        def make() -> str:
            folder = directory / f"store{next(count)}"
            folder.mkdir()
            return f"sqlite:///{folder / 'runs.db'}"

        yield make
        return
    with postgres_databases() as make:
        yield make
