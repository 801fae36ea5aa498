"""`ResultStore`: saves runs as they happen, so a crash or Ctrl-C loses nothing finished.

Requests are written by a background thread: `append()` only puts the record
on a queue (no disk I/O on the event loop); the writer takes everything queued
and commits it in one transaction, so under load it batches by itself and when
idle each request is committed as soon as it finishes. SQLite (WAL mode) by
default; any SQLAlchemy URL (e.g. PostgreSQL) works the same.
"""

from __future__ import annotations

import dataclasses
import os
import queue
import threading
from array import array
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import platformdirs
from sqlalchemy import Engine, create_engine, event, insert, select, update
from sqlalchemy.exc import SQLAlchemyError

from tokometer import __version__
from tokometer.errors import StoreError
from tokometer.records import RequestRecord, ServerTiming
from tokometer.store.schema import SCHEMA_VERSION, metadata, requests, runs, steps

__all__ = ["ResultStore", "default_store_url", "now_iso"]

_STOP = object()


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def default_store_url() -> str:
    """``TOKOMETER_STORE`` (a URL or a file path), else ``runs.db`` in the user data directory."""
    configured = os.environ.get("TOKOMETER_STORE")
    if configured:
        return configured if "://" in configured else f"sqlite:///{Path(configured).expanduser()}"
    return f"sqlite:///{Path(platformdirs.user_data_dir('tokometer')) / 'runs.db'}"


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def _record_row(run_id: int, r: RequestRecord) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "step": r.step,
        "idx": r.index,
        "warmup": r.warmup,
        "due_ns": r.due_ns,
        "connect_ns": r.connect_ns,
        "sent_ns": r.sent_ns,
        "first_byte_ns": r.first_byte_ns,
        "first_token_ns": r.first_token_ns,
        "last_token_ns": r.last_token_ns,
        "end_ns": r.end_ns,
        "chunk_count": r.chunk_count,
        "input_tokens": r.input_tokens,
        "input_tokens_source": r.input_tokens_source,
        "output_tokens": r.output_tokens,
        "output_tokens_source": r.output_tokens_source,
        "requested_output_tokens": r.requested_output_tokens,
        "status": r.status,
        "finish_reason": r.finish_reason,
        "error": r.error,
        "error_detail": r.error_detail or None,
        "server": dataclasses.asdict(r.server) if r.server else None,
        "event_ns": array("q", r.event_ns).tobytes(),
        "event_tokens": array("d", r.event_tokens).tobytes(),
    }


def _row_record(row: Any) -> RequestRecord:
    event_ns = array("q")
    event_ns.frombytes(row.event_ns or b"")
    event_tokens = array("d")
    event_tokens.frombytes(row.event_tokens or b"")
    return RequestRecord(
        index=row.idx,
        step=row.step,
        warmup=row.warmup,
        due_ns=row.due_ns,
        connect_ns=row.connect_ns,
        sent_ns=row.sent_ns,
        first_byte_ns=row.first_byte_ns,
        first_token_ns=row.first_token_ns,
        last_token_ns=row.last_token_ns,
        end_ns=row.end_ns,
        event_ns=list(event_ns),
        event_tokens=list(event_tokens),
        chunk_count=row.chunk_count,
        input_tokens=row.input_tokens,
        input_tokens_source=row.input_tokens_source,
        output_tokens=row.output_tokens,
        output_tokens_source=row.output_tokens_source,
        requested_output_tokens=row.requested_output_tokens,
        status=row.status,
        finish_reason=row.finish_reason,
        error=row.error,
        error_detail=row.error_detail or "",
        server=ServerTiming(**row.server) if row.server else None,
    )


