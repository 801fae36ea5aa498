"""The JSON result of a benchmark run: a documented, stable format.

Top level: ``schema`` ("tokometer.bench/1"), ``run_id``, ``status``
(completed / interrupted / failed), ``started_at``, ``finished_at``,
``target`` (url, api, model), ``spec``, ``prompt_source``, ``engine``,
``host``, ``definitions`` (what each metric name means), ``warnings`` and
``steps``: one entry per load step with ``load`` (``{"concurrency": N}`` or
``{"rate": R, "arrival": ...}``), ``summary`` (counts, throughputs, token
totals with their sources, and distributions with count/mean/std/min/p50/p90/
p95/p99/p99.9/max), ``client`` (the load generator's own health) and
``interrupted``; with ``bench --repeat`` each ``load`` also holds its ``trial`` (1..N). A ``--find-max`` run
adds ``find_max``: the answer and each probe judged against the objectives. Fields are only ever added,
never renamed, within a schema version.

A saved run is written in the same format (`run_json`, for ``tokometer report --format json``), from the store
or from such a file read back (`StoredRun.from_bench_json`); the store keeps neither ``prompt_source`` nor
``warnings``, so a run read from the store has ``null`` and ``[]`` there.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tokometer import __version__
from tokometer.atomicfile import write_atomic
from tokometer.benchmark.run import BenchResult
from tokometer.load.profiles import load_entry
from tokometer.metrics import DEFINITIONS
from tokometer.report.data import find_max_of
from tokometer.store.runs import BENCH_SCHEMA, StoredRun

__all__ = ["SCHEMA", "bench_json", "run_json", "write_json"]

SCHEMA = BENCH_SCHEMA


def _document(head: dict[str, Any], warnings: list[str], find_max: dict[str, Any] | None,
              steps: list[dict[str, Any]]) -> dict[str, Any]:
    """The ``tokometer.bench/1`` object, its keys in their documented order."""
    return {"schema": SCHEMA, **head, "definitions": DEFINITIONS, "warnings": warnings, "find_max": find_max,
            "steps": steps}


def _step(index: int, load: dict[str, Any] | None, summary: Any, client: Any, interrupted: bool, server: Any,
          gpu: Any) -> dict[str, Any]:
    return {"index": index, "load": load, "summary": summary, "client": client, "interrupted": interrupted,
            "server": server, "gpu": gpu}


def bench_json(result: BenchResult) -> dict[str, Any]:
    """The run as a JSON-able dict."""
    head = {"tokometer_version": __version__, "run_id": result.run_id, "status": result.status,
            "started_at": result.started_at, "finished_at": result.finished_at,
            "target": {"url": result.spec.url, "api": result.spec.api, "model": result.model},
            "spec": result.spec.model_dump(mode="json"), "prompt_source": result.prompt_source,
            "engine": result.engine, "host": result.host}
    search = result.find_max()
    return _document(head, result.warnings + [w for s in result.steps for w in s.warnings],
                     search.to_json() if search is not None else None,
                     [_step(s.index, s.load_label, s.summary.to_json(), s.health.to_json(), s.interrupted, s.server,
                            s.gpu) for s in result.steps])


def run_json(run: StoredRun) -> dict[str, Any]:
    """A saved run (from the store, or a ``bench --json`` file read back) as ``bench --json`` writes a live one."""
    head = {"tokometer_version": run.tokometer_version, "run_id": run.id or None, "status": run.status,
            "started_at": run.started_at, "finished_at": run.finished_at,
            "target": {"url": run.target, "api": run.api, "model": run.model}, "spec": dict(run.spec),
            "prompt_source": run.extra.get("prompt_source"), "engine": run.engine.to_json() if run.engine else None,
            "host": dict(run.host) if run.host is not None else None}
    search = find_max_of(run)
    steps = [_step(s.index, load_entry(s.load, s.trial) if s.load else None,
                   dict(s.summary) if s.summary is not None else None, s.health.to_json() if s.health else None,
                   s.interrupted, dict(s.server) if s.server is not None else None,
                   [dict(g) for g in s.gpu] if s.gpu else None) for s in run.steps]
    return _document(head, list(run.extra.get("warnings") or ()), search.to_json() if search is not None else None,
                     steps)


def write_json(result: BenchResult, path: Path) -> None:
    write_atomic(path, json.dumps(bench_json(result), indent=2) + "\n")
