"""A saved run as llm-d's Benchmark Report, schema version 0.2 (``report RUN --format llmd``; v0.1 is
``--format llmd-0.1``, `tokometer.report.llmd`).

The schema is llm-d-benchmark's ``br_v0_2_json_schema.json`` (``llmdbenchmark/analysis/benchmark_report`` in
llm-d/llm-d-benchmark): a report has ``version``, ``run`` (``uid`` required), ``scenario`` (``stack``,
``load``) and ``results`` (``request_performance``, ``observability``). As in v0.1 a report is one load
point, so a run becomes one report per step (one object, or a JSON list in step order), and every number is
tokometer's own (`tokometer.metrics`) under the schema's names: TTFT and E2E in ms, TPOT and ITL in ms/token,
rates in tokens/s and queries/s.

What tokometer has that v0.2 holds:

- **the request time series**: the step's slices (``bench --time-slice``), each a point stamped at its start
  (``results.request_performance.time_series``: TTFT, TPOT, ITL and E2E statistics, output token and request
  rates);
- **the server**: what it reported during the step (`tokometer.observe`'s window: running and waiting
  requests, KV-cache use, prefix-cache hit rate; GPU use and power where read) as the engine component's
  ``aggregate``, and the KV-cache use of every step of the run as its ``time_series`` (one point per step,
  stamped at the step's start: tokometer keeps a window per step, not each scrape);
- **sessions**: ``scenario.load.standardized.multi_turn`` (turns per session), and the sessions' own figures
  (sessions, turns, duration, TTFT by turn) under ``results.observability.sessions`` (the schema leaves
  observability open to more keys);
- **start-up**: the engine's time from process start to first answer (`tokometer.engines.startup`) as
  ``results.observability.pod_startup_times``: one "pod" per start (``engine-0`` cold, ``engine-0-warm``).

The stack's engine is a ``generic`` component (the schema's ``inference_engine`` requires an accelerator and its
parallelism, which a CPU engine has not); its model, start-up and the facts tokometer knows are its extra keys.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from tokometer import __version__
from tokometer.engines.startup import EngineStartup, startup_of
from tokometer.metrics.distribution import Distribution
from tokometer.metrics.summary import StepSummary
from tokometer.report.llmd import HARNESS, statistics_block
from tokometer.store.runs import StoredRun, StoredStep

__all__ = ["LLMD_V02_VERSION", "llmd_v02_reports"]

LLMD_V02_VERSION: Final = "0.2"
ENGINE_LABEL: Final = "engine-0"
"""The stack component that stands for the engine tokometer measured."""
_LATENCIES: Final = (("time_to_first_token", "ttft_ms", "ms"), ("time_per_output_token", "tpot_ms", "ms/token"),
                     ("inter_token_latency", "itl_ms", "ms/token"), ("request_latency", "e2e_ms", "ms"))
"""llm-d's latency name, the summary's distribution, its units."""
_GAUGES: Final = (("running_requests", "requests_running", "count"), ("waiting_requests", "requests_waiting", "count"),
                  ("kv_cache_usage", "kv_cache_usage", "fraction"))
"""llm-d's resource metric, the server window's gauge (`tokometer.observe.vocabulary`), its units."""


def _iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def _when(text: str | None) -> datetime | None:
    """A stored ISO time (UTC where it names no zone)."""
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _run_block(run: StoredRun, step: StoredStep, summary: StepSummary) -> dict[str, Any]:
    started = _when(step.started_at)
    time: dict[str, Any] = {"duration": f"PT{summary.duration_s:.6f}S"}
    if started is not None:
        time["start"] = _iso(started)
        time["end"] = _iso(started + timedelta(seconds=summary.duration_s))
    return {"uid": f"tokometer-run-{run.id}-step-{step.index}", "eid": f"tokometer-run-{run.id}", "time": time,
            "description": run.label or f"tokometer run {run.id}, step {step.index}",
            "keywords": ["tokometer", run.api]}


def _cfg_id(value: Any) -> str:
    """A configuration ID: the hash of the configuration, as the schema asks."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:32]


def _engine_component(run: StoredRun) -> dict[str, Any]:
    facts = dict(run.engine.facts) if run.engine is not None else {}
    standardized: dict[str, Any] = {"kind": "generic", "tool": str(facts.get("engine") or "unknown"),
                                    "tool_version": str(facts.get("engine_version") or facts.get("version")
                                                        or "unknown"),
                                    "model": {"name": run.model or "unknown"}}
    if (startup := startup_of(facts)) is not None:
        standardized["startup"] = startup.to_json()
    argv = list(run.engine.argv) if run.engine is not None else []
    native: dict[str, Any] = {"args": {"argv": argv}} if argv else {}
    return {"metadata": {"label": ENGINE_LABEL, "cfg_id": _cfg_id(argv or facts),
                         "description": f"the engine at {run.target}"},
            "standardized": standardized, "native": native}


