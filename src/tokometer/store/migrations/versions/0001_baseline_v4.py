"""Baseline: the results store's schema version 4, created, or completed in a store made before Alembic.

Tokometer 0.1 migrated its stores by hand (schema versions 1-4, see `tokometer.store.schema`): a store it
made has tables but no ``alembic_version``, so Alembic starts it here. This revision then creates only what
such a store lacks (the ``tags`` table of version 3, the columns of versions 2-4, the index) and keeps every
row. Stores of version 1 may hold request headers saved before they were redacted: they are overwritten.
The tables are written out as they were at version 4, not imported, so later revisions cannot change them.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

_v4 = sa.MetaData()

sa.Table(
    "runs", _v4,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("started_at", sa.String(40), nullable=False),
    sa.Column("finished_at", sa.String(40)),
    sa.Column("status", sa.String(20), nullable=False),
    sa.Column("target", sa.Text, nullable=False),
    sa.Column("api", sa.String(40), nullable=False),
    sa.Column("model", sa.Text, nullable=False),
    sa.Column("label", sa.Text),
    sa.Column("spec", sa.JSON, nullable=False),
    sa.Column("engine", sa.JSON),
    sa.Column("host", sa.JSON),
    sa.Column("tokometer_version", sa.String(40), nullable=False),
    sa.Column("schema_version", sa.Integer, nullable=False),
    sa.Column("pid", sa.Integer),
    sa.Column("hostname", sa.String(255)),
    sa.Column("process_started", sa.Float),
)
sa.Table(
    "steps", _v4,
    sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("step", sa.Integer, primary_key=True),
    sa.Column("load", sa.JSON, nullable=False),
    sa.Column("started_at", sa.String(40), nullable=False),
    sa.Column("summary", sa.JSON),
    sa.Column("health", sa.JSON),
    sa.Column("interrupted", sa.Boolean, nullable=False),
    sa.Column("server", sa.JSON),
    sa.Column("gpu", sa.JSON),
)
sa.Table(
    "tags", _v4,
    sa.Column("name", sa.String(200), primary_key=True),
    sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    sa.Column("tagged_at", sa.String(40), nullable=False),
)
_requests = sa.Table(
    "requests", _v4,
    sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("step", sa.Integer, primary_key=True),
    sa.Column("idx", sa.Integer, primary_key=True),
    sa.Column("warmup", sa.Boolean, nullable=False),
    *(sa.Column(name, sa.BigInteger, nullable=False) for name in (
        "due_ns", "connect_ns", "sent_ns", "first_byte_ns", "first_token_ns", "last_token_ns", "end_ns")),
    sa.Column("chunk_count", sa.Integer, nullable=False),
    sa.Column("input_tokens", sa.Integer),
    sa.Column("input_tokens_source", sa.String(20)),
    sa.Column("output_tokens", sa.Integer),
    sa.Column("output_tokens_source", sa.String(20)),
    sa.Column("requested_output_tokens", sa.Integer),
    sa.Column("status", sa.Integer),
    sa.Column("finish_reason", sa.String(20)),
    sa.Column("error", sa.String(40)),
    sa.Column("error_detail", sa.Text),
    sa.Column("server", sa.JSON),
    sa.Column("event_ns", sa.LargeBinary),
    sa.Column("event_tokens", sa.LargeBinary),
    sa.Column("workload", sa.JSON),
)
sa.Index("requests_by_run", _requests.c.run_id, _requests.c.step)


def upgrade() -> None:
    bind = op.get_bind()
    had_runs = sa.inspect(bind).has_table("runs")
    _v4.create_all(bind)  # the tables that are not there yet, with their indexes
    if not had_runs:
        return
    inspector = sa.inspect(bind)
    redact = False
    for table in _v4.sorted_tables:
        have = {c["name"] for c in inspector.get_columns(table.name)}
        for column in table.columns:
            if column.name not in have:  # each added after version 1, nullable
                op.add_column(table.name, sa.Column(column.name, column.type))
                redact = redact or column.name == "pid"
        indexed = {i["name"] for i in inspector.get_indexes(table.name)}
        for index in table.indexes:
            if index.name not in indexed:
                index.create(bind)
    if redact:
        _redact_saved_specs(bind)


def _redact_saved_specs(bind: sa.Connection) -> None:
    """Version 1 saved request headers as given: overwrite the specs that hold secrets."""
    from tokometer.util.secrets import redact_saved_spec

    runs = _v4.tables["runs"]
    if bind.dialect.name == "sqlite":
        bind.exec_driver_sql("PRAGMA secure_delete=ON")  # the old bytes are zeroed, not left in free space
    for row in bind.execute(sa.select(runs.c.id, runs.c.spec)).all():
        clean = redact_saved_spec(row.spec)
        if clean != row.spec:
            bind.execute(sa.update(runs).where(runs.c.id == row.id).values(spec=clean))


def downgrade() -> None:
    _v4.drop_all(op.get_bind())
