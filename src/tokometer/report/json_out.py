"""The JSON result of a benchmark run: a documented, stable format.

Top level: ``schema`` ("tokometer.bench/2"), ``run_id``, ``status``
(completed / interrupted / failed), ``started_at``, ``finished_at``,
``target`` (url, api, model), ``spec``, ``prompt_source``, ``engine``,
``host``, ``definitions`` (what each metric name means), ``warnings`` and
``steps``: one entry per load step as the store keeps it (`StoredStep.to_json`): ``step`` (its index), ``load``
(``{"concurrency": N}`` or ``{"rate": R, "arrival": ...}``), ``started_at``, ``summary`` (counts, throughputs,
token totals with their sources, and distributions with count/mean/std/min/p50/p90/p95/p99/p99.9/max),
``health`` (the load generator's own health), ``interrupted``, ``server`` and ``gpu``; with ``bench --repeat``
each ``load`` also holds its ``trial`` (1..N). A ``--find-max`` run adds ``find_max``: the answer and each probe
judged against the objectives. Fields are only ever added, never renamed, within a schema version
(``tokometer.bench/1`` named a step's ``step`` ``index`` and its ``health`` ``client``; it still reads).

A live run and a saved one are written by one function (`run_json`, over a `StoredRun`: `BenchResult.stored`
for a live run; the store's, or a ``bench --json`` file read back by `StoredRun.from_bench_json`, for
``tokometer report --format json``); the store keeps neither ``prompt_source`` nor ``warnings``, so a run read
from the store has ``null`` and ``[]`` there.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tokometer.benchmark.run import BenchResult
from tokometer.metrics.registry import definitions
from tokometer.report.data import find_max_of
from tokometer.store.runs import BENCH_SCHEMA, StoredRun
from tokometer.util.atomicfile import write_atomic
from tokometer.util.jsontext import dumps

__all__ = ["SCHEMA", "bench_json", "run_json", "write_json"]

SCHEMA = BENCH_SCHEMA


def run_json(run: StoredRun) -> dict[str, Any]:
    """A run (saved: from the store or a ``bench --json`` file read back; or live, `BenchResult.stored`) as the
    ``tokometer.bench/2`` object, its keys in their documented order; each step is `StoredStep.to_json`."""
    search = find_max_of(run)
    return {"schema": SCHEMA, "tokometer_version": run.tokometer_version, "run_id": run.id or None,
            "status": run.status, "started_at": run.started_at, "finished_at": run.finished_at,
            "target": {"url": run.target, "api": run.api, "model": run.model}, "spec": dict(run.spec),
            "prompt_source": run.prompt_source, "engine": run.engine.to_json() if run.engine else None,
            "host": dict(run.host) if run.host is not None else None, "definitions": definitions(),
            "warnings": list(run.warnings),
            "find_max": search.to_json() if search is not None else None,
            "steps": [s.to_json() for s in run.steps]}


def bench_json(result: BenchResult) -> dict[str, Any]:
    """A live run as a JSON-able dict: the run as it reads once saved (`BenchResult.stored`), written by `run_json`."""
    return run_json(result.stored())


def write_json(result: BenchResult, path: Path) -> None:
    write_atomic(path, dumps(bench_json(result), indent=2) + "\n")
