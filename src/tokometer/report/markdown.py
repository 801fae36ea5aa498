"""``tokometer report --format md``: headline numbers and a table per run, for a pull-request comment.

Needs no plotting library: it prints `tokometer.report.headline`'s text of `report_data`'s runs, then each
step's steady state (`tokometer.report.steady`) and time slices (`tokometer.report.slices`) where the runs
have them, then the Pareto front."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tokometer.report.headline import columns, describe, headline, step_rows
from tokometer.report.pareto import PARETO_COLUMNS, pareto_lines, pareto_rows, pareto_title
from tokometer.report.slices import slice_columns, slice_tables
from tokometer.report.steady import STEADY_NOTE, steady_columns, steady_rows
from tokometer.report.tenants import TENANT_COLUMNS, tenant_tables

__all__ = ["render_markdown"]


def _escape(text: str) -> str:
    return text.replace("|", "\\|")


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    right = ["---"] + ["---:"] * (len(header) - 1)
    return ["| " + " | ".join(_escape(h) for h in header) + " |", "| " + " | ".join(right) + " |",
            *("| " + " | ".join(_escape(c) for c in row) + " |" for row in rows)]


def _run(run: Mapping[str, Any]) -> list[str]:
    lines = [f"### {run['name']}: {describe(run)}", "", f"{run['status']}, started {run['started_at']}.", ""]
    lines += [f"- {line}" for line in headline(run)]
    lines += ["", *_table(columns(), step_rows(run)), ""]
    return lines


def render_markdown(data: Mapping[str, Any]) -> str:
    """The whole summary, ending with a newline. Power = output tok/s × decode tok/s/req p50 (the knee's
    measure, `tokometer.metrics.knee`)."""
    lines = [f"## {data['title']}", ""]
    for run in data["runs"]:
        lines += _run(run)
    if steady := steady_rows(data["runs"]):
        lines += ["### Steady state", "", STEADY_NOTE, "", *_table(steady_columns(), steady), ""]
    for title, rows in slice_tables(data["runs"]):
        lines += [f"#### {title}", "", *_table(slice_columns(), rows), ""]
    for title, rows in tenant_tables(data["runs"]):
        lines += [f"#### {title}", "", *_table(TENANT_COLUMNS, rows), ""]
    if "pareto" in data:
        front = data["pareto"]
        lines += ["### Pareto front", "", f"{pareto_title(front)}.", "", *_table(PARETO_COLUMNS, pareto_rows(front)),
                  "", *(f"- {line}" for line in pareto_lines(front)), ""]
    lines.append(f"Power = output tok/s × decode tok/s per request (p50); the knee is the load with the most (its "
                 f"trials pooled; one load has none; a find-max probe that missed is never it). "
                 f"tokometer {data['tokometer_version']}.")
    return "\n".join(lines) + "\n"
