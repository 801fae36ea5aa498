"""CSV of a benchmark run: one row per load step, the headline numbers, then a row per window of it.

A live run (``bench --csv``) and a saved one (``report --format csv``: from the store, or a ``bench --json``
file read back) give the same rows: both go through `summary_row`, over the step's typed `StepSummary`.
The columns are the metric registry's (`tokometer.metrics.registry`: a metric's ``csv`` says which of its
figures are columns).

Windows (`WINDOW_COLUMNS`, appended after the older columns so a reader of those still reads them): each step's
row has ``window`` ``step``; after it come its steady state (``steady``, where one was found) and each time
slice (``slice 0``, ``slice 1``, ... with ``bench --time-slice``), their ``window_start_s`` and
``window_end_s`` from the step's start (`tokometer.metrics.window`), then each tenant of a mix (``tenant NAME``,
``bench --mix``: `tokometer.metrics.tenants`; no span, its throughput over the whole step's). A window's row
holds the figures a window has (`_WINDOW_FIGURES`; requests by the window's choice of them, throughput over its
length) and leaves the rest empty. One row per step: keep the rows whose ``window`` is ``step``."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tokometer.benchmark.run import BenchResult, StepResult
from tokometer.load.profiles import LoadStep
from tokometer.metrics import registry
from tokometer.metrics.summary import StepSummary
from tokometer.store.runs import StoredRun
from tokometer.util.atomicfile import atomic_open

__all__ = ["CSV_COLUMNS", "WINDOW_COLUMNS", "columns", "csv_text", "run_rows", "step_row", "step_rows", "summary_row",
           "window_rows", "write_csv"]

WINDOW_COLUMNS = ["window", "window_start_s", "window_end_s"]
"""Which part of the step a row is of: ``step``, ``steady`` or ``slice N``; and that window's span."""
_WINDOW_SCALARS = {"requests_completed": "completed", "requests_failed": "failed",
                   **{name: name for name in ("output_throughput_tok_s", "request_throughput_rps",
                                              "achieved_concurrency")}}
"""A CSV metric of the step as a whole a window has -> its key in the window
(`tokometer.metrics.window.window_summary`); its ``duration_s`` is its length."""


def columns() -> list[str]:
    """The load's columns, then each metric's (`tokometer.metrics.registry.csv_columns`, in registry order), the
    trial, then the window's: of the registry in use when called."""
    return ["step", "concurrency", "rate", *(column for column, _, _ in registry.csv_columns()), "trial",
            *WINDOW_COLUMNS]


CSV_COLUMNS = columns()
"""The CSV's columns (`columns`) of the registry's own rows."""


def _window_figures() -> dict[str, str]:
    """A CSV metric a window has -> its key in the window: `_WINDOW_SCALARS` and the registry's window rows."""
    return {**_WINDOW_SCALARS, **{row.attribute or row.name: row.name for row in registry.window_rows()}}
_DIGITS = {"s": 4, "tok/s": 3, "req/s": 4, "requests": 3}
"""Decimals a rate or a duration is rounded to, by unit (a count is whole already; percentiles are not rounded)."""


def step_row(s: StepResult) -> dict[str, Any]:
    """The row of a live step (the whole step's)."""
    return summary_row(s.step.index, s.load, s.step.trial, s.summary)


def step_rows(index: int, step: LoadStep | None, trial: int | None, summary: StepSummary) -> list[dict[str, Any]]:
    """A step's rows: the whole step's (`summary_row`), then its windows' (`window_rows`)."""
    row = summary_row(index, step, trial, summary)
    return [row, *window_rows(row, summary)]


def run_rows(run: StoredRun) -> list[dict[str, Any]]:
    """The rows of a saved run: those of each step that finished with a summary."""
    return [row for s in run.steps if s.summary is not None
            for row in step_rows(s.index, s.load, s.trial, s.summary)]


def _window_row(head: dict[str, Any], name: str, window: dict[str, Any]) -> dict[str, Any]:
    start, end = window.get("start_s"), window.get("end_s")
    metric_columns, figures = registry.csv_columns(), _window_figures()
    row = {**head, **dict.fromkeys(column for column, _, _ in metric_columns), "window": name,
           "window_start_s": start, "window_end_s": end}
    for column, metric, stat in metric_columns:
        attribute = metric.attribute or metric.name
        if attribute == "duration_s":
            row[column] = (round(end - start, _DIGITS["s"])
                           if isinstance(start, (int, float)) and isinstance(end, (int, float)) else None)
        elif (key := figures.get(attribute)) is not None:
            value = window.get(key)
            row[column] = (value.get(stat) if isinstance(value, dict) else None) if stat else _cell(value, metric.unit)
    return {k: "" if v is None else v for k, v in row.items()}


def window_rows(step_row: dict[str, Any], summary: StepSummary) -> list[dict[str, Any]]:
    """The rows of a step's steady state (where found) and time slices, under its ``step_row``'s load."""
    head = {k: step_row[k] for k in ("step", "concurrency", "rate", "trial")}
    out = []
    if (state := summary.steady_state) and state.get("found"):
        out.append(_window_row(head, "steady", state))
    for k, sl in enumerate((summary.time_slices or {}).get("slices") or ()):
        if isinstance(sl, dict):
            out.append(_window_row(head, f"slice {sl.get('index', k)}", sl))
    for tenant in (summary.tenants or {}).get("tenants") or ():
        if isinstance(tenant, dict):
            out.append(_window_row(head, f"tenant {tenant.get('name')}", tenant))
    return out


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
        "window": "step", "window_start_s": "", "window_end_s": "",
    }
    for column, metric, stat in registry.csv_columns():
        value = getattr(summary, metric.attribute or metric.name)
        row[column] = value.stat(stat) if stat else _cell(value, metric.unit)
    return row


def _write(handle: Any, rows: Iterable[dict[str, Any]]) -> None:
    writer = csv.DictWriter(handle, fieldnames=columns())
    writer.writeheader()
    writer.writerows(rows)


def write_csv(result: BenchResult, path: Path) -> None:
    with atomic_open(path, newline="") as handle:
        _write(handle, run_rows(result.run))


def csv_text(run: StoredRun) -> str:
    """A saved run's CSV, as `write_csv` writes a live one."""
    out = io.StringIO(newline="")
    _write(out, run_rows(run))
    return out.getvalue()