def _length(d: Distribution) -> dict[str, Any] | None:
    """A ``SequenceLength``: the mean, spread and bounds of what was sent (tokometer draws the lengths)."""
    if not d.count or d.mean is None or d.mean < 1:
        return None
    fixed = d.min is not None and d.min == d.max
    out: dict[str, Any] = {"distribution": "fixed" if fixed else "other", "value": d.mean}
    if not fixed and d.std is not None:
        out["std_dev"] = d.std
    if d.min is not None and d.max is not None and d.max >= 1:
        out.update(min=int(d.min), max=int(d.max))
    return out


def _load(run: StoredRun, step: StoredStep, summary: StepSummary) -> dict[str, Any]:
    imported = run.spec.imported
    label = step.load.label() if step.load is not None else dict(step.saved_load or {})
    standardized: dict[str, Any] = {
        "tool": HARNESS.get(str(imported.get("tool")), str(imported.get("tool") or "tokometer")),
        "tool_version": str(imported.get("tool_version") or __version__),
        "source": "random" if (run.prompt_source or "").startswith("synthetic") else "unknown",
        "stage": step.index,
        "input_seq_len": _length(summary.input_tokens) or {"distribution": "other", "value": 1},
    }
    if (output := _length(summary.output_tokens)) is not None:
        standardized["output_seq_len"] = output
    if (turns := _turns(summary)) is not None:
        standardized["multi_turn"] = {"enabled": True, "max_turns": turns}
    if isinstance(label.get("rate"), (int, float)) and label["rate"] > 0:
        standardized["rate_qps"] = float(label["rate"])
    if isinstance(label.get("concurrency"), int) and label["concurrency"] >= 1:
        standardized["concurrency"] = label["concurrency"]
    return {"metadata": {"cfg_id": _cfg_id(label), "description": run.prompt_source or "tokometer workload"},
            "standardized": standardized,
            "native": {"args": label, "config": {"definitions": "tokometer (docs/reference/metrics.md)",
                                                 "tokometer_run": run.id, "target": run.target, "api": run.api}}}


def _turns(summary: StepSummary) -> dict[str, Any] | None:
    stats = summary.session_stats or {}
    turns = stats.get("turns") if isinstance(stats.get("turns"), dict) else None
    if not turns:
        return None
    return _length(Distribution.from_json(turns))


def _aggregate(summary: StepSummary) -> dict[str, Any]:
    latency = {name: block for name, attr, units in _LATENCIES
               if (block := statistics_block(getattr(summary, attr), units)) is not None}
    requests: dict[str, Any] = {"total": summary.requests_completed + summary.requests_failed,
                                "failures": summary.requests_failed}
    for name, dist in (("input_length", summary.input_tokens), ("output_length", summary.output_tokens)):
        if (block := statistics_block(dist, "count")) is not None:
            requests[name] = block
    throughput = {name: {"units": units, "mean": value} for name, value, units in (
        ("input_token_rate", summary.input_throughput_tok_s, "tokens/s"),
        ("output_token_rate", summary.output_throughput_tok_s, "tokens/s"),
        ("total_token_rate", summary.total_throughput_tok_s, "tokens/s"),
        ("request_rate", summary.request_throughput_rps, "queries/s"))}
    return {"requests": requests, "latency": latency, "throughput": throughput}


def _series_point(at: datetime, block: dict[str, Any] | None) -> dict[str, Any] | None:
    """A ``TimeSeriesPoint`` from a slice's distribution (statistics under the schema's names)."""
    if not isinstance(block, dict):
        return None
    stats = statistics_block(Distribution.from_json(block), "ms")
    if stats is None:
        return None
    stats.pop("units")
    return {"ts": _iso(at), **stats}


def _time_series(step: StoredStep, summary: StepSummary) -> dict[str, Any] | None:
    """The step's slices (``--time-slice``) as llm-d's request time series; None without slices."""
    started = _when(step.started_at)
    slices = (summary.time_slices or {}).get("slices") or []
    if started is None or not slices:
        return None
    latency: dict[str, Any] = {}
    for name, attr, units in _LATENCIES:
        points = [p for sl in slices if (p := _series_point(started + timedelta(seconds=float(sl.get("start_s") or 0)),
                                                            sl.get(attr))) is not None]
        if points:
            latency[name] = {"units": units, "series": points}
    throughput: dict[str, Any] = {}
    for name, key, units in (("output_token_rate", "output_throughput_tok_s", "tokens/s"),
                             ("request_rate", "request_throughput_rps", "queries/s")):
        points = [{"ts": _iso(started + timedelta(seconds=float(sl.get("start_s") or 0))), "value": float(sl[key])}
                  for sl in slices if isinstance(sl.get(key), (int, float))]
        if points:
            throughput[name] = {"units": units, "series": points}
    return {"latency": latency, "throughput": throughput}


