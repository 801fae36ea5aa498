"""CSV of a benchmark run: one row per load step, the headline numbers.

A live run (``bench --csv``) and a saved one (``report --format csv``: from the store, or a ``bench --json``
file read back) give the same rows: both go through `summary_row`, over the step's typed `StepSummary`."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tokometer.atomicfile import atomic_open
from tokometer.benchmark.run import BenchResult, StepResult
from tokometer.load.profiles import LoadStep
from tokometer.metrics.summary import StepSummary
from tokometer.store.runs import StoredRun

__all__ = ["CSV_COLUMNS", "csv_text", "run_rows", "step_row", "summary_row", "write_csv"]

CSV_COLUMNS = [
    "step", "concurrency", "rate", "requests_completed", "requests_failed", "duration_s",
    "output_throughput_tok_s", "request_throughput_rps", "achieved_concurrency",
    "ttft_ms_p50", "ttft_ms_p90", "ttft_ms_p99", "tpot_ms_p50", "tpot_ms_p99", "itl_ms_p50", "itl_ms_p99",
    "e2e_ms_p50", "e2e_ms_p99", "decode_speed_tok_s_p50", "decode_speed_tok_s_mean", "client_lag_ms_p99",
    "output_tokens_total", "output_tokens_source", "trial",
]


def step_row(s: StepResult) -> dict[str, Any]:
    """The row of a live step."""
    return summary_row(s.index, s.step, s.trial, s.summary)


def run_rows(run: StoredRun) -> list[dict[str, Any]]:
    """The rows of a saved run: one per step that finished with a summary."""
    return [summary_row(s.index, s.load, s.trial, summary) for s in run.steps
            if (summary := s.step_summary) is not None]


def summary_row(index: int, step: LoadStep | None, trial: int | None, summary: StepSummary) -> dict[str, Any]:
    """One step's row, from its index, load, trial and summary."""
    load = step.label() if step is not None else {}
    return {
        "step": index,
        "concurrency": load.get("concurrency", ""),
        "rate": load.get("rate", ""),
        "trial": trial if trial is not None else "",
        "requests_completed": summary.requests_completed,
        "requests_failed": summary.requests_failed,
        "duration_s": round(summary.duration_s, 4),
        "output_throughput_tok_s": round(summary.output_throughput_tok_s, 3),
        "request_throughput_rps": round(summary.request_throughput_rps, 4),
        "achieved_concurrency": round(summary.achieved_concurrency, 3),
        "ttft_ms_p50": summary.ttft_ms.p50,
        "ttft_ms_p90": summary.ttft_ms.p90,
        "ttft_ms_p99": summary.ttft_ms.p99,
        "tpot_ms_p50": summary.tpot_ms.p50,
        "tpot_ms_p99": summary.tpot_ms.p99,
        "itl_ms_p50": summary.itl_ms.p50,
        "itl_ms_p99": summary.itl_ms.p99,
        "e2e_ms_p50": summary.e2e_ms.p50,
        "e2e_ms_p99": summary.e2e_ms.p99,
        "decode_speed_tok_s_p50": summary.decode_speed_tok_s.p50,
        "decode_speed_tok_s_mean": summary.decode_speed_tok_s.mean,
        "client_lag_ms_p99": summary.client_lag_ms.p99,
        "output_tokens_total": summary.output_tokens_total,
        "output_tokens_source": ";".join(f"{k}={v}" for k, v in sorted(summary.output_tokens_source.items())),
    }


def _write(handle: Any, rows: Iterable[dict[str, Any]]) -> None:
    writer = csv.DictWriter(handle, fieldnames=CSV_COLUMNS)
    writer.writeheader()
    writer.writerows(rows)


def write_csv(result: BenchResult, path: Path) -> None:
    with atomic_open(path, newline="") as handle:
        _write(handle, (step_row(step) for step in result.steps))


def csv_text(run: StoredRun) -> str:
    """A saved run's CSV, as `write_csv` writes a live one."""
    out = io.StringIO(newline="")
    _write(out, run_rows(run))
    return out.getvalue()
