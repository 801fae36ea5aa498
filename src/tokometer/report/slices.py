"""A step's time slices as table rows (`tokometer.metrics.window.time_slices`, ``bench --time-slice``): the
console's table under each step, and the markdown and HTML reports' table per step.

One row per slice: its start, the requests sent in it, the target load beside the load achieved (so a ramp
shows as it rose), then output throughput (tokens by arrival) and TTFT and TPOT of its requests.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tokometer.report import tables

__all__ = ["slice_cells", "slice_columns", "slice_tables", "slice_title"]



def slice_columns() -> tuple[str, ...]:
    """The slice table's columns: the slice's load, then its metrics (`tokometer.report.tables.SLICE_METRICS`)."""
    return ("from s", "requests", "target", "concurrency", "send/s", "output tok/s",
            *(c.title for c in tables.SLICE_METRICS))


def _f(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def slice_title(block: Mapping[str, Any]) -> str:
    """``time slices of 0.5 s (requests by send time)``, and the block's note (wider slices) if any."""
    note = f"; {block['note']}" if block.get("note") else ""
    return f"time slices of {block['slice_s']:g} s (requests by send time{note})"


def slice_cells(block: Mapping[str, Any]) -> list[list[str]]:
    """One row of `slice_columns` per slice of a step's ``time_slices`` block."""
    return [[_f(sl["start_s"], 2), str(sl["requests"]), _f(sl["target"], 2), _f(sl["achieved_concurrency"], 2),
             _f(sl["send_rate_rps"], 1), _f(sl["output_throughput_tok_s"]),
             *(_f(c.read(sl), c.digits) for c in tables.SLICE_METRICS)] for sl in block.get("slices") or ()]


def slice_tables(runs: Sequence[Mapping[str, Any]]) -> list[tuple[str, list[list[str]]]]:
    """Per step of ``runs`` (`tokometer.report.data.report_data`'s) that has time slices: a heading (run, step,
    slice width) and its rows."""
    out = []
    for run in runs:
        for step in run["steps"]:
            block = (step.get("summary") or {}).get("time_slices")
            if block and block.get("slices"):
                out.append((f"{run['name']}, {step['label']}: {slice_title(block)}", slice_cells(block)))
    return out
