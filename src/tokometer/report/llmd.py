"""A saved run as llm-d's Benchmark Report, schema version 0.1 (``report RUN --format llmd``).

llm-d-benchmark's report (``workload/report`` in llm-d/llm-d-benchmark: ``version``, ``scenario``,
``metrics``) describes one load point, so a run becomes one report per step: a single step is one report
(a JSON object), several are a JSON list of them in step order. Every number is tokometer's own
(`tokometer.metrics`), mapped onto the schema's names: ``time_to_first_token`` is TTFT in ms,
``time_per_output_token`` TPOT in ms/token, ``inter_token_latency`` tokometer's token-normalised ITL in
ms/token, ``request_latency`` E2E in ms. ``normalized_time_per_output_token`` (optional in the schema) is left
out: the saved summary keeps no per-request E2E-over-tokens sample to take its statistics from. The
schema's ``scenario.load.name`` lists the harnesses llm-d runs; a run tokometer measured is written as
``tokometer``, an imported one under the harness's own name where the schema lists it.
"""

from __future__ import annotations

from typing import Any, Final

from tokometer.metrics.distribution import Distribution
from tokometer.metrics.summary import StepSummary
from tokometer.store.runs import StoredRun, StoredStep

__all__ = ["HARNESS", "LLMD_REPORT_VERSION", "PERCENTILES", "llmd_reports", "statistics_block"]

LLMD_REPORT_VERSION: Final = "0.1"
HARNESS: Final = {"vllm-bench-serve": "vllm-benchmark", "guidellm": "guidellm"}
"""An imported run's tool -> the harness name llm-d's schema gives that tool."""
PERCENTILES: Final = (("p50", "p50"), ("p90", "p90"), ("p95", "p95"), ("p99", "p99"), ("p99p9", "p99_9"))
"""llm-d's ``Statistics`` percentile key -> `Distribution`'s attribute (both versions of the schema)."""


def statistics_block(d: Distribution, units: str) -> dict[str, Any] | None:
    """A ``Statistics`` block (units, mean, stddev, min, percentiles, max); None for an empty sample."""
    if not d.count or d.mean is None:
        return None
    out: dict[str, Any] = {"units": units, "mean": d.mean}
    if d.std is not None:
        out["stddev"] = d.std
    if d.min is not None:
        out["min"] = d.min
    out.update({theirs: getattr(d, ours) for theirs, ours in PERCENTILES if getattr(d, ours) is not None})
    if d.max is not None:
        out["max"] = d.max
    return out



def _load_args(step: StoredStep) -> dict[str, Any]:
    return step.load.label() if step.load is not None else {}


def _report(run: StoredRun, step: StoredStep, summary: StepSummary) -> dict[str, Any]:
    imported = run.spec.imported
    harness = HARNESS.get(str(imported.get("tool")), str(imported.get("tool") or "tokometer"))
    latency: dict[str, Any] = {"time_to_first_token": (statistics_block(summary.ttft_ms, "ms")
                                                       or {"units": "ms", "mean": 0.0})}
    for name, dist, units in (("time_per_output_token", summary.tpot_ms, "ms/token"),
                              ("inter_token_latency", summary.itl_ms, "ms/token"),
                              ("request_latency", summary.e2e_ms, "ms")):
        if (block := statistics_block(dist, units)) is not None:
            latency[name] = block
    requests: dict[str, Any] = {
        "total": summary.requests_completed + summary.requests_failed,
        "failures": summary.requests_failed,
        "input_length": statistics_block(summary.input_tokens, "count") or {"units": "count", "mean": 0.0},
        "output_length": statistics_block(summary.output_tokens, "count") or {"units": "count", "mean": 0.0},
    }
    engine: dict[str, Any] = {"name": (run.engine.engine if run.engine and run.engine.engine else "unknown")}
    if run.engine is not None and run.engine.facts.get("version"):
        engine["version"] = str(run.engine.facts["version"])
    metadata: dict[str, Any] = {"tokometer_run": run.id, "target": run.target, "api": run.api,
                                "step": step.index, "definitions": "tokometer (docs/reference/metrics.md)"}
    if imported:
        metadata["imported_from"] = {k: imported.get(k) for k in ("tool", "tool_version", "not_recomputed")}
    return {
        "version": LLMD_REPORT_VERSION,
        "scenario": {
            "description": run.label or f"tokometer run {run.id}, step {step.index}",
            "platform": {"engine": [engine]},
            "model": {"name": run.model or "unknown"},
            "load": {"name": harness, "args": _load_args(step)},
            "metadata": metadata,
        },
        "metrics": {
            "time": {"duration": summary.duration_s},
            "requests": requests,
            "latency": latency,
            "throughput": {
                "input_tokens_per_sec": summary.input_throughput_tok_s,
                "output_tokens_per_sec": summary.output_throughput_tok_s,
                "total_tokens_per_sec": summary.total_throughput_tok_s,
                "requests_per_sec": summary.request_throughput_rps,
            },
        },
    }


def llmd_reports(run: StoredRun) -> dict[str, Any] | list[dict[str, Any]]:
    """The run's finished steps as llm-d Benchmark Reports (one object for one step, else a list)."""
    reports = [_report(run, step, summary) for step in run.steps if (summary := step.summary) is not None]
    return reports[0] if len(reports) == 1 else reports
