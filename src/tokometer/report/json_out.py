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

A live run and a saved one are the same `StoredRun`, written by one function (`run_json`): `BenchResult.run`
for ``bench --json``; the store's for ``runs --id N`` and ``report N --format json``; a ``bench --json`` file read
back by `StoredRun.from_bench_json` for ``report FILE --format json``. So the document of a run is the same text
whichever of them prints it (the store keeps its prompt source and its warnings, too).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tokometer.benchmark import findmax
from tokometer.benchmark.run import BenchResult
from tokometer.metrics.registry import definitions
from tokometer.store.runs import BENCH_SCHEMA, StoredRun
from tokometer.util.atomicfile import write_atomic
from tokometer.util.jsontext import dumps

__all__ = ["SCHEMA", "bench_json", "run_json", "write_json"]

SCHEMA = BENCH_SCHEMA


def run_json(run: StoredRun) -> dict[str, Any]:
    """A run (saved: from the store or a ``bench --json`` file read back; or live, `BenchResult.run`) as the
    ``tokometer.bench/2`` object, its keys in their documented order; each step is `StoredStep.to_json`."""
    search = findmax.run_outcome(run)
    return {"schema": SCHEMA, "tokometer_version": run.tokometer_version, "run_id": run.id or None,
            "status": run.status, "started_at": run.started_at, "finished_at": run.finished_at,
            "target": {"url": run.target, "api": run.api, "model": run.model}, "spec": dict(run.spec),
            "prompt_source": run.prompt_source, "engine": run.engine.to_json() if run.engine else None,
            "host": dict(run.host) if run.host is not None else None, "definitions": definitions(),
            "warnings": list(run.warnings),
            "find_max": search.to_json() if search is not None else None,
            "steps": [s.to_json() for s in run.steps]}


def bench_json(result: BenchResult) -> dict[str, Any]:
    """A live run as a JSON-able dict: its run (`BenchResult.run`), written by `run_json`."""
    return run_json(result.run)


def write_json(result: BenchResult, path: Path) -> None:
    write_atomic(path, dumps(bench_json(result), indent=2) + "\n")
