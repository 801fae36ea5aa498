"""`ResultStore`: saves runs as they happen, so a crash or Ctrl-C loses nothing finished.

Requests are written by a background thread: `append()` only puts the record
on a queue (no disk I/O on the event loop); the writer takes what is queued (at
most `BATCH_ROWS`) and commits it in one transaction, so under load it batches by
itself and when idle each request is committed as soon as it finishes. A batch that
fails (any exception, a number beyond the database's integers too) is the store's
error, raised by the next `flush()` or `close()`; the writer goes on with the next
batch, and a wait for it gives up after `WRITE_DEADLINE_S` without progress.
SQLite (WAL mode) by default; PostgreSQL (``postgresql+psycopg://...``) is tested
the same way and lets several benches on several hosts write one store at once.

Opened with ``read_only=True`` the store is only read (see `tokometer.store.database`).
Either way, opening it marks the runs whose process was killed as ``aborted``
(`tokometer.store.orphans`), as long as this process may write the store.
Sensitive headers in saved specs are shown redacted, even from old stores.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any, Final, Protocol, TypeVar

import platformdirs
from sqlalchemy import BigInteger, delete, insert, inspect, literal, select, update
from sqlalchemy.engine import Connection, RowMapping
from sqlalchemy.exc import SQLAlchemyError

from tokometer import __version__
from tokometer.records import RequestRecord
from tokometer.store.database import (
    database_error,
    display_url,
    is_writable,
    open_reader,
    open_writer,
    out_of_time,
    read_failure,
    request_columns,
    run_columns,
    step_columns,
)
from tokometer.store.load import (
    MAX_REQUESTS_READ,
    MAX_STEPS_READ,
    BadRow,
    BadStoredRun,
    bad_run,
    bounded_columns,
    column_values,
    record_of,
    run_of,
)
from tokometer.store.orphans import abort_runs, find_orphans, process_identity
from tokometer.store.rows import record_row
from tokometer.store.runs import StoredRun
from tokometer.store.schema import SCHEMA_VERSION, requests, runs, steps, tags, tunes
from tokometer.util.errors import StoreError
from tokometer.util.secrets import redact_saved_spec

__all__ = ["BATCH_ROWS", "MAX_TUNES_LISTED", "WRITE_DEADLINE_S", "ResultStore", "SavedDocument", "configured_store_url",
           "default_store_url", "now_iso"]

_STOP = object()
_A = TypeVar("_A")
_T = TypeVar("_T")
BATCH_ROWS: Final = 5_000
"""The most requests the writer commits in one transaction (so a wait for it sees progress often)."""
MAX_TUNES_LISTED: Final = 10_000
"""The most tune names `ResultStore.tune_names` reads back."""
WRITE_DEADLINE_S: Final = 120.0
"""How long `ResultStore.flush` / `close` wait for the writer to commit its next batch before giving up: past
SQLite's 30 s wait for another writer's lock, and a slow PostgreSQL."""


class SavedDocument(Protocol):
    """What the store keeps as one document under its name (a `tokometer.tune.outcome.TuneRecord`)."""

    @property
    def name(self) -> str: ...

    def to_json(self) -> dict[str, Any]: ...


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _given_id(run_id: int) -> Any:
    """A run id a user gave, as a bigint: PostgreSQL's ids are 32-bit, and one beyond them finds nothing
    instead of failing to convert."""
    return literal(run_id, BigInteger())


def configured_store_url(location: str | None = None) -> str | None:
    """The store a user named: ``location`` (a ``--store`` option), else ``TOKOMETER_STORE``, either a SQLAlchemy
    URL or a SQLite file path, as a URL; None when neither names one (then the store is `default_store_url`)."""
    value = location or os.environ.get("TOKOMETER_STORE") or None
    if value is None:
        return None
    return value if "://" in value else f"sqlite:///{Path(value).expanduser()}"


def default_store_url() -> str:
    """``TOKOMETER_STORE`` (a URL or a file path), else ``runs.db`` in the user data directory."""
    return configured_store_url() or f"sqlite:///{Path(platformdirs.user_data_dir('tokometer')) / 'runs.db'}"


class ResultStore:
    """Runs, steps and requests in one database; see the module docstring."""

    def __init__(self, url: str | None = None, *, read_only: bool = False) -> None:
        self.url = url or default_store_url()
        self.read_only = read_only
        self.engine = open_reader(self.url) if read_only else open_writer(self.url)
        self._columns = [c for c in runs.c if c.name in run_columns(self.engine)]
        self._step_columns = [c for c in steps.c if c.name in step_columns(self.engine)]
        self._request_columns = [c for c in requests.c if c.name in request_columns(self.engine)]
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._writer: threading.Thread | None = None
        self._error: BaseException | None = None
        self._pending = 0
        """Requests appended and not yet committed (or failed); guarded by ``_written``."""
        self._written = threading.Condition()
        self.aborted = self._abort_orphans()
        """Ids of the runs this opening found killed and marked ``aborted``."""

    @property
    def display_url(self) -> str:
        """Where the store is, as it may be shown (no password)."""
        return display_url(self.url)

    def _abort_orphans(self) -> list[int]:
        if "pid" not in {c.name for c in self._columns}:
            return []  # a store from before version 2 that this process may not migrate
        try:
            orphans = find_orphans(self.engine, self.display_url)
        except BadStoredRun:
            raise
        except StoreError:
            return []
        except SQLAlchemyError as exc:
            if not out_of_time(exc, self.url):
                return []
            # the runs table was not read within the deadline (a view that never ends): every command reads it
            # next and would wait the whole deadline out again, so the store is refused here, once
            self.engine.dispose()
            raise StoreError(f"cannot read the results store {self.display_url}: "
                             f"{read_failure(exc, self.url)}") from None
        try:
            if not orphans:
                return []
            if not self.read_only:
                return abort_runs(self.engine, orphans, self.display_url)
            if not is_writable(self.url):
                return []
            writer = open_writer(self.url, migrate=False)  # marks runs, never migrates
            try:
                return abort_runs(writer, orphans, self.display_url)
            finally:
                writer.dispose()
        except BadStoredRun:
            raise
        except (SQLAlchemyError, StoreError):
            return []  # not allowed to write here: the runs stay as they are

    # -- writing ----------------------------------------------------------------------------
    def create_run(self, *, target: str, api: str, model: str, spec: dict[str, Any], engine: dict[str, Any] | None,
                   host: dict[str, Any] | None, label: str | None = None, prompt_source: str | None = None,
                   started_at: str | None = None) -> int:
        """A new run, ``running``; ``started_at``: when it started (`now_iso`'s form; now if not given)."""
        values = {
            "started_at": started_at or now_iso(), "status": "running", "target": target, "api": api, "model": model,
            "label": label, "spec": redact_saved_spec(spec), "engine": engine, "host": host,
            "prompt_source": prompt_source, "tokometer_version": __version__, "schema_version": SCHEMA_VERSION,
            **process_identity(),
        }
        with self.engine.begin() as conn:
            result = conn.execute(insert(runs).values(**values))
            run_id = result.inserted_primary_key[0] if result.inserted_primary_key else None
        if not isinstance(run_id, int):
            raise StoreError("the results store did not return a run id")
        return run_id

    def start_step(self, run_id: int, step: int, load: dict[str, Any], *, started_at: str | None = None) -> None:
        """A step begins (``started_at``: when, `now_iso`'s form; now if not given)."""
        self.flush()
        with self.engine.begin() as conn:
            conn.execute(insert(steps).values(run_id=run_id, step=step, load=load, started_at=started_at or now_iso(),
                                              interrupted=False))

    def append(self, run_id: int, record: RequestRecord) -> None:
        """Queue one finished request for writing; returns at once. StoreError for a stamp beyond 64 bits."""
        try:
            row = record_row(run_id, record)
        except OverflowError as exc:
            raise StoreError(f"request {record.index} cannot be saved: a stamp beyond the store's 64-bit "
                             f"integers ({exc})") from None
        if self._writer is None:
            self._writer = threading.Thread(target=self._write_loop, name="tokometer-store", daemon=True)
            self._writer.start()
        with self._written:
            self._pending += 1
        self._queue.put(row)

    def finish_step(self, run_id: int, step: int, summary: dict[str, Any], health: dict[str, Any],
                    interrupted: bool, *, server: dict[str, Any] | None = None,
                    gpu: list[dict[str, Any]] | None = None) -> None:
        """The step's summary and client health; ``server``/``gpu``: what the server and GPUs did meanwhile."""
        self.flush()
        with self.engine.begin() as conn:
            conn.execute(update(steps).where(steps.c.run_id == run_id, steps.c.step == step)
                         .values(summary=summary, health=health, interrupted=interrupted, server=server, gpu=gpu))

    def tag(self, name: str, run_id: int) -> None:
        """Name run ``run_id`` (a baseline): ``compare baseline:NAME`` then means it. Retagging moves the name."""
        if not name or any(c in name for c in " :,") or len(name) > 200:
            raise StoreError(f"tag {name!r}: use a short name without spaces, colons or commas (e.g. main)")
        with self.engine.begin() as conn:
            if conn.execute(select(runs.c.id).where(runs.c.id == _given_id(run_id))).first() is None:
                raise StoreError(f"no run {run_id} in {self.display_url}: see 'tokometer runs' for the ids")
            conn.execute(delete(tags).where(tags.c.name == name))
            conn.execute(insert(tags).values(name=name, run_id=run_id, tagged_at=now_iso()))

    def save_tune(self, record: SavedDocument) -> None:
        """Keep ``record`` (a tune) under its name, replacing what was kept there; StoreError (one line) when the
        store cannot take it (a full disk, a server gone)."""
        document = record.to_json()
        try:
            with self.engine.begin() as conn:
                conn.execute(delete(tunes).where(tunes.c.name == record.name))
                conn.execute(insert(tunes).values(name=record.name, document=document, updated_at=now_iso()))
        except SQLAlchemyError as exc:
            raise StoreError(f"cannot save tune {record.name!r} in the results store {self.display_url}: "
                             f"{database_error(exc, self.url)}") from None

    def tune_document(self, name: str) -> dict[str, Any] | None:
        """The document of tune ``name`` as saved (bounded, checked to be a JSON object: `tokometer.store.load`);
        None when there is none (or the store is older than tunes). `tokometer.tune.saved.load_tune` makes the
        typed tune of it."""
        if not inspect(self.engine).has_table("tunes"):
            return None
        with self._reading() as conn:
            row = conn.execute(select(*bounded_columns([tunes.c.document])).where(tunes.c.name == name)).mappings()
            found = row.first()
        if found is None:
            return None
        try:
            document: dict[str, Any] = column_values(found, [tunes.c.document])["document"]
        except BadRow as exc:
            raise BadStoredRun(f"the results store {self.display_url}: tune {name!r}: {exc} (the store was changed "
                               "outside tokometer: delete that tune or restore the store from a copy)") from None
        return document

    def tune_names(self) -> list[str]:
        """The names of the saved tunes, most recently updated first (at most `MAX_TUNES_LISTED`)."""
        if not inspect(self.engine).has_table("tunes"):
            return []
        query = select(*bounded_columns([tunes.c.name])).order_by(tunes.c.updated_at.desc(), tunes.c.name)
        with self._reading() as conn:
            rows = conn.execute(query.limit(MAX_TUNES_LISTED)).mappings().all()
        try:
            return [column_values(row, [tunes.c.name])["name"] for row in rows]
        except BadRow as exc:
            raise BadStoredRun(f"the results store {self.display_url}: a tune's {exc}") from None

    def tags(self) -> dict[str, int]:
        """Every tag and the run it names (an older store without the table has none)."""
        if not inspect(self.engine).has_table("tags"):
            return {}
        with self.engine.connect() as conn:
            return {row.name: row.run_id for row in conn.execute(select(tags.c.name, tags.c.run_id))}

    def resolve(self, ref: str) -> int:
        """A run id from ``ID``, ``baseline:NAME`` or ``tag:NAME``; StoreError naming the known tags otherwise."""
        text = ref.strip()
        if text.isdigit():
            if int(text) < 1 or int(text) > 2**63 - 1:
                raise StoreError(f"{ref!r} is not a run id: ids are 1, 2, ... (see 'tokometer runs')")
            return int(text)
        kind, _, name = text.partition(":")
        if kind not in ("baseline", "tag") or not name:
            raise StoreError(f"{ref!r} is not a run: give a run id (see 'tokometer runs') or baseline:NAME")
        known = self.tags()
        if name not in known:
            have = ", ".join(sorted(known)) or "none yet; 'tokometer runs --tag NAME --id ID' makes one"
            raise StoreError(f"no baseline named {name!r} in {self.display_url} (tags: {have})")
        return known[name]

    def finish_run(self, run_id: int, status: str, engine: dict[str, Any] | None = None, *,
                   warnings: list[str] | None = None, finished_at: str | None = None) -> None:
        """The run ended with ``status`` at ``finished_at`` (now if not given); ``warnings``: the run's own, then its
        steps' (none: null; kept as they are when not given); ``engine``: its identity, when known only now."""
        self.flush()
        values: dict[str, Any] = {"status": status, "finished_at": finished_at or now_iso()}
        if engine is not None:
            values["engine"] = engine
        if warnings is not None:
            values["warnings"] = list(warnings) or None
        with self.engine.begin() as conn:
            conn.execute(update(runs).where(runs.c.id == run_id).values(**values))

    def flush(self) -> None:
        """Wait until every queued request is written (StoreError when the writer failed, or made no progress
        for `WRITE_DEADLINE_S`)."""
        if self._writer is not None:
            self._wait_written(self._writer)
        self._raise_error()

    def close(self) -> None:
        """Write what is queued (within `flush`'s deadline), stop the writer and let the database go; StoreError
        as `flush` says, after letting it go."""
        writer, self._writer = self._writer, None
        try:
            if writer is not None:
                self._queue.put(_STOP)
                self._wait_written(writer)
                writer.join(WRITE_DEADLINE_S)
        finally:
            self.engine.dispose()
        self._raise_error()

    def _wait_written(self, writer: threading.Thread) -> None:
        """Block until nothing is pending; StoreError when a batch takes longer than `WRITE_DEADLINE_S` or the
        writer is gone with requests unwritten."""
        with self._written:
            while self._pending:
                if not self._written.wait_for(partial(self._moved, self._pending, writer), timeout=WRITE_DEADLINE_S):
                    raise StoreError(f"writing to the results store {self.display_url} made no progress in "
                                     f"{WRITE_DEADLINE_S:g} s: {self._pending} request(s) not saved")
                if self._pending and not writer.is_alive():
                    raise StoreError(f"writing to the results store {self.display_url} stopped: "
                                     f"{self._pending} request(s) not saved")

    def _moved(self, pending: int, writer: threading.Thread) -> bool:
        """Whether fewer than ``pending`` requests wait now, or ``writer`` is gone (called under ``_written``)."""
        return self._pending < pending or not writer.is_alive()

    def _raise_error(self) -> None:
        """The writer's error, once, as a one-line StoreError."""
        if self._error is not None:
            error, self._error = self._error, None
            raise StoreError(f"writing to the results store {self.display_url} failed: "
                             f"{database_error(error, self.url)}")

    def _write_loop(self) -> None:
        """The writer thread: commit what is queued, batch by batch, until `close`'s stop mark."""
        try:
            stop = False
            while not stop:
                rows = self._take_batch()
                stop = rows[-1] is _STOP
                if stop:
                    rows.pop()
                self._insert(rows)
                with self._written:
                    self._pending -= len(rows)
                    self._written.notify_all()
        finally:
            with self._written:
                self._written.notify_all()  # a waiter sees the thread gone

    def _take_batch(self) -> list[Any]:
        """The next rows queued, at least one and at most `BATCH_ROWS` (the stop mark, when taken, last)."""
        batch = [self._queue.get()]
        while batch[-1] is not _STOP and len(batch) < BATCH_ROWS:
            try:
                batch.append(self._queue.get_nowait())
            except queue.Empty:
                break
        return batch

    def _insert(self, rows: list[dict[str, Any]]) -> None:
        """Commit ``rows`` in one transaction; any failure is kept (the first) for `flush` to raise."""
        if not rows:
            return
        try:
            with self.engine.begin() as conn:
                conn.execute(insert(requests), rows)
        except Exception as exc:  # every failure (sqlite3's OverflowError too) is the store's error
            if self._error is None:
                self._error = exc

    # -- reading (every value through `tokometer.store.load`: bounded, checked, typed) -----------------
    def newest(self, limit: int = 20) -> list[StoredRun]:
        """The newest ``limit`` runs, typed; StoreError naming the run and field of one the store holds wrong."""
        return [run for run, _ in self._newest(limit)]

    def list_runs(self, limit: int = 20) -> list[dict[str, Any]]:
        """The newest ``limit`` runs as the store holds them (each checked as `newest` does): their columns, their
        steps' under ``steps``."""
        return [data for _, data in self._newest(limit)]

    def get_run(self, run_id: int) -> dict[str, Any] | None:
        """One run as the store holds it (checked as `run` does); None if the store has no such run."""
        with self._reading() as conn:
            loaded = self._load_run(conn, run_id)
        return None if loaded is None else loaded[1]

    def run(self, run_id: int) -> StoredRun | None:
        """One run, typed; None if the store has no such run; StoreError naming the field the store holds wrong."""
        with self._reading() as conn:
            loaded = self._load_run(conn, run_id)
        return None if loaded is None else loaded[0]

    def _newest(self, limit: int) -> list[tuple[StoredRun, dict[str, Any]]]:
        found = []
        with self._reading() as conn:
            ids = conn.execute(select(*bounded_columns([runs.c.id])).order_by(runs.c.id.desc()).limit(limit))
            for row in ids.mappings().all():
                run_id = self._checked(row["id"], lambda r: column_values(r, [runs.c.id])["id"], row)
                if (loaded := self._load_run(conn, run_id)) is not None:
                    found.append(loaded)
        return found

    def _load_run(self, conn: Connection, run_id: int) -> tuple[StoredRun, dict[str, Any]] | None:
        """Run ``run_id`` typed, and its checked values (the run's columns, its steps' under ``steps``)."""
        head = conn.execute(select(*bounded_columns(self._columns)).where(runs.c.id == _given_id(run_id))).mappings()
        row = head.first()
        if row is None:
            return None
        step_rows = conn.execute(select(*bounded_columns(self._step_columns)).where(steps.c.run_id == _given_id(run_id))
                                 .order_by(steps.c.step).limit(MAX_STEPS_READ + 1)).mappings().all()
        if len(step_rows) > MAX_STEPS_READ:
            raise bad_run(self.display_url, run_id, BadRow("steps", f"more than {MAX_STEPS_READ:,} of them"))

        def build(_: Any) -> tuple[StoredRun, dict[str, Any]]:
            values = column_values(row, self._columns)
            values["spec"] = redact_saved_spec(values["spec"])
            listed = [column_values(s, self._step_columns, f"steps[{i}].") for i, s in enumerate(step_rows)]
            return run_of(values, listed), {**values, "steps": listed}

        return self._checked(run_id, build, None)

    def _checked(self, run_id: Any, read: Callable[[_A], _T], arg: _A) -> _T:
        """``read(arg)``; its BadRow as the one line naming run ``run_id``."""
        try:
            return read(arg)
        except BadRow as exc:
            raise bad_run(self.display_url, run_id, exc) from None

    @contextmanager
    def _reading(self) -> Iterator[Connection]:
        """A connection to read on; the database's failures (a deadline passed, a value too large, a table
        missing) as one StoreError line."""
        try:
            with self.engine.connect() as conn:
                yield conn
        except SQLAlchemyError as exc:
            raise StoreError(f"cannot read the results store {self.display_url}: "
                             f"{read_failure(exc, self.url)}") from None

    def load_records(self, run_id: int, step: int | None = None) -> list[RequestRecord]:
        """The requests of run ``run_id`` (of one ``step``), in order; StoreError naming the first one the store
        holds wrong, or when the run has more than `MAX_REQUESTS_READ`."""
        query = select(*bounded_columns(self._request_columns)).where(requests.c.run_id == _given_id(run_id))
        if step is not None:
            query = query.where(requests.c.step == step)
        query = query.order_by(requests.c.step, requests.c.idx).limit(MAX_REQUESTS_READ + 1)
        with self._reading() as conn:
            rows = conn.execute(query).mappings().all()
        if len(rows) > MAX_REQUESTS_READ:
            raise bad_run(self.display_url, run_id, BadRow("requests", f"more than {MAX_REQUESTS_READ:,} of them"))
        return [self._checked(run_id, self._record, row) for row in rows]

    def _record(self, row: RowMapping) -> RequestRecord:
        return record_of(column_values(row, self._request_columns, "requests."))
