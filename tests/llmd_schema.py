"""A checker of llm-d's Benchmark Report v0.2, written from the published schema's facts (no network, no copy).

Source: llm-d/llm-d-benchmark, ``llmdbenchmark/analysis/benchmark_report/br_v0_2_json_schema.json`` (title
"Benchmark Report v0.2"), at commit 8bc9f1ddd873a24f1657d6cca2e0d0fb6947dd36 (2026-08-21); the unit families
that its pydantic models (``schema_v0_2.py``, ``base.py``: ``UNITS_TIME``, ``UNITS_GEN_LATENCY``, ...) check
beyond the JSON schema are from the same commit. Each definition below lists the schema's required fields,
every property with the JSON types it allows (and its lower bound, where it has one), and whether other keys
are allowed (``additionalProperties``). Definitions tokometer never writes (``ComponentHealth``,
``ReplicaStatus``) are not modelled: a report holding them is refused by
this checker as "not modelled", so a test can never pass over them unchecked.

`problems(report)` returns every place where a report breaks the schema (empty: it conforms).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

__all__ = ["UNITS", "problems"]

UNITS = ("count", "percent", "fraction", "ms", "s", "MB", "GB", "TB", "MiB", "GiB", "TiB", "Mbit/s", "Gbit/s",
         "Tbit/s", "GiB/s", "MB/s", "GB/s", "TB/s", "ms/token", "s/token", "tokens/s", "queries/s", "Watts")
"""The ``Units`` enum."""
_ENUMS = {"Units": UNITS, "Distribution": ("fixed", "gaussian", "uniform", "other"),
          "LoadSource": ("random", "sampled", "unknown"), "HostType": ("replica", "prefill", "decode")}

_STATS = {"units": "enum:Units", "mean": "number", **{k: "number|null" for k in (
    "mode", "min", "p0p1", "p1", "p5", "p10", "p25", "p50", "p75", "p90", "p95", "p99", "p99p9", "max")},
          "stddev": "number>=0|null"}
_POINT = {"ts": "date-time", "value": "string|number|boolean|null", "mean": "number|null",
          **{k: v for k, v in _STATS.items() if k not in ("units", "mean")}}
_SERIES = "TimeSeriesData|null"

# name: (required, properties, other keys allowed)
DEFS: dict[str, tuple[tuple[str, ...], dict[str, str], bool]] = {
    "Report": (("run", "results"), {"version": "string", "run": "Run", "scenario": "Scenario|null",
                                    "results": "Results"}, False),
    "Run": (("uid",), {"uid": "string", "eid": "string|null", "cid": "string|null", "pid": "string|null",
                       "time": "RunTime|null", "user": "string|null", "description": "string|null",
                       "keywords": "[string]|null"}, False),
    "RunTime": ((), {"start": "date-time|null", "end": "date-time|null", "duration": "string|null"}, False),
    "Scenario": ((), {"stack": "[Component]|null", "load": "Load|null"}, False),
    "Component": (("metadata", "standardized", "native"), {"metadata": "ComponentMetadata",
                                                           "standardized": "Standardized",
                                                           "native": "ComponentNative"}, False),
    "ComponentMetadata": (("label", "cfg_id"), {"schema_version": "string", "label": "string", "cfg_id": "string",
                                                "description": "string|null"}, False),
    "ComponentNative": ((), {"args": "object|null", "envars": "object|null", "config": "any"}, False),
    "Generic": (("kind", "tool", "tool_version"), {"kind": "const:generic", "tool": "string",
                                                   "tool_version": "string"}, True),
    "InferenceEngine": (("kind", "tool", "tool_version", "role", "replicas", "model", "accelerator"), {
        "kind": "const:inference_engine", "tool": "string", "tool_version": "string", "role": "enum:HostType",
        "replicas": "integer>=1", "model": "InferenceEngineModel", "accelerator": "InferenceEngineAccelerator"},
        False),
    "InferenceEngineModel": (("name",), {"name": "string"}, False),
    "InferenceEngineAccelerator": (("model", "count", "parallelism"), {
        "model": "string", "count": "integer>=1", "parallelism": "InferenceEngineParallelism"}, False),
    "InferenceEngineParallelism": ((), {"tp": "integer>=0", "dp": "integer>=0", "dp_local": "integer>=0",
                                        "workers": "integer>=0", "ep": "integer>=1", "pp": "integer>=1"}, False),
    "Load": (("metadata", "standardized", "native"), {"metadata": "LoadMetadata", "standardized": "LoadStandardized",
                                                      "native": "LoadNative"}, False),
    "LoadMetadata": ((), {"schema_version": "string", "cfg_id": "string|null", "description": "string|null"}, False),
    "LoadNative": ((), {"args": "object|null", "envars": "object|null", "config": "any"}, False),
    "LoadStandardized": (("tool", "tool_version", "source", "input_seq_len"), {
        "tool": "string", "tool_version": "string", "parallelism": "integer>=1", "source": "enum:LoadSource",
        "stage": "integer>=0", "input_seq_len": "SequenceLength", "output_seq_len": "SequenceLength|null",
        "prefix": "LoadPrefix|null", "multi_turn": "MultiTurn|null", "rate_qps": "number>0|null",
        "concurrency": "number>=1|null"}, False),
    "SequenceLength": (("distribution", "value"), {"distribution": "enum:Distribution", "value": "number>=0",
                                                   "std_dev": "number>=0|null", "min": "integer>=0|null",
                                                   "max": "integer>=1|null"}, False),
    "LoadPrefix": (("prefix_len", "num_groups", "num_users_per_group", "num_prefixes"), {
        "prefix_len": "SequenceLength", "num_groups": "integer>=1", "num_users_per_group": "integer>=1",
        "num_prefixes": "integer>=1"}, False),
    "MultiTurn": ((), {"enabled": "boolean", "max_turns": "SequenceLength|null"}, False),
    "Results": ((), {"request_performance": "RequestPerformance|null", "observability": "Observability|null",
                     "profiling": "any", "component_health": "not-modelled"}, False),
    "RequestPerformance": ((), {"aggregate": "AggregateRequestPerformance|null",
                                "time_series": "TimeSeriesRequestPerformance|null"}, False),
    "AggregateRequestPerformance": ((), {"requests": "AggregateRequests|null", "latency": "AggregateLatency|null",
                                         "throughput": "AggregateThroughput|null"}, False),
    "AggregateRequests": (("total",), {"total": "integer>=0", "failures": "integer>=0|null",
                                       "incomplete": "integer>=0|null", "input_length": "Statistics|null",
                                       "output_length": "Statistics|null"}, False),
    "AggregateLatency": ((), {k: "Statistics|null" for k in (
        "time_to_first_token", "normalized_time_per_output_token", "time_per_output_token", "inter_token_latency",
        "request_latency")}, False),
    "AggregateThroughput": ((), {k: "Statistics|null" for k in (
        "input_token_rate", "output_token_rate", "total_token_rate", "request_rate")}, False),
    "Statistics": (("units", "mean"), _STATS, True),
    "TimeSeriesRequestPerformance": ((), {"latency": "TimeSeriesLatency|null",
                                          "throughput": "TimeSeriesThroughput|null"}, False),
    "TimeSeriesLatency": ((), {k: _SERIES for k in (
        "time_to_first_token", "normalized_time_per_output_token", "time_per_output_token", "inter_token_latency",
        "request_latency")}, False),
    "TimeSeriesThroughput": ((), {"units": "enum:Units", **{k: _SERIES for k in (
        "input_token_rate", "output_token_rate", "total_token_rate", "request_rate")}}, False),
    "TimeSeriesData": (("units", "series"), {"units": "enum:Units", "series": "[TimeSeriesPoint]"}, False),
    "TimeSeriesPoint": (("ts",), _POINT, False),
    "Observability": ((), {"components": "[ComponentObservability]|null", "drop_rate": "Statistics|null",
                           "pod_startup_times": "PodStartupTimes|null", "replica_status": "not-modelled"}, True),
    "ComponentObservability": (("component_label",), {
        "component_label": "string", "replica_id": "string|null", "aggregate": "ResourceMetrics|null",
        "time_series": "TimeSeriesResourceMetrics|null", "raw_data_path": "string|null",
        "graph_path": "string|null"}, False),
    "ResourceMetrics": ((), {k: "Statistics|null" for k in (
        "kv_cache_usage", "cache_hit_rate", "gpu_cache_usage", "cpu_cache_usage", "gpu_memory_usage",
        "cpu_memory_usage", "storage_usage", "gpu_utilization", "cpu_utilization", "power_consumption",
        "running_requests", "waiting_requests", "swapped_requests", "preemptions")}, False),
    "TimeSeriesResourceMetrics": ((), {k: _SERIES for k in (
        "kv_cache_usage", "gpu_cache_usage", "cpu_cache_usage", "gpu_memory_usage", "cpu_memory_usage",
        "storage_usage", "gpu_utilization", "cpu_utilization", "power_consumption")}, False),
    "PodStartupTimes": ((), {"collected_at": "date-time|null", "pods": "[PodStartupInfo]|null",
                             "aggregate": "Statistics|null", "graph_path": "string|null"}, False),
    "PodStartupInfo": (("name",), {"name": "string", "model": "string|null", "role": "string|null",
                                   "node": "string|null", "creation_timestamp": "date-time|null",
                                   "ready_timestamp": "date-time|null", "startup_seconds": "number>=0|null"}, False),
}

_TIME, _GEN = ("ms", "s"), ("ms/token", "s/token")
UNIT_FAMILIES: dict[str, dict[str, tuple[str, ...]]] = {
    "AggregateRequests": {"input_length": ("count",), "output_length": ("count",)},
    "AggregateLatency": {"time_to_first_token": _TIME, "request_latency": _TIME, "time_per_output_token": _GEN,
                         "inter_token_latency": _GEN, "normalized_time_per_output_token": _GEN},
    "AggregateThroughput": {"input_token_rate": ("tokens/s",), "output_token_rate": ("tokens/s",),
                            "total_token_rate": ("tokens/s",), "request_rate": ("queries/s",)},
}
"""The units each metric may be given in (the pydantic models' ``check_units``); the time series alike."""
UNIT_FAMILIES["TimeSeriesLatency"] = UNIT_FAMILIES["AggregateLatency"]
UNIT_FAMILIES["TimeSeriesThroughput"] = UNIT_FAMILIES["AggregateThroughput"]


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value


def _bound_ok(value: float, bound: str) -> bool:
    if bound.startswith(">="):
        return value >= float(bound[2:])
    return value > float(bound[1:]) if bound.startswith(">") else True


def _date_time(value: Any) -> bool:
    if not isinstance(value, str) or "T" not in value:
        return False
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).tzinfo is not None
    except ValueError:
        return False


