"""A tenant mix's per-tenant results as table rows (``bench --mix``, `tokometer.metrics.tenants`): the console's
table under each step, the markdown and HTML reports' table per step, and the CSV's rows.

One row per tenant: its requests and share of the step's, failures, TTFT p50/p99, TPOT p50, ITL p50, E2E
p50, output tokens a second, goodput and the share of its requests that met its SLO; then a row for the whole
mix (its goodput: each tenant against its own SLO).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from rich.table import Table

__all__ = ["TENANT_COLUMNS", "tenant_cells", "tenant_table", "tenant_tables"]

TENANT_COLUMNS: Final = ("tenant", "requests", "share", "failed", "TTFT p50 ms", "TTFT p99 ms", "TPOT p50 ms",
                         "ITL p50 ms", "E2E p50 ms", "output tok/s", "goodput req/s", "SLO met")

_LATENCIES: Final = (("ttft_ms", "p50", 1), ("ttft_ms", "p99", 1), ("tpot_ms", "p50", 2), ("itl_ms", "p50", 2),
                     ("e2e_ms", "p50", 1))


def _f(value: Any, digits: int = 1) -> str:
    return "-" if not isinstance(value, (int, float)) or isinstance(value, bool) else f"{value:,.{digits}f}"


def _percent(value: Any) -> str:
    return "-" if not isinstance(value, (int, float)) or isinstance(value, bool) else f"{100 * value:.1f}%"


def _slo_words(slo: Mapping[str, Any]) -> str:
    names = {"ttft_ms": "TTFT", "tpot_ms": "TPOT", "e2e_ms": "E2E"}
    return ", ".join(f"{names.get(k, k)} {v:g} ms" for k, v in slo.items() if isinstance(v, (int, float)))


def tenant_cells(block: Mapping[str, Any]) -> list[list[str]]:
    """One row of `TENANT_COLUMNS` per tenant of a step's ``tenants`` block, then the mix's row."""
    rows = []
    for t in block.get("tenants") or ():
        latencies = [_f((t.get(key) or {}).get(stat), digits) for key, stat, digits in _LATENCIES]
        slo = _slo_words(t.get("slo") or {})
        met = f"{_percent(t.get('slo_attainment'))} ({slo})" if slo else "-"
        rows.append([str(t.get("name")), str(t.get("requests")), _percent(t.get("share")), str(t.get("failed")),
                     *latencies, _f(t.get("output_throughput_tok_s")), _f(t.get("goodput_rps"), 2), met])
    total_out = sum(t.get("output_throughput_tok_s") or 0.0 for t in block.get("tenants") or ())
    rows.append(["all tenants", str(sum(t.get("requests") or 0 for t in block.get("tenants") or ())), "100.0%",
                 str(sum(t.get("failed") or 0 for t in block.get("tenants") or ())), *["" for _ in _LATENCIES],
                 _f(total_out), _f(block.get("goodput_rps"), 2), _percent(block.get("slo_attainment"))])
    return rows


def tenant_table(block: Mapping[str, Any] | None) -> Table | None:
    """The step's tenants, one row each, and the mix's (None without a mix)."""
    if not block or not block.get("tenants"):
        return None
    table = Table(title="  tenants (each against its own SLO)", title_justify="left", show_edge=False)
    for column in TENANT_COLUMNS:
        table.add_column(column, justify="left" if column == "tenant" else "right")
    for row in tenant_cells(block):
        table.add_row(*row)
    return table


def tenant_tables(runs: Sequence[Mapping[str, Any]]) -> list[tuple[str, list[list[str]]]]:
    """Per step of ``runs`` (`tokometer.report.data.report_data`'s) that has tenants: a heading (run, step)
    and its rows."""
    out = []
    for run in runs:
        for step in run["steps"]:
            block = (step.get("summary") or {}).get("tenants")
            if block and block.get("tenants"):
                out.append((f"{run['name']}, {step['label']}: tenants", tenant_cells(block)))
    return out
