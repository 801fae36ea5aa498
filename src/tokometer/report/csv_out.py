"""CSV of a benchmark run: one row per load step, the headline numbers."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from tokometer.atomicfile import atomic_open
from tokometer.benchmark.run import BenchResult, StepResult

__all__ = ["CSV_COLUMNS", "step_row", "write_csv"]

CSV_COLUMNS = [
    "step", "concurrency", "rate", "requests_completed", "requests_failed", "duration_s",
    "output_throughput_tok_s", "request_throughput_rps", "achieved_concurrency",
    "ttft_ms_p50", "ttft_ms_p90", "ttft_ms_p99", "tpot_ms_p50", "tpot_ms_p99", "itl_ms_p50", "itl_ms_p99",
    "e2e_ms_p50", "e2e_ms_p99", "decode_speed_tok_s_p50", "decode_speed_tok_s_mean", "client_lag_ms_p99",
    "output_tokens_total", "output_tokens_source", "trial",
]


def step_row(s: StepResult) -> dict[str, Any]:
    summary = s.summary
    load = s.step.label()
    return {
        "step": s.index,
        "concurrency": load.get("concurrency", ""),
        "rate": load.get("rate", ""),
        "trial": s.trial if s.trial is not None else "",
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


def write_csv(result: BenchResult, path: Path) -> None:
    with atomic_open(path, newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        for step in result.steps:
            writer.writerow(step_row(step))
