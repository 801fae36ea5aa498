"""Which metrics each report table shows: lists of metric-registry rows, declared once.

A table that shows every row of a kind reads the registry itself (the CSV, the JSON, ``compare``). The tables
here deliberately show a subset, so each subset is one list of row names (`tokometer.metrics.registry`) with
the statistic a column shows: the console's step table (`STEP_TABLE`, a line per row), the sweep table of the
report (`REPORT_SWEEP`) and the console's narrower one (`CONSOLE_SWEEP`), and the time-slice table
(`SLICE_METRICS`), and the steady state beside the whole step (`STEADY_CONSOLE`, `STEADY_REPORT`). A column's
heading, unit and direction come from its row.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from tokometer.metrics import Distribution, StepSummary, registry

__all__ = ["CONSOLE_SWEEP", "REPORT_SWEEP", "SLICE_METRICS", "STEADY_CONSOLE", "STEADY_REPORT", "STEP_TABLE",
           "Column"]


@dataclass(frozen=True, slots=True)
class Column:
    """One column of a table: a registry row and, for a distribution, the statistic shown."""

    metric: str
    """The registry row's name: ``ttft_ms``."""
    stat: str = ""
    """A distribution's statistic (``p50``); empty for a value of the step as a whole."""
    digits: int = 1
    head: str = ""
    """The heading, where it is not the row's label, statistic and unit (``TTFT p50 ms``)."""

    @property
    def name(self) -> str:
        """The row's label and the statistic: ``TTFT p50``."""
        return " ".join(part for part in (registry.by_name(self.metric).label, self.stat) if part)

    @property
    def title(self) -> str:
        """The column's heading: ``TTFT p50 ms``."""
        if self.head:
            return self.head
        row = registry.by_name(self.metric)
        return " ".join(part for part in (row.label, self.stat, row.unit) if part)

    def of(self, summary: StepSummary) -> float | None:
        """The column's value in a step's summary."""
        row = registry.by_name(self.metric)
        value = getattr(summary, row.attribute or row.name)
        if isinstance(value, Distribution):
            return value.stat(self.stat) if self.stat else None
        return float(value) if isinstance(value, (int, float)) else None

    def read(self, block: Mapping[str, Any]) -> float | None:
        """The column's value in a summary's JSON, a time slice's or a steady state's."""
        value = block.get(self.metric)
        if self.stat:
            value = value.get(self.stat) if isinstance(value, Mapping) else None
        return float(value) if isinstance(value, (int, float)) else None


STEP_TABLE: Final[tuple[tuple[str, int], ...]] = (
    ("ttft_ms", 2), ("ttst_ms", 2), ("tpot_ms", 3), ("itl_ms", 3), ("e2e_ms", 2), ("decode_speed_tok_s", 1),
    ("prefill_speed_tok_s", 1), ("server_prefill_ms", 2), ("server_decode_tok_s", 1),
    ("output_tokens.per_request", 1), ("client_lag_ms", 3))
"""The console's step table: a line per row (its ``heading``), in this order, each with the digits it shows
(the console's own precision: finer than the report's tables for the millisecond latencies)."""

_SWEEP_HEAD: Final[tuple[Column, ...]] = (Column("ttft_ms", "p50"), Column("ttft_ms", "p99"))
_SWEEP_TAIL: Final[tuple[Column, ...]] = (
    Column("tpot_ms", "p50", 2), Column("decode_speed_tok_s", "p50", head="decode tok/s/req p50"),
    Column("output_throughput_tok_s", head="output tok/s total"),
    Column("request_throughput_rps", digits=2, head="req/s"), Column("e2e_ms", "p99"))

REPORT_SWEEP: Final[tuple[Column, ...]] = (*_SWEEP_HEAD, Column("ttst_ms", "p50"), *_SWEEP_TAIL)
"""The report's per-step table (markdown and HTML), between the load and its counts and the knee's power."""
CONSOLE_SWEEP: Final[tuple[Column, ...]] = (*_SWEEP_HEAD, *_SWEEP_TAIL,
                                            Column("client_lag_ms", "p99", 2, head="lag p99 ms"))
"""The console's sweep table: one line per step, narrow enough for a terminal (so without TTST: the step
table above it has TTST's percentiles)."""
SLICE_METRICS: Final[tuple[Column, ...]] = (Column("ttft_ms", "p50"), Column("ttft_ms", "p99"),
                                            Column("ttst_ms", "p50"), Column("tpot_ms", "p50", 2))
"""The time-slice table's metric columns (after the slice's load)."""
STEADY_CONSOLE: Final[tuple[Column, ...]] = (Column("ttft_ms", "p50"), Column("ttft_ms", "p99"),
                                             Column("ttst_ms", "p50"), Column("tpot_ms", "p50", 2))
"""The latencies of the console's steady-state line, each beside the whole step's."""
STEADY_REPORT: Final[tuple[Column, ...]] = (Column("ttft_ms", "p50"), Column("ttst_ms", "p50"),
                                            Column("tpot_ms", "p50", 2))
"""The latency columns of the report's steady-state table."""
