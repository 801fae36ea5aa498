"""The headline numbers and the per-step table of a report, as text: one source for the HTML page and the
markdown summary. Input: one run of `tokometer.report.data.report_data`'s ``runs``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["COLUMNS", "describe", "fmt", "headline", "step_rows"]

COLUMNS = ("load", "ok", "failed", "TTFT p50 ms", "TTFT p99 ms", "TPOT p50 ms", "decode tok/s/req p50",
           "output tok/s total", "req/s", "E2E p99 ms", "power")
"""The per-step table's columns (the bench sweep table's, and the knee's power)."""


def fmt(value: float | int | None, digits: int = 1) -> str:
    """A number for a table: thousands separated, ``-`` for none."""
    if value is None:
        return "-"
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:,.{digits}f}"


def _dist(summary: Mapping[str, Any], name: str, key: str) -> float | None:
    value = (summary.get(name) or {}).get(key)
    return float(value) if isinstance(value, (int, float)) else None


def step_rows(run: Mapping[str, Any]) -> list[list[str]]:
    """One row of `COLUMNS` per step; the knee's load is marked ``(knee)``."""
    rows = []
    for position, step in enumerate(run["steps"]):
        s = step["summary"] or {}
        label = step["label"] + (" (knee)" if position == run["knee"] else "")
        label += " (interrupted)" if step["interrupted"] else ""
        rows.append([label, fmt(s.get("requests_completed")), fmt(s.get("requests_failed")),
                     fmt(_dist(s, "ttft_ms", "p50")), fmt(_dist(s, "ttft_ms", "p99")),
                     fmt(_dist(s, "tpot_ms", "p50"), 2), fmt(_dist(s, "decode_speed_tok_s", "p50")),
                     fmt(s.get("output_throughput_tok_s")), fmt(s.get("request_throughput_rps"), 2),
                     fmt(_dist(s, "e2e_ms", "p99")), fmt(step["power"], 0)])
    return rows


def describe(run: Mapping[str, Any]) -> str:
    """What was measured: ``model M at URL (api); engine E VERSION``."""
    engine = run["engine"] or {}
    what = f"model {run['model']} at {run['target']} ({run['api']})"
    if engine.get("engine"):
        what += f"; engine {engine['engine']} {engine.get('engine_version') or ''}".rstrip()
    return what


def headline(run: Mapping[str, Any]) -> list[str]:
    """A few sentences: the knee, the fastest single request, the most throughput, failures, the client."""
    steps = run["steps"]
    done = [(step, step["summary"]) for step in steps if step["summary"]]
    if not done:
        return [f"{run['name']}: no step finished."]
    lines = []
    if run["knee"] is not None:
        step = steps[run["knee"]]
        s = step["summary"]
        lines.append(f"Knee (most throughput × per-request speed): {step['label']}, "
                     f"{fmt(s['output_throughput_tok_s'])} output tok/s in all at "
                     f"{fmt(_dist(s, 'decode_speed_tok_s', 'p50'))} tok/s per request, "
                     f"TTFT p50 {fmt(_dist(s, 'ttft_ms', 'p50'))} ms.")
    search = run.get("find_max")
    if search:
        lines.append(f"Find max: {search['answer']}.")
    fastest = max(done, key=lambda d: _dist(d[1], "decode_speed_tok_s", "p50") or 0.0)
    busiest = max(done, key=lambda d: d[1].get("output_throughput_tok_s") or 0.0)
    lines.append(f"Fastest per request: {fmt(_dist(fastest[1], 'decode_speed_tok_s', 'p50'))} tok/s "
                 f"(decode p50 at {fastest[0]['label']}); most in all: "
                 f"{fmt(busiest[1].get('output_throughput_tok_s'))} output tok/s (at {busiest[0]['label']}).")
    failed = sum(int(s.get("requests_failed") or 0) for _, s in done)
    completed = sum(int(s.get("requests_completed") or 0) for _, s in done)
    lines.append(f"Requests: {completed:,} completed, {failed:,} failed.")
    troubled = [step["label"] for step in steps if (step["health"] or {}).get("saturated")]
    lines.append(f"The client could not keep up at {', '.join(troubled)}: those steps measure the client."
                 if troubled else "The client kept up at every step.")
    noted = [(step["label"], step["health"]["note"]) for step in steps if (step["health"] or {}).get("note")]
    if noted:
        lines.append(f"Self-check notes at {', '.join(label for label, _ in noted)}; at {noted[0][0]}: "
                     f"{noted[0][1]}.")
    return lines
