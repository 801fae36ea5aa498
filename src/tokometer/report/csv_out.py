"""CSV of a benchmark run: one row per load step, the headline numbers.

A live run (``bench --csv``) and a saved one (``report --format csv``: from the store, or a ``bench --json``
file read back) give the same rows: both go through `summary_row`, over the step's typed `StepSummary`.
The columns are the metric registry's (`tokometer.metrics.registry`: a metric's ``csv`` says which of its
figures are columns)."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tokometer.atomicfile import atomic_open
from tokometer.benchmark.run import BenchResult, StepResult
from tokometer.load.profiles import LoadStep
from tokometer.metrics import registry
from tokometer.metrics.summary import StepSummary
from tokometer.store.runs import StoredRun

__all__ = ["CSV_COLUMNS", "csv_text", "run_rows", "step_row", "summary_row", "write_csv"]

_METRIC_COLUMNS = registry.csv_columns()
CSV_COLUMNS = ["step", "concurrency", "rate", *(column for column, _, _ in _METRIC_COLUMNS), "trial"]
"""The load's columns, then each metric's (`tokometer.metrics.registry.csv_columns`, in registry order)."""
_DIGITS = {"s": 4, "tok/s": 3, "req/s": 4, "requests": 3}
"""Decimals a rate or a duration is rounded to, by unit (a count is whole already; percentiles are not rounded)."""


def step_row(s: StepResult) -> dict[str, Any]:
    """The row of a live step."""
    return summary_row(s.index, s.step, s.trial, s.summary)


def run_rows(run: StoredRun) -> list[dict[str, Any]]:
    """The rows of a saved run: one per step that finished with a summary."""
    return [summary_row(s.index, s.load, s.trial, s.summary) for s in run.steps if s.summary is not None]


def _cell(value: Any, unit: str) -> Any:
    if isinstance(value, dict):  # counts by source: usage=12;estimate=3
        return ";".join(f"{k}={v}" for k, v in sorted(value.items()))
    if isinstance(value, float) and unit in _DIGITS:
        return round(value, _DIGITS[unit])
    return value


def summary_row(index: int, step: LoadStep | None, trial: int | None, summary: StepSummary) -> dict[str, Any]:
    """One step's row, from its index, load, trial and summary."""
    load = step.label() if step is not None else {}
    row: dict[str, Any] = {
        "step": index,
        "concurrency": load.get("concurrency", ""),
        "rate": load.get("rate", ""),
        "trial": trial if trial is not None else "",
    }
    for column, metric, stat in _METRIC_COLUMNS:
        value = getattr(summary, metric.attribute or metric.name)
        row[column] = value.stat(stat) if stat else _cell(value, metric.unit)
    return row


def _write(handle: Any, rows: Iterable[dict[str, Any]]) -> None:
    writer = csv.DictWriter(handle, fieldnames=CSV_COLUMNS)
    writer.writeheader()
    writer.writerows(rows)


def write_csv(result: BenchResult, path: Path) -> None:
    with atomic_open(path, newline="") as handle:
        _write(handle, run_rows(result.stored()))


def csv_text(run: StoredRun) -> str:
    """A saved run's CSV, as `write_csv` writes a live one."""
    out = io.StringIO(newline="")
    _write(out, run_rows(run))
    return out.getvalue()
