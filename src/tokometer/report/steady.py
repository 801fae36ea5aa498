"""The report's steady-state table: per step, its numbers over the window where its load was at its target
beside the whole step's (`tokometer.metrics.window.steady_state`, saved in each step's summary)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tokometer.report import tables

__all__ = ["STEADY_NOTE", "steady_columns", "steady_rows"]

STEADY_NOTE = ("Each step over the window where its load was at its target (within the run's --steady-tolerance): "
               "the first wave and the drain left out; in brackets, the whole step's number (the metric "
               "definitions page, \"Time slices and steady state\").")


def steady_columns() -> tuple[str, ...]:
    """The table's columns; each number column holds the steady state's value, then the whole step's in
    brackets (its latencies: `tokometer.report.tables.STEADY_REPORT`)."""
    return ("run", "step", "window s", "requests", "target", "achieved", "at target",
            *(c.title for c in tables.STEADY_REPORT), "output tok/s")


def _f(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _pair(steady: float | None, whole: float | None, digits: int = 1) -> str:
    return f"{_f(steady, digits)} ({_f(whole, digits)})"


def steady_rows(runs: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    """One row per step of ``runs`` (`tokometer.report.data.report_data`'s) that has a steady state."""
    rows = []
    for run in runs:
        for step in run["steps"]:
            summary = step.get("summary") or {}
            state = summary.get("steady_state")
            if not state:
                continue
            if not state.get("found"):
                rows.append([run["name"], step["label"], "not found: " + str(state.get("reason", "")),
                             *["-"] * (len(steady_columns()) - 3)])
                continue
            achieved = (f"c {_f(state['achieved_concurrency'], 2)}" if state["basis"] == "concurrency"
                        else f"{_f(state['send_rate_rps'], 2)}/s")
            total = summary.get("requests_completed", 0) + summary.get("requests_failed", 0)
            rows.append([run["name"], step["label"], f"{state['start_s']:.2f}-{state['end_s']:.2f}",
                         f"{state['requests']} of {total}", f"{state['target']:g}", achieved,
                         "yes" if state["at_target"] else "no",
                         *(_pair(c.read(state), c.read(summary), c.digits) for c in tables.STEADY_REPORT),
                         _pair(state["output_throughput_tok_s"], summary.get("output_throughput_tok_s"))])
    return rows