class ResultStore:
    """Runs, steps and requests in one database; see the module docstring."""

    def __init__(self, url: str | None = None) -> None:
        self.url = url or default_store_url()
        self.engine = self._open(self.url)
        self._queue: queue.Queue[Any] = queue.Queue()
        self._writer: threading.Thread | None = None
        self._error: BaseException | None = None

    @staticmethod
    def _open(url: str) -> Engine:
        try:
            if url.startswith("sqlite:///"):
                path = Path(url.removeprefix("sqlite:///"))
                path.parent.mkdir(parents=True, exist_ok=True)
            engine = create_engine(url)
            if engine.dialect.name == "sqlite":
                event.listen(engine, "connect", _sqlite_pragmas)
            metadata.create_all(engine)
        except (SQLAlchemyError, OSError) as exc:
            raise StoreError(f"cannot open the results store {url}: {exc} (set --store or TOKOMETER_STORE)") from exc
        return engine

    # -- writing ----------------------------------------------------------------------------
    def create_run(self, *, target: str, api: str, model: str, spec: dict[str, Any], engine: dict[str, Any] | None,
                   host: dict[str, Any] | None, label: str | None = None) -> int:
        values = {
            "started_at": now_iso(), "status": "running", "target": target, "api": api, "model": model,
            "label": label, "spec": spec, "engine": engine, "host": host, "tokometer_version": __version__,
            "schema_version": SCHEMA_VERSION,
        }
        with self.engine.begin() as conn:
            result = conn.execute(insert(runs).values(**values))
            run_id = result.inserted_primary_key[0] if result.inserted_primary_key else None
        if not isinstance(run_id, int):
            raise StoreError("the results store did not return a run id")
        return run_id

    def start_step(self, run_id: int, step: int, load: dict[str, Any]) -> None:
        self.flush()
        with self.engine.begin() as conn:
            conn.execute(insert(steps).values(run_id=run_id, step=step, load=load, started_at=now_iso(),
                                              interrupted=False))

    def append(self, run_id: int, record: RequestRecord) -> None:
        """Queue one finished request for writing; returns at once."""
        if self._writer is None:
            self._writer = threading.Thread(target=self._write_loop, name="tokometer-store", daemon=True)
            self._writer.start()
        self._queue.put(_record_row(run_id, record))

    def finish_step(self, run_id: int, step: int, summary: dict[str, Any], health: dict[str, Any],
                    interrupted: bool) -> None:
        self.flush()
        with self.engine.begin() as conn:
            conn.execute(update(steps).where(steps.c.run_id == run_id, steps.c.step == step)
                         .values(summary=summary, health=health, interrupted=interrupted))

    def finish_run(self, run_id: int, status: str, engine: dict[str, Any] | None = None) -> None:
        self.flush()
        values: dict[str, Any] = {"status": status, "finished_at": now_iso()}
        if engine is not None:
            values["engine"] = engine
        with self.engine.begin() as conn:
            conn.execute(update(runs).where(runs.c.id == run_id).values(**values))

    def flush(self) -> None:
        """Wait until every queued request is written."""
        if self._writer is not None:
            self._queue.join()
        if self._error is not None:
            error, self._error = self._error, None
            raise StoreError(f"writing to the results store {self.url} failed: {error}")

    def close(self) -> None:
        if self._writer is not None:
            self._queue.put(_STOP)
            self._writer.join()
            self._writer = None
        self.engine.dispose()

    def _write_loop(self) -> None:
        while True:
            batch = [self._queue.get()]
            while True:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            rows = [row for row in batch if row is not _STOP]
            try:
                if rows:
                    with self.engine.begin() as conn:
                        conn.execute(insert(requests), rows)
            except SQLAlchemyError as exc:
                self._error = exc
            finally:
                for _ in batch:
                    self._queue.task_done()
            if len(rows) != len(batch):
                return

    # -- reading ----------------------------------------------------------------------------
    def list_runs(self, limit: int = 20) -> list[dict[str, Any]]:
        with self.engine.connect() as conn:
            rows = conn.execute(select(runs).order_by(runs.c.id.desc()).limit(limit)).mappings().all()
            out = []
            for row in rows:
                step_rows = conn.execute(select(steps).where(steps.c.run_id == row["id"]).order_by(steps.c.step))
                out.append({**dict(row), "steps": [dict(s) for s in step_rows.mappings().all()]})
        return out

    def get_run(self, run_id: int) -> dict[str, Any] | None:
        with self.engine.connect() as conn:
            row = conn.execute(select(runs).where(runs.c.id == run_id)).mappings().first()
            if row is None:
                return None
            step_rows = conn.execute(select(steps).where(steps.c.run_id == run_id).order_by(steps.c.step))
            return {**dict(row), "steps": [dict(s) for s in step_rows.mappings().all()]}

    def load_records(self, run_id: int, step: int | None = None) -> list[RequestRecord]:
        query = select(requests).where(requests.c.run_id == run_id)
        if step is not None:
            query = query.where(requests.c.step == step)
        with self.engine.connect() as conn:
            rows = conn.execute(query.order_by(requests.c.step, requests.c.idx)).all()
        return [_row_record(row) for row in rows]
