"""Runs whose process is gone: found when a store is opened, marked ``aborted``, summarised.

Each run row names the process writing it: pid, host name and the process's start time (so a
pid reused by another program is not taken for it). A run still ``running`` whose process no
longer exists on this host was killed (SIGKILL, a crash, a power cut): its status becomes
``aborted`` and every step left without a summary is summarised from the requests stored before
the end, marked interrupted: the same summary as ``bench`` gives (`tokometer.runs.finish.finish_step`), its
steady state and time slices (from the step's saved load and the run's ``--time-slice`` and
``--steady-tolerance``, read through `tokometer.runs.stored_spec.StoredSpec`) and the throughput per GPU
(``--gpus``, or the engine saved with the run) included; the store keeps no text, so it has no text check.
Runs of other hosts are left alone: their processes cannot be seen.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import sqlite3
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Final

import psutil
from sqlalchemy import Engine, inspect, select, update
from sqlalchemy.engine import Connection

from tokometer.gpu_count import gpu_count
from tokometer.load.profiles import LoadStep
from tokometer.runs.finish import finish_step
from tokometer.runs.stored_spec import StoredSpec
from tokometer.store import database
from tokometer.store.database import BoundedConnection
from tokometer.store.load import (
    MAX_REQUESTS_READ,
    MAX_STEPS_READ,
    BadRow,
    bad_run,
    bounded_columns,
    column_values,
    record_of,
)
from tokometer.store.runs import load_of
from tokometer.store.schema import requests, runs, steps

__all__ = ["MAX_ORPHANS", "abort_runs", "find_orphans", "process_identity"]

_START_TOLERANCE_S = 1.0
MAX_ORPHANS: Final = 1_000
"""The most killed runs one opening of the store recovers (the next opening takes the rest)."""


def process_identity() -> dict[str, Any]:
    """The columns that name this process in a run row."""
    return {"pid": os.getpid(), "hostname": socket.gethostname(),
            "process_started": psutil.Process().create_time()}


def _gone(pid: int, started: float | None) -> bool:
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return True
        return started is not None and abs(process.create_time() - started) > _START_TOLERANCE_S
    except psutil.NoSuchProcess:
        return True
    except psutil.AccessDenied:
        return False  # it exists; someone else's


def find_orphans(engine: Engine, where: str) -> list[int]:
    """Ids of the runs still marked ``running`` whose process on this host is gone (at most `MAX_ORPHANS`);
    StoreError naming the run whose row says which process it is wrongly (`tokometer.store.load`)."""
    host = socket.gethostname()
    columns = [runs.c.id, runs.c.pid, runs.c.process_started]
    query = select(*bounded_columns(columns)).where(
        runs.c.status == "running", runs.c.hostname == host, runs.c.pid.is_not(None)).limit(MAX_ORPHANS)
    with engine.connect() as conn, _deadline(conn):
        rows = conn.execute(query).mappings().all()
    found = []
    for row in rows:
        try:
            values = column_values(row, columns)
        except BadRow as exc:
            raise bad_run(where, row["id"], exc) from None
        if values["pid"] is None or _gone(values["pid"], values["process_started"]):
            found.append(values["id"])
    return found


def abort_runs(engine: Engine, run_ids: list[int], where: str) -> list[int]:
    """Mark ``run_ids`` aborted and summarise their unfinished steps; returns those this call marked. StoreError
    naming the run and field the store holds wrong (nothing of that run is changed)."""
    marked = []
    for run_id in run_ids:
        with engine.begin() as conn, _deadline(conn):
            done = conn.execute(update(runs).where(runs.c.id == run_id, runs.c.status == "running")
                                .values(status="aborted"))
            if done.rowcount != 1:
                continue  # another process got there first
            try:
                _summarise_unfinished(conn, run_id)
            except BadRow as exc:
                raise bad_run(where, run_id, exc) from None
        marked.append(run_id)
    return marked


@contextmanager
def _deadline(conn: Connection) -> Iterator[None]:
    """SQLite: each statement of ``conn`` stopped after `tokometer.store.database.READ_DEADLINE_S` (a trigger of
    a crafted store that never ends); other databases: their own timeouts."""
    raw = conn.connection.dbapi_connection
    if not isinstance(raw, sqlite3.Connection) or isinstance(raw, BoundedConnection):
        yield  # not SQLite, or a reader's connection: bounded already
        return
    ends = time.monotonic() + database.READ_DEADLINE_S
    raw.set_progress_handler(lambda: int(time.monotonic() > ends), 10_000)
    try:
        yield
    finally:
        raw.set_progress_handler(None, 0)


def _summarise_unfinished(conn: Connection, run_id: int) -> None:
    head = [runs.c.spec, runs.c.engine]
    values = column_values(conn.execute(select(*bounded_columns(head)).where(runs.c.id == run_id)).mappings().one(),
                           head)
    spec = StoredSpec(values["spec"])
    gpus, _ = gpu_count(values["engine"], spec.gpus)
    have = {c["name"] for c in inspect(conn).get_columns("requests")}  # a store a reader may not migrate
    columns = [c for c in requests.c if c.name in have]
    step_columns = [steps.c.step, steps.c.load]
    open_steps = conn.execute(select(*bounded_columns(step_columns)).where(
        steps.c.run_id == run_id, steps.c.summary.is_(None)).limit(MAX_STEPS_READ)).mappings().all()
    for i, row in enumerate(open_steps):
        step = column_values(row, step_columns, f"steps[{i}].")
        rows = conn.execute(select(*bounded_columns(columns)).where(requests.c.run_id == run_id,
                                                                    requests.c.step == step["step"])
                            .order_by(requests.c.idx).limit(MAX_REQUESTS_READ)).mappings().all()
        records = [record_of(column_values(r, columns, "requests.")) for r in rows]
        summary = finish_step(records, slo=spec.slo_limits, load=_stored_load(step["load"]),
                              steady_tolerance=spec.steady_tolerance, time_slice_s=spec.time_slice_s, gpus=gpus,
                              mix=spec.get("mix"))
        conn.execute(update(steps).where(steps.c.run_id == run_id, steps.c.step == step["step"])
                     .values(summary=summary.to_json(), interrupted=True))


def _stored_load(label: Any) -> LoadStep | None:
    """The load a step's ``load`` column holds, as far as its windows need it: a trace has no target, sessions
    no steady state (`tokometer.store.runs.load_of` reads neither)."""
    if not isinstance(label, Mapping):
        return None
    if label.get("arrival") == "trace":
        return LoadStep("trace")
    try:
        load = load_of(label)
    except (ValueError, TypeError, OverflowError):
        raise BadRow("steps.load", "not a load this version wrote") from None
    return dataclasses.replace(load, sessions=True) if load is not None and label.get("sessions") else load
