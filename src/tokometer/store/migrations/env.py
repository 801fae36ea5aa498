"""Alembic's environment for the results store: migrate the connection `tokometer.store.migrate` hands over.

Run from the ``alembic`` command line (to write a revision), it connects to ``sqlalchemy.url`` instead.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection, create_engine

from tokometer.store.schema import metadata


def _run(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=metadata,
                      render_as_batch=connection.dialect.name == "sqlite")  # SQLite alters tables by copying them
    with context.begin_transaction():
        context.run_migrations()


def _main() -> None:
    connection = context.config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    url = context.config.get_main_option("sqlalchemy.url") or "sqlite:///runs.db"
    with create_engine(url).connect() as connection:
        _run(connection)


_main()
