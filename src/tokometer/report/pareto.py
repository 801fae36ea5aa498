"""The Pareto front of a report as text: a table row per point and the sentences under it, for the markdown
summary and the HTML page alike (`tokometer.report.data`'s ``pareto`` block; nothing recomputed)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tokometer.report.headline import fmt

__all__ = ["PARETO_COLUMNS", "pareto_lines", "pareto_rows", "pareto_title"]

PARETO_COLUMNS = ("#", "run", "load", "output tok/s", "decode tok/s/req p50", "standing")


def _name(points: list[Mapping[str, Any]], at: int) -> str:
    p = points[at]
    return f"#{at + 1} ({p['run_name']} {p['load']})"


def pareto_title(pareto: Mapping[str, Any]) -> str:
    """What the points are: ``per-request decode speed p50 against output tok/s per GPU``."""
    per = " per GPU" if pareto["basis"] == "per GPU" else ", all requests"
    return f"Per-request decode speed p50 against output tok/s{per}, every load of every run (trials pooled)"


def pareto_rows(pareto: Mapping[str, Any]) -> list[list[str]]:
    """One row per point, in run and load order: its number, run, load (``★ knee`` marked, and a find-max
    probe that missed ``✕ missed``, as the chart marks them), throughput on the front's basis, speed, and
    ``on the front`` or ``dominated by #k (run N c=8)``."""
    points = pareto["points"]
    rows = []
    for i, p in enumerate(points):
        standing = "on the front" if p["on_front"] else f"dominated by {_name(points, p['dominated_by'])}"
        mark = " ★ knee" if p["knee"] else " ✕ missed" if p.get("missed") else ""
        rows.append([f"#{i + 1}", p["run_name"], p["load"] + mark,
                     fmt(p["throughput_tok_s"]), fmt(p["decode_speed_p50"]), standing])
    return rows


def pareto_lines(pareto: Mapping[str, Any]) -> list[str]:
    """The sentences under the table: the front left to right, each knee on it or not, how GPUs are known."""
    points = pareto["points"]
    if not points:
        return ["No load of these runs has both a throughput and a decode speed: no front."]
    lines = ["The front, left to right (more throughput, less speed per request): "
             + ", ".join(_name(points, i) for i in pareto["front"]) + "."]
    for i, p in enumerate(points):
        if p["knee"]:
            where = ("on the front" if p["on_front"]
                     else f"not on the front: dominated by {_name(points, p['dominated_by'])}")
            lines.append(f"The knee of {p['run_name']} ({p['load']}, #{i + 1}) is {where}.")
    lines.append(pareto["note"])
    return lines
