"""A step's steady state and time slices on the console (`tokometer.metrics.window`).

`steady_lines`: the steady-state window and its numbers beside the whole step's (a target not held in yellow);
`slice_table`: one row per time slice (`tokometer.report.slices`), the target load beside the load achieved, so a
ramp shows as it rose.
"""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text

from tokometer.metrics import StepSummary, registry
from tokometer.report import tables
from tokometer.report.slices import slice_cells, slice_columns, slice_title

__all__ = ["slice_table", "steady_lines"]


def _f(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def steady_lines(s: StepSummary) -> list[Text]:
    """The steady state in two lines (the window, then its numbers against the whole step's); none without."""
    st = s.steady_state
    if not st:
        return []
    if not st.get("found"):
        return [Text(f"steady state: not found ({st.get('reason', '')})")]
    load = (f"achieved concurrency {_f(st['achieved_concurrency'], 2)}" if st["basis"] == "concurrency"
            else f"send rate {_f(st['send_rate_rps'], 2)}/s")
    window = Text.assemble(f"steady state: {st['start_s']:.2f}-{st['end_s']:.2f} s, {st['requests']} requests "
                           f"(of {s.requests_completed + s.requests_failed}); {load} against a target of "
                           f"{st['target']:g} (", "held" if st["at_target"] else ("not held", "yellow"),
                           f", tolerance {100 * st['tolerance']:g} %)")
    pairs = [*((c.name, c.read(st), c.of(s), registry.by_name(c.metric).unit, c.digits) for c in tables.STEADY_CONSOLE),
             ("output", st["output_throughput_tok_s"], s.output_throughput_tok_s, "tok/s", 1),
             ("req/s", st["request_throughput_rps"], s.request_throughput_rps, "", 2)]
    numbers = "; ".join(f"{name} {_f(steady, digits)} (step {_f(whole, digits)})" + (f" {unit}" if unit else "")
                        for name, steady, whole, unit, digits in pairs)
    return [window, Text(f"  steady state vs whole step: {numbers}")]


def slice_table(s: StepSummary) -> Table | None:
    """The step's time slices, one row each (None without ``--time-slice``)."""
    block: dict[str, Any] | None = s.time_slices
    if not block or not block.get("slices"):
        return None
    table = Table(title=f"  {slice_title(block)}", title_justify="left", show_edge=False)
    for column in slice_columns():
        table.add_column(column, justify="right")
    for row in slice_cells(block):
        table.add_row(*row)
    return table
