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
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tokometer import __version__
from tokometer.atomicfile import write_atomic
from tokometer.benchmark.run import BenchResult
from tokometer.metrics import DEFINITIONS

__all__ = ["SCHEMA", "bench_json", "write_json"]

SCHEMA = "tokometer.bench/1"


def bench_json(result: BenchResult) -> dict[str, Any]:
    """The run as a JSON-able dict."""
    return {
        "schema": SCHEMA,
        "tokometer_version": __version__,
        "run_id": result.run_id,
        "status": result.status,
        "started_at": result.started_at,
        "finished_at": result.finished_at,
        "target": {"url": result.spec.url, "api": result.spec.api, "model": result.model},
        "spec": result.spec.model_dump(mode="json"),
        "prompt_source": result.prompt_source,
        "engine": result.engine,
        "host": result.host,
        "definitions": DEFINITIONS,
        "warnings": result.warnings + [w for s in result.steps for w in s.warnings],
        "find_max": search.to_json() if (search := result.find_max()) is not None else None,
        "steps": [
            {
                "index": s.index,
                "load": s.load_label,
                "summary": s.summary.to_json(),
                "client": s.health.to_json(),
                "interrupted": s.interrupted,
                "server": s.server,
                "gpu": s.gpu,
            }
            for s in result.steps
        ],
    }


def write_json(result: BenchResult, path: Path) -> None:
    write_atomic(path, json.dumps(bench_json(result), indent=2) + "\n")
