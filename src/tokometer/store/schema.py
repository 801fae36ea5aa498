"""The results store's tables (SQLAlchemy Core): runs, steps, requests, tags, tunes.

This is the schema the code reads and writes; the Alembic revisions in ``migrations/`` bring a
store's database to it (a test checks they agree on SQLite and PostgreSQL). A change here needs a
new revision there.

One row per request holds its raw stamps; the per-event stamps are packed as
little-endian int64 (``event_ns``) and float64 (``event_tokens``) arrays, so a
128-token answer costs 2 KiB, not a JSON string four times that size.

Version 2 added the running process of each run (``pid``, ``hostname``,
``process_started``: its start time, so a reused pid is not taken for it), so a
run whose process was killed can be found and marked ``aborted``. Stores made by
version 1 gain these columns when a writer opens them (`ADDED_RUN_COLUMNS`; the
baseline revision ``0001`` adds them now);
readers of an old store select only the columns it has.

Version 4 added to each request what the workload made of it (``workload``: `RequestRecord.workload`:
its shared prefix, chat session and turn, when its answer began and its reasoning tokens), the same way
(`ADDED_REQUEST_COLUMNS`); readers of an old store select only the columns it has.

Version 3 added to each step what the server and its GPUs were doing while it ran (``server``,
``gpu``: `tokometer.observe`'s summaries as JSON), the same way (`ADDED_STEP_COLUMNS`).

Version 5 (revision ``0002``) added to each run what ``bench --json`` writes of it besides: its prompt source
(``prompt_source``) and its warnings (``warnings``, the run's own then its steps'), so that ``runs --id`` and
``bench --json`` print one document; a run saved before has neither (null).

Revision ``0003`` added the ``tunes`` table: one document per ``tokometer tune`` (its plan and what each variant
gave, ``tokometer.tune/1``), saved again after every variant so that a cut tune can be resumed. Runs are as they
were, so the version a run is saved with stays 5.
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
)

__all__ = ["ADDED_REQUEST_COLUMNS", "ADDED_RUN_COLUMNS", "ADDED_STEP_COLUMNS", "SCHEMA_VERSION", "metadata",
           "requests", "runs", "steps", "tags", "tunes"]

SCHEMA_VERSION = 5

metadata = MetaData()

runs = Table(
    "runs",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("started_at", String(40), nullable=False),
    Column("finished_at", String(40)),
    Column("status", String(20), nullable=False),
    Column("target", Text, nullable=False),
    Column("api", String(40), nullable=False),
    Column("model", Text, nullable=False),
    Column("label", Text),
    Column("spec", JSON, nullable=False),
    Column("engine", JSON),
    Column("host", JSON),
    Column("tokometer_version", String(40), nullable=False),
    Column("schema_version", Integer, nullable=False, default=SCHEMA_VERSION),
    Column("pid", Integer),
    Column("hostname", String(255)),
    Column("process_started", Float),
    Column("prompt_source", Text),
    Column("warnings", JSON),
)

ADDED_RUN_COLUMNS = ("pid", "hostname", "process_started", "prompt_source", "warnings")
"""Columns of `runs` added after version 1 (all nullable), in the order they were added."""

steps = Table(
    "steps",
    metadata,
    Column("run_id", Integer, ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    Column("step", Integer, primary_key=True),
    Column("load", JSON, nullable=False),
    Column("started_at", String(40), nullable=False),
    Column("summary", JSON),
    Column("health", JSON),
    Column("interrupted", Boolean, nullable=False, default=False),
    Column("server", JSON),
    Column("gpu", JSON),
)

ADDED_STEP_COLUMNS = ("server", "gpu")
"""Columns of `steps` added after version 2 (nullable)."""

tags = Table(
    "tags",
    metadata,
    Column("name", String(200), primary_key=True),
    Column("run_id", Integer, ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
    Column("tagged_at", String(40), nullable=False),
)
"""Named baselines (``runs --tag NAME ID``): one run per name; retagging moves the name. Added in
version 3 as a new table, which a writer creates in an older store and a reader does without."""

requests = Table(
    "requests",
    metadata,
    Column("run_id", Integer, ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
    Column("step", Integer, primary_key=True),
    Column("idx", Integer, primary_key=True),
    Column("warmup", Boolean, nullable=False),
    Column("due_ns", BigInteger, nullable=False),
    Column("connect_ns", BigInteger, nullable=False),
    Column("sent_ns", BigInteger, nullable=False),
    Column("first_byte_ns", BigInteger, nullable=False),
    Column("first_token_ns", BigInteger, nullable=False),
    Column("last_token_ns", BigInteger, nullable=False),
    Column("end_ns", BigInteger, nullable=False),
    Column("chunk_count", Integer, nullable=False),
    Column("input_tokens", Integer),
    Column("input_tokens_source", String(20)),
    Column("output_tokens", Integer),
    Column("output_tokens_source", String(20)),
    Column("requested_output_tokens", Integer),
    Column("status", Integer),
    Column("finish_reason", String(20)),
    Column("error", String(40)),
    Column("error_detail", Text),
    Column("server", JSON),
    Column("event_ns", LargeBinary),
    Column("event_tokens", LargeBinary),
    Column("workload", JSON),
)

ADDED_REQUEST_COLUMNS = ("workload",)
"""Columns of `requests` added after version 3 (nullable)."""

Index("requests_by_run", requests.c.run_id, requests.c.step)

tunes = Table(
    "tunes",
    metadata,
    Column("name", String(200), primary_key=True),
    Column("document", JSON, nullable=False),
    Column("updated_at", String(40), nullable=False),
)
"""One ``tokometer tune`` per name (``--name``): its `tokometer.tune.outcome.TuneRecord` as JSON, rewritten after
every variant. Its variants' runs are ordinary rows of `runs`, named in the document by id. Added by revision
``0003`` as a new table, which a writer creates in an older store and a reader does without."""
