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
from collections.abc import Mapping
from typing import Any

import psutil
from sqlalchemy import Engine, inspect, select, update
from sqlalchemy.engine import Connection

from tokometer.gpu_count import gpu_count
from tokometer.load.profiles import LoadStep
from tokometer.runs.finish import finish_step
from tokometer.runs.stored_spec import StoredSpec
from tokometer.store.rows import row_record
from tokometer.store.runs import load_of
from tokometer.store.schema import requests, runs, steps

__all__ = ["abort_runs", "find_orphans", "process_identity"]

_START_TOLERANCE_S = 1.0


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


def find_orphans(engine: Engine) -> list[int]:
    """Ids of the runs still marked ``running`` whose process on this host is gone."""
    host = socket.gethostname()
    query = select(runs.c.id, runs.c.pid, runs.c.process_started).where(
        runs.c.status == "running", runs.c.hostname == host, runs.c.pid.is_not(None))
    with engine.connect() as conn:
        rows = conn.execute(query).all()
    return [row.id for row in rows if _gone(row.pid, row.process_started)]


def abort_runs(engine: Engine, run_ids: list[int]) -> list[int]:
    """Mark ``run_ids`` aborted and summarise their unfinished steps; returns those this call marked."""
    marked = []
    for run_id in run_ids:
        with engine.begin() as conn:
            done = conn.execute(update(runs).where(runs.c.id == run_id, runs.c.status == "running")
                                .values(status="aborted"))
            if done.rowcount != 1:
                continue  # another process got there first
            _summarise_unfinished(conn, run_id)
        marked.append(run_id)
    return marked


def _summarise_unfinished(conn: Connection, run_id: int) -> None:
    saved, engine = conn.execute(select(runs.c.spec, runs.c.engine).where(runs.c.id == run_id)).one()
    spec = StoredSpec(saved if isinstance(saved, dict) else None)
    gpus, _ = gpu_count(engine if isinstance(engine, dict) else None, spec.gpus)
    have = {c["name"] for c in inspect(conn).get_columns("requests")}  # a store a reader may not migrate
    columns = [c for c in requests.c if c.name in have]
    open_steps = conn.execute(select(steps.c.step, steps.c.load).where(steps.c.run_id == run_id,
                                                                      steps.c.summary.is_(None)))
    for step, label in open_steps.all():
        rows = conn.execute(select(*columns).where(requests.c.run_id == run_id, requests.c.step == step)
                            .order_by(requests.c.idx)).all()
        summary = finish_step([row_record(row) for row in rows], slo=spec.slo_limits, load=_stored_load(label),
                              steady_tolerance=spec.steady_tolerance, time_slice_s=spec.time_slice_s, gpus=gpus)
        conn.execute(update(steps).where(steps.c.run_id == run_id, steps.c.step == step)
                     .values(summary=summary.to_json(), interrupted=True))


def _stored_load(label: Any) -> LoadStep | None:
    """The load a step's ``load`` column holds, as far as its windows need it: a trace has no target, sessions
    no steady state (`tokometer.store.runs.load_of` reads neither)."""
    if not isinstance(label, Mapping):
        return None
    if label.get("arrival") == "trace":
        return LoadStep("trace")
    load = load_of(label)
    return dataclasses.replace(load, sessions=True) if load is not None and label.get("sessions") else load