def _mean_max(gauge: dict[str, Any], units: str | None) -> dict[str, Any]:
    """A gauge's mean and max over a window as statistics (``units`` first where given)."""
    out: dict[str, Any] = {"units": units} if units is not None else {}
    out["mean"] = float(gauge["mean"])
    if isinstance(gauge.get("max"), (int, float)):
        out["max"] = float(gauge["max"])
    return out


def _resources(server: Any, gpu: tuple[Any, ...], summary: StepSummary) -> dict[str, Any]:
    """The server window's gauges (and the GPUs') as llm-d's ``ResourceMetrics``: mean and max over the step."""
    gauges = server.get("gauges") or {} if isinstance(server, dict) else {}
    out: dict[str, Any] = {}
    for name, gauge, units in _GAUGES:
        value = gauges.get(gauge)
        if isinstance(value, dict) and isinstance(value.get("mean"), (int, float)):
            out[name] = _mean_max(value, units)
    hit_rate = server.get("prefix_cache_hit_rate") if isinstance(server, dict) else None
    if hit_rate is None:
        hit_rate = summary.prompt_cache_hit_rate
    if isinstance(hit_rate, (int, float)):
        out["cache_hit_rate"] = {"units": "fraction", "mean": float(hit_rate)}
    out.update(_gpu_resources(gpu))
    return out


def _gpu_resources(gpu: tuple[Any, ...]) -> dict[str, Any]:
    """The first GPU's utilisation and power over the step (`tokometer.observe.gpu_window`), where read."""
    first = gpu[0] if gpu and isinstance(gpu[0], dict) else {}
    out: dict[str, Any] = {}
    for name, key, units in (("gpu_utilization", "utilization", "percent"), ("power_consumption", "power", "Watts")):
        suffix = "_w" if key == "power" else ""
        mean, most = first.get(f"{key}_mean{suffix}"), first.get(f"{key}_max{suffix}")
        if isinstance(mean, (int, float)):
            out[name] = {"units": units, "mean": float(mean), **({"max": most} if most is not None else {})}
    return out


def _kv_series(run: StoredRun) -> dict[str, Any] | None:
    """KV-cache use over the run: one point per step (its start; the step's mean and max)."""
    points = []
    for step in run.steps:
        gauge = ((step.server or {}).get("gauges") or {}).get("kv_cache_usage")
        started = _when(step.started_at)
        if started is not None and isinstance(gauge, dict) and isinstance(gauge.get("mean"), (int, float)):
            points.append({"ts": _iso(started), **_mean_max(gauge, None)})
    return {"kv_cache_usage": {"units": "fraction", "series": points}} if points else None


def _startup_pods(startup: EngineStartup, model: str) -> dict[str, Any]:
    pods = [{"name": ENGINE_LABEL, "model": model, "role": "cold start", "startup_seconds": startup.cold_s}]
    if startup.warm_s is not None:
        pods.append({"name": f"{ENGINE_LABEL}-warm", "model": model, "role": "warm start",
                     "startup_seconds": startup.warm_s})
    return {"pods": pods,
            "aggregate": statistics_block(Distribution.of([startup.cold_s, *(
                [startup.warm_s] if startup.warm_s is not None else [])]), "s")}


def _observability(run: StoredRun, step: StoredStep, summary: StepSummary) -> dict[str, Any] | None:
    component: dict[str, Any] = {"component_label": ENGINE_LABEL}
    if resources := _resources(step.server, step.gpu, summary):
        component["aggregate"] = resources
    if (series := _kv_series(run)) is not None:
        component["time_series"] = series
    out: dict[str, Any] = {}
    if len(component) > 1:
        out["components"] = [component]
    if (startup := startup_of(run.engine.facts if run.engine is not None else None)) is not None:
        out["pod_startup_times"] = _startup_pods(startup, run.model or "unknown")
    if summary.session_stats:
        out["sessions"] = {"summary": summary.session_stats, "per_turn": summary.per_turn or []}
    return out or None


def _report(run: StoredRun, step: StoredStep, summary: StepSummary) -> dict[str, Any]:
    performance: dict[str, Any] = {"aggregate": _aggregate(summary)}
    if (series := _time_series(step, summary)) is not None:
        performance["time_series"] = series
    results: dict[str, Any] = {"request_performance": performance}
    if (observability := _observability(run, step, summary)) is not None:
        results["observability"] = observability
    return {"version": LLMD_V02_VERSION, "run": _run_block(run, step, summary),
            "scenario": {"stack": [_engine_component(run)], "load": _load(run, step, summary)},
            "results": results}


def llmd_v02_reports(run: StoredRun) -> dict[str, Any] | list[dict[str, Any]]:
    """The run's finished steps as llm-d Benchmark Reports v0.2 (one object for one step, else a list)."""
    reports = [_report(run, step, summary) for step in run.steps if (summary := step.summary) is not None]
    return reports[0] if len(reports) == 1 else reports
