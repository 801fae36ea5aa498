"""Running the store's Alembic migrations (``migrations/``): writers upgrade, readers only check.

A writer brings the store to the newest revision (`upgrade`) while holding a lock, so several
processes opening one fresh store at once migrate it once: PostgreSQL takes a transaction-level
advisory lock (``pg_advisory_xact_lock``), SQLite takes the write lock (``BEGIN IMMEDIATE``); the
others wait, then find it done. Both databases change their schema in that one transaction, so a
migration that fails leaves the store as it was. A store already at the newest revision is not
locked at all. A store made by a newer tokometer (a revision this one does not know) is neither
migrated nor read (`check_known`): it says to upgrade tokometer.
"""

from __future__ import annotations

import functools
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, text
from sqlalchemy.engine import Connection

from tokometer import __version__
from tokometer.util.errors import StoreError

__all__ = ["MIGRATIONS", "check_known", "head", "stored_revision", "upgrade"]

MIGRATIONS = Path(__file__).parent / "migrations"
"""Alembic's script directory, inside the package."""

_LOCK_KEY = 0x746F6B6F6D657472  # "tokometr": the advisory lock of a store's migrations on PostgreSQL


def _config(connection: Connection | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    return config


@functools.cache
def _scripts() -> ScriptDirectory:
    return ScriptDirectory.from_config(_config())


def head() -> str:
    """The newest revision this tokometer knows."""
    heads = _scripts().get_heads()
    if len(heads) != 1:
        raise StoreError(f"the store's migrations have {len(heads)} heads ({', '.join(heads)}): merge them")
    return heads[0]


def stored_revision(conn: Connection) -> str | None:
    """The revision the store is at; None for one made before migrations were Alembic's (or an empty database)."""
    return MigrationContext.configure(conn).get_current_revision()


def check_known(revision: str | None, where: str) -> None:
    """StoreError when ``revision`` was written by a newer tokometer than this one."""
    if revision is None:
        return
    known = {script.revision for script in _scripts().walk_revisions()}
    if revision not in known:
        raise StoreError(f"the results store {where} was made by a newer tokometer (schema revision {revision}; "
                         f"tokometer {__version__} knows up to {head()}): upgrade tokometer to use it")


def upgrade(engine: Engine, where: str) -> None:
    """Bring the store to the newest revision (creating its tables in an empty database), under a lock."""
    newest = head()
    with engine.connect() as conn:
        current = stored_revision(conn)
        check_known(current, where)
        if current == newest:
            return
        conn.rollback()
        if conn.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _LOCK_KEY})
        elif conn.dialect.name == "sqlite":
            conn.exec_driver_sql("BEGIN IMMEDIATE")  # the write lock, held until the commit
        check_known(stored_revision(conn), where)  # what the process that held the lock left
        command.upgrade(_config(conn), "head")
        conn.commit()