def _one(value: Any, kind: str, where: str, out: list[str]) -> bool:
    """Whether ``value`` is of ``kind`` (one alternative); a def's own problems are added to ``out``."""
    base, _, bound = kind.partition(">")
    bound = ">" + bound if bound else ""
    simple = {"string": lambda v: isinstance(v, str), "boolean": lambda v: isinstance(v, bool),
              "null": lambda v: v is None, "any": lambda v: True, "object": lambda v: isinstance(v, dict),
              "date-time": _date_time, "number": _is_number,
              "integer": lambda v: isinstance(v, int) and not isinstance(v, bool)}
    if base in simple:
        return bool(simple[base](value)) and (not bound or _bound_ok(float(value), bound))
    if base.startswith("enum:"):
        return value in _ENUMS[base[5:]]
    if base.startswith("const:"):
        return bool(value == base[6:])
    if base.startswith("["):
        if not isinstance(value, list):
            return False
        for i, item in enumerate(value):
            if not _one(item, base[1:-1], f"{where}[{i}]", out):
                out.append(f"{where}[{i}]: not a {base[1:-1]}")
        return True
    if base == "Standardized":
        kinds = {"generic": "Generic", "inference_engine": "InferenceEngine"}  # the discriminator's mapping
        kind_of = value.get("kind") if isinstance(value, dict) else None
        if kind_of not in kinds:
            out.append(f"{where}.kind: {kind_of!r} is neither generic nor inference_engine")
            return True
        base = kinds[str(kind_of)]
    if base == "not-modelled":
        out.append(f"{where}: not modelled by this checker")
        return True
    if not isinstance(value, dict):
        return False
    _check(value, base, where, out)
    return True


def _check(value: dict[str, Any], name: str, where: str, out: list[str]) -> None:
    required, properties, others = DEFS[name]
    out.extend(f"{where}.{key}: required" for key in required if key not in value)
    for key, item in value.items():
        spec = properties.get(key)
        if spec is None:
            if not others:
                out.append(f"{where}.{key}: not a field of {name}")
            continue
        if not any(_one(item, alternative, f"{where}.{key}", out) for alternative in spec.split("|")):
            out.append(f"{where}.{key}: {item!r:.60} is not {spec}")
        allowed = UNIT_FAMILIES.get(name, {}).get(key)
        if allowed and isinstance(item, dict) and item.get("units") not in allowed:
            out.append(f"{where}.{key}.units: {item.get('units')!r} is not one of {allowed}")


def problems(report: Any) -> list[str]:
    """Every way ``report`` breaks llm-d's Benchmark Report v0.2 schema (see the module docstring)."""
    if not isinstance(report, dict):
        return ["the report is not an object"]
    out: list[str] = []
    _check(report, "Report", "report", out)
    if report.get("version") != "0.2":
        out.append(f"report.version: {report.get('version')!r}, not '0.2'")
    return out
