"""Read llm-d's Benchmark Report (schema v0.1 or v0.2; one report, or a JSON list of them) as a run.

A report describes one load point, so each becomes a step, in file order (``report --format llmd`` writes a
run's steps the same way). Unlike the other tools' files it holds statistics, not requests: nothing can be
recomputed, so each step's summary is the report's own numbers under tokometer's names (`StepSummary`: TTFT
and E2E in ms, TPOT and ITL in ms/token, whatever units the report gave them in), and ``not_recomputed`` says
so. A distribution's sample size is not in the schema: it is taken as the requests that completed.

What is read, by version (field names as llm-d-benchmark's ``br_v0_1_json_schema.json`` and
``br_v0_2_json_schema.json`` give them):

- v0.1: ``scenario.model.name``, ``scenario.load.name`` and ``args``, ``metrics.time.duration``,
  ``metrics.requests`` (total, failures, input/output length), ``metrics.latency``, ``metrics.throughput``;
- v0.2: ``run.time.start``, ``scenario.stack`` (the first component's tool and model),
  ``scenario.load.standardized`` (tool, version, concurrency or rate), ``results.request_performance.aggregate``,
  the first component's server ``aggregate`` (running and waiting requests, KV-cache use, prefix-cache hit
  rate), ``pod_startup_times`` (the engine's start-up: the slowest pod is the cold start, a pod whose role is
  ``warm start`` the warm one, as tokometer writes them) and the ``sessions`` tokometer writes beside them.

Every value is read through `tokometer.imports.source`'s checked readers (the file through its bounded
stream): a value of the wrong type or out of range is one line naming the report and the field.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from tokometer.imports.source import (
    MAX_DURATION_NS,
    MAX_RATE_PER_S,
    UNIT_NS,
    ImportedRun,
    ImportedStep,
    ImportFormatError,
    as_float,
    as_int,
    as_list,
    as_map,
    as_text,
    wall_clock,
)
from tokometer.store.load import MAX_STEPS_READ
from tokometer.util.shown import quoted

__all__ = ["CHECKED_VERSIONS", "TOOL", "looks_like", "read"]

TOOL: Final = "llm-d-report"
CHECKED_VERSIONS: Final = ("0.1", "0.2")
"""The schema versions this reader knows (a report's ``version``)."""
_MOST_MS: Final = MAX_DURATION_NS / UNIT_NS["ms"]
_TO_MS: Final = {"ms": 1.0, "s": 1000.0, "ms/token": 1.0, "s/token": 1000.0}
"""A latency's units -> its factor to tokometer's ms (or ms/token)."""
_LATENCIES: Final = (("time_to_first_token", "ttft_ms", ("ms", "s")),
                     ("time_per_output_token", "tpot_ms", ("ms/token", "s/token")),
                     ("inter_token_latency", "itl_ms", ("ms/token", "s/token")),
                     ("request_latency", "e2e_ms", ("ms", "s")))
"""llm-d's latency, `StepSummary`'s distribution, the units the schema allows it in."""
_STATS: Final = (("mean", "mean"), ("stddev", "std"), ("min", "min"), ("p50", "p50"), ("p90", "p90"),
                 ("p95", "p95"), ("p99", "p99"), ("p99p9", "p99.9"), ("max", "max"))
"""llm-d's ``Statistics`` key -> `Distribution`'s JSON key."""
_RATES: Final = (("input_token_rate", "input_throughput_tok_s"), ("output_token_rate", "output_throughput_tok_s"),
                 ("total_token_rate", "total_throughput_tok_s"), ("request_rate", "request_throughput_rps"))
"""v0.2's throughput -> `StepSummary`'s rate."""
_GAUGES: Final = (("running_requests", "requests_running"), ("waiting_requests", "requests_waiting"),
                  ("kv_cache_usage", "kv_cache_usage"), ("cache_hit_rate", "prefix_cache_hit_rate"))
"""llm-d's resource metric -> the server window's gauge (`tokometer.observe.server_window`) or hit rate."""
_SHARE: Final = {"count": None, "fraction": 1.0, "percent": 100.0}
"""A resource metric's units -> what a share of 1 is in them (None: a count, not a share)."""


def _first(data: Any) -> Any:
    return data[0] if isinstance(data, list) and data else data


def looks_like(data: Any) -> bool:
    """A report (or a list of them): a ``version`` with v0.1's ``scenario`` and ``metrics`` or v0.2's ``run`` and
    ``results``."""
    first = _first(data)
    return isinstance(first, dict) and "version" in first and (
        ("scenario" in first and "metrics" in first) or ("run" in first and "results" in first))


def read(data: Any, path: Path) -> ImportedRun:
    """The reports in ``data`` (the file's document) as one run, a step per report; ImportFormatError otherwise."""
    reports = as_list(data, path, "the document") if isinstance(data, list) else [data]
    if not reports or len(reports) > MAX_STEPS_READ:
        raise ImportFormatError(f"{path}: holds {len(reports)} reports: from 1 to {MAX_STEPS_READ:,} are imported")
    version = as_text(as_map(reports[0], path, "report 0").get("version"), path, "report 0: version")
    if version not in CHECKED_VERSIONS:
        raise ImportFormatError(f"{path}: llm-d Benchmark Report version {quoted(str(version))}: tokometer reads "
                                f"versions {', '.join(CHECKED_VERSIONS)}")
    steps: list[ImportedStep] = []
    first: dict[str, Any] = {}
    for i, raw in enumerate(reports):
        where = f"{path}: report {i}" if len(reports) > 1 else str(path)
        report = as_map(raw, where, "the report")
        if report.get("version") != version:
            raise ImportFormatError(f"{where}: version {quoted(str(report.get('version')))}, not {version} like "
                                    "the first report: import reports of one version at a time")
        step, facts = (_step_v01 if version == "0.1" else _step_v02)(report, where)
        steps.append(step)
        first = first or facts
    return _run(path, version, steps, first)


def _run(path: Path, version: str, steps: list[ImportedStep], facts: dict[str, Any]) -> ImportedRun:
    summary = steps[0].summary or {}
    tool_summary = {f"{key[:-3]}_p50_ms": float(block["p50"]) for key in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms")
                    if (block := summary.get(key)) and block.get("p50") is not None}
    tool_summary["output_tok_s"] = float(summary.get("output_throughput_tok_s") or 0.0)
    run = ImportedRun(tool=TOOL, tool_version=version, source=str(path), model=facts.get("model") or "unknown",
                      target=facts.get("target") or "unknown (an llm-d report)", steps=steps,
                      tool_summary=tool_summary, agrees=("ttft", "tpot", "itl", "e2e"),
                      not_recomputed={"every metric": "an llm-d report holds statistics, not requests: each number "
                                                      "is the report's own, under its harness's definitions"},
                      engine=facts.get("engine"))
    run.differences["harness"] = f"the report was measured by {facts.get('harness') or 'an unnamed harness'}"
    if (started := facts.get("started")) is not None:
        run.started_at, run.dated_from = started
    return run


def _distribution(block: Any, where: str, units: tuple[str, ...], count: int) -> dict[str, Any] | None:
    """A ``Statistics`` block as `Distribution`'s JSON, in tokometer's units (ms for times; counts as they are)."""
    if block is None:
        return None
    stats = as_map(block, where, "")
    unit = as_text(stats.get("units"), where, "units")
    if unit not in units:
        raise ImportFormatError(f"{where}.units: {quoted(str(unit))} is not one of {', '.join(units)}")
    scale = _TO_MS.get(str(unit), 1.0)
    out: dict[str, Any] = {"count": count}
    for theirs, ours in _STATS:
        value = as_float(stats.get(theirs), where, theirs, most=_MOST_MS / scale, optional=theirs != "mean")
        out[ours] = value * scale if value is not None else None
    return out


def _requests(requests: Mapping[str, Any], where: str) -> tuple[dict[str, Any], int]:
    """The summary's request counts and token distributions, and how many requests completed."""
    total = as_int(requests.get("total"), where, "total")
    failures = as_int(requests.get("failures"), where, "failures", optional=True) or 0
    if total is None or failures > total:
        raise ImportFormatError(f"{where}.failures: {failures} is more than the {total} requests in all")
    completed = total - failures
    out: dict[str, Any] = {"requests_completed": completed, "requests_failed": failures}
    for name, ours in (("input_length", "input_tokens"), ("output_length", "output_tokens")):
        dist = _distribution(requests.get(name), f"{where}.{name}", ("count",), completed)
        if dist is not None:
            out[ours] = {"total": round((dist["mean"] or 0.0) * completed), "source": {}, "per_request": dist}
    return out, completed


def _latencies(latency: Mapping[str, Any], where: str, count: int) -> dict[str, Any]:
    out = {}
    for theirs, ours, units in _LATENCIES:
        if (dist := _distribution(latency.get(theirs), f"{where}.{theirs}", units, count)) is not None:
            out[ours] = dist
    return out


def _rate(value: Any, where: str, key: str) -> float:
    return as_float(value, where, key, most=MAX_RATE_PER_S, optional=True) or 0.0


def _step_v01(report: Mapping[str, Any], where: str) -> tuple[ImportedStep, dict[str, Any]]:
    metrics = as_map(report.get("metrics"), where, "metrics")
    summary, completed = _requests(as_map(metrics.get("requests"), where, "metrics.requests"),
                                   f"{where}: metrics.requests")
    summary.update(_latencies(as_map(metrics.get("latency"), where, "metrics.latency"), f"{where}: metrics.latency",
                              completed))
    throughput = as_map(metrics.get("throughput"), where, "metrics.throughput")
    summary.update({ours: _rate(throughput.get(theirs), f"{where}: metrics.throughput", theirs) for theirs, ours in (
        ("input_tokens_per_sec", "input_throughput_tok_s"), ("output_tokens_per_sec", "output_throughput_tok_s"),
        ("total_tokens_per_sec", "total_throughput_tok_s"), ("requests_per_sec", "request_throughput_rps"))})
    time = as_map(metrics.get("time"), where, "metrics.time")
    summary["duration_s"] = as_float(time.get("duration"), where, "metrics.time.duration",
                                     most=MAX_DURATION_NS / UNIT_NS["s"])
    scenario = as_map(report.get("scenario"), where, "scenario")
    load = as_map(scenario.get("load"), where, "scenario.load")
    facts = {"model": as_text(as_map(scenario.get("model"), where, "scenario.model").get("name"), where,
                              "scenario.model.name", optional=True),
             "harness": as_text(load.get("name"), where, "scenario.load.name", optional=True),
             "target": _v01_target(scenario.get("metadata")),
             "started": wall_clock(as_float(time.get("start"), where, "metrics.time.start", most=1e12, optional=True),
                                   "the report's metrics.time.start")}
    return ImportedStep(_load_args(as_map(load.get("args"), where, "scenario.load.args", optional=True)), [],
                        summary=summary), facts


def _v01_target(metadata: Any) -> str | None:
    """The URL a v0.1 report names in its free-form ``scenario.metadata`` (tokometer writes ``target``)."""
    target = metadata.get("target") if isinstance(metadata, Mapping) else None
    return target[:2000] if isinstance(target, str) else None


def _load_args(args: Mapping[str, Any]) -> dict[str, Any]:
    """The step's ``load`` from a harness's concurrency or rate, where it gives one as a number."""
    concurrency, rate = args.get("concurrency") or args.get("max_concurrency"), args.get("rate") or args.get("rate_qps")
    if isinstance(concurrency, int) and not isinstance(concurrency, bool) and 1 <= concurrency <= 1_000_000:
        return {"concurrency": concurrency}
    if isinstance(rate, (int, float)) and not isinstance(rate, bool) and 0 < rate <= MAX_RATE_PER_S:
        return {"rate": float(rate)}  # the arrival process is not in the schema
    return {}


def _step_v02(report: Mapping[str, Any], where: str) -> tuple[ImportedStep, dict[str, Any]]:
    results = as_map(report.get("results"), where, "results")
    performance = as_map(results.get("request_performance"), where, "results.request_performance")
    aggregate = as_map(performance.get("aggregate"), where, "results.request_performance.aggregate")
    at = f"{where}: results.request_performance.aggregate"
    summary, completed = _requests(as_map(aggregate.get("requests"), at, "requests"), f"{at}.requests")
    summary.update(_latencies(as_map(aggregate.get("latency"), at, "latency", optional=True), f"{at}.latency",
                              completed))
    throughput = as_map(aggregate.get("throughput"), at, "throughput", optional=True)
    for theirs, ours in _RATES:
        block = as_map(throughput.get(theirs), f"{at}.throughput", theirs, optional=True)
        summary[ours] = _rate(block.get("mean"), f"{at}.throughput.{theirs}", "mean")
    run = as_map(report.get("run"), where, "run")
    time = as_map(run.get("time"), where, "run.time", optional=True)
    summary["duration_s"] = _iso_duration(time.get("duration"), f"{where}: run.time.duration")
    observability = as_map(results.get("observability"), where, "results.observability", optional=True)
    summary.update(_sessions(observability.get("sessions"), f"{where}: results.observability.sessions"))
    scenario = as_map(report.get("scenario"), where, "scenario", optional=True)
    facts = _scenario_facts(scenario, where)
    facts["started"] = _started(time.get("start"), f"{where}: run.time.start")
    facts["engine"] = _engine(facts, observability, where)
    server = _server(observability, where, summary["duration_s"])
    return ImportedStep(facts.pop("load"), [], summary=summary, server=server), facts


def _iso_duration(value: Any, where: str) -> float:
    """An ISO 8601 duration in seconds as tokometer writes and llm-d's example shows (``PT49.97S``); 0 without."""
    text = as_text(value, where, "", optional=True)
    if text is None:
        return 0.0
    if not (text.startswith("PT") and text.endswith("S")) or len(text) > 40:
        raise ImportFormatError(f"{where}: {quoted(text)} is not a duration in seconds such as PT12.5S")
    try:
        seconds = float(text[2:-1])
    except ValueError:
        raise ImportFormatError(f"{where}: {quoted(text)} is not a duration in seconds such as PT12.5S") from None
    result = as_float(seconds, where, "", most=MAX_DURATION_NS / UNIT_NS["s"])
    return result or 0.0


def _started(value: Any, where: str) -> tuple[str, str] | None:
    """When the run started, from the report's ISO 8601 ``run.time.start`` (None without one)."""
    text = as_text(value, where, "", optional=True)
    if text is None:
        return None
    from datetime import datetime

    try:
        moment = datetime.fromisoformat(text[:64].replace("Z", "+00:00"))
    except ValueError:
        raise ImportFormatError(f"{where}: {quoted(text)} is not an ISO 8601 date and time") from None
    return wall_clock(moment.timestamp() if moment.tzinfo is not None else None, "the report's run.time.start")


def _scenario_facts(scenario: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The model, the engine's tool, the harness and the step's load, from a v0.2 ``scenario``."""
    stack = as_list(scenario.get("stack"), where, "scenario.stack", optional=True)
    engine = as_map(stack[0], where, "scenario.stack[0]") if stack else {}
    standardized = as_map(engine.get("standardized"), where, "scenario.stack[0].standardized", optional=True)
    model = as_map(standardized.get("model"), where, "scenario.stack[0].standardized.model", optional=True)
    load = as_map(scenario.get("load"), where, "scenario.load", optional=True)
    workload = as_map(load.get("standardized"), where, "scenario.load.standardized", optional=True)
    config = as_map(load.get("native"), where, "scenario.load.native", optional=True).get("config")
    config = config if isinstance(config, Mapping) else {}  # free-form in the schema: only its target is read
    return {"model": as_text(model.get("name"), where, "scenario.stack[0].standardized.model.name", optional=True),
            "tool": as_text(standardized.get("tool"), where, "scenario.stack[0].standardized.tool", optional=True),
            "tool_version": as_text(standardized.get("tool_version"), where,
                                    "scenario.stack[0].standardized.tool_version", optional=True),
            "harness": as_text(workload.get("tool"), where, "scenario.load.standardized.tool", optional=True),
            "target": as_text(config.get("target"), where, "scenario.load.native.config.target", optional=True),
            "load": _load_args(workload)}


def _engine(facts: Mapping[str, Any], observability: Mapping[str, Any], where: str) -> dict[str, Any] | None:
    """The engine's identity as far as the report says: its tool, version and start-up."""
    identity: dict[str, Any] = {"engine": facts.get("tool"), "engine_version": facts.get("tool_version")}
    startup = _startup(observability.get("pod_startup_times"), f"{where}: results.observability.pod_startup_times",
                       str(facts.get("tool") or "unknown"))
    if startup is not None:
        from tokometer.engines.startup import STARTUP_KEY

        identity[STARTUP_KEY] = startup
    return identity if any(v is not None for v in identity.values()) else None


def _startup(block: Any, where: str, engine: str) -> dict[str, Any] | None:
    """The start-up, from the pods' times: the slowest (other than a warm start) is cold."""
    from tokometer.engines.startup import MEASURED, EngineStartup

    pods = as_list(as_map(block, where, "", optional=True).get("pods"), where, "pods", optional=True)
    cold: list[float] = []
    warm: list[float] = []
    roles: set[str | None] = set()
    for i, raw in enumerate(pods):
        pod = as_map(raw, where, f"pods[{i}]")
        seconds = as_float(pod.get("startup_seconds"), where, f"pods[{i}].startup_seconds",
                           most=MAX_DURATION_NS / UNIT_NS["s"], optional=True)
        role = as_text(pod.get("role"), where, f"pods[{i}].role", optional=True)
        if seconds is not None:
            (warm if role == "warm start" else cold).append(seconds)
            roles.add(role)
    if not cold:
        return None
    ours = roles <= {"cold start", "warm start"}  # as tokometer writes its own start-up
    measured = MEASURED if ours else "the slowest pod's startup_seconds in the llm-d report (pod creation to ready)"
    return EngineStartup(engine, max(cold), min(warm) if warm else None, measured).to_json()


def _server(observability: Mapping[str, Any], where: str, duration_s: float) -> dict[str, Any] | None:
    """The first component's server aggregate as tokometer's server window: running and waiting requests (mean
    and max), KV-cache use and the prefix-cache hit rate as shares of 1 (given as a fraction or in percent)."""
    components = as_list(observability.get("components"), where, "results.observability.components", optional=True)
    if not components:
        return None
    at = f"{where}: results.observability.components[0].aggregate"
    aggregate = as_map(as_map(components[0], at, "").get("aggregate"), at, "", optional=True)
    gauges: dict[str, Any] = {}
    for theirs, ours in _GAUGES:
        if (block := as_map(aggregate.get(theirs), at, theirs, optional=True)):
            gauges[ours] = _gauge(block, f"{at}.{theirs}", count=theirs.endswith("requests"))
    hit = gauges.pop("prefix_cache_hit_rate", None)
    if not gauges and hit is None:
        return None
    return {"source": "llm-d report", "samples": 0, "gaps": 0, "duration_s": duration_s, "gauges": gauges,
            "counters": {}, "rates": {}, "prefix_cache_hit_rate": hit["mean"] if hit else None, "histograms": {},
            "live": [], "at_request_end": [], "moved": {}}


def _gauge(block: Mapping[str, Any], where: str, *, count: bool) -> dict[str, float | None]:
    """A resource metric's mean and max: a count as it is, a share as a fraction of 1."""
    unit = as_text(block.get("units"), where, "units")
    if unit not in _SHARE or (_SHARE[str(unit)] is None) != count:
        allowed = "count" if count else "fraction or percent"
        raise ImportFormatError(f"{where}.units: {quoted(str(unit))}, not {allowed}")
    per_one = _SHARE[str(unit)] or 1.0
    most = MAX_RATE_PER_S if count else per_one
    values = {key: as_float(block.get(key), where, key, most=most, optional=key == "max") for key in ("mean", "max")}
    return {key: value / per_one if value is not None else None for key, value in values.items()}


_SESSION_COUNTS: Final = ("sessions", "completed", "failed")
_SESSION_RATES: Final = ("session_throughput_sps", "ttft_turn_growth")
_TURN_COUNTS: Final = ("turn", "requests", "failed")
_TURN_NUMBERS: Final = ("input_tokens_mean", "cached_tokens_mean", "prompt_cache_hit_rate")


def _sessions(block: Any, where: str) -> dict[str, Any]:
    """The sessions tokometer writes beside the schema's fields (``summary``, ``per_turn``: `StepSummary`'s
    ``session_stats`` and ``per_turn``), each value checked; only the keys tokometer writes are kept."""
    sessions = as_map(block, where, "", optional=True)
    if not sessions:
        return {}
    raw = as_map(sessions.get("summary"), where, "summary")
    summary: dict[str, Any] = {k: as_int(raw.get(k), where, f"summary.{k}", optional=True) for k in _SESSION_COUNTS}
    summary.update({k: as_float(raw.get(k), where, f"summary.{k}", most=MAX_RATE_PER_S, optional=True)
                    for k in _SESSION_RATES})
    summary.update({k: _stats_json(raw.get(k), f"{where}: summary.{k}") for k in ("turns", "duration_s")})
    per_turn = []
    for i, item in enumerate(as_list(sessions.get("per_turn"), where, "per_turn", optional=True)):
        turn = as_map(item, where, f"per_turn[{i}]")
        row: dict[str, Any] = {k: as_int(turn.get(k), where, f"per_turn[{i}].{k}", optional=True)
                               for k in _TURN_COUNTS}
        row.update({k: as_float(turn.get(k), where, f"per_turn[{i}].{k}", most=MAX_RATE_PER_S, optional=True)
                    for k in _TURN_NUMBERS})
        row["ttft_ms"] = _stats_json(turn.get("ttft_ms"), f"{where}: per_turn[{i}].ttft_ms")
        per_turn.append(row)
    return {"session_stats": summary, "per_turn": per_turn}


def _stats_json(block: Any, where: str) -> dict[str, Any] | None:
    """A distribution as tokometer writes it (``count``, ``mean``, ... ``p99.9``), each value checked."""
    stats = as_map(block, where, "", optional=True)
    if not stats:
        return None
    out: dict[str, Any] = {"count": as_int(stats.get("count"), where, "count", optional=True) or 0}
    out.update({ours: as_float(stats.get(ours), where, ours, most=_MOST_MS, optional=True) for _, ours in _STATS})
    return out
