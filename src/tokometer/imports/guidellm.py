"""Read GuideLLM's benchmarks JSON (``guidellm run --output kind=json,path=...``) into tokometer records.

Each entry of ``benchmarks`` is one load point (a step); its ``requests.successful`` / ``errored`` /
``incomplete`` lists hold one request each, with the client's wall-clock stamps in ``info.timings``:
``request_start``, ``first_token_iteration`` (the first chunk with output), ``last_token_iteration``,
``request_end``, and ``output_tokens``. That gives TTFT, TPOT, E2E and the decode speed under tokometer's
definitions; GuideLLM keeps no stamp per chunk, so ITL and chunk gaps cannot be recomputed (a record holds
the first token only as an event). Field names as GuideLLM 0.8.1 (report ``metadata.version`` 2) writes them.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from tokometer.imports.source import (
    MAX_DURATION_NS,
    MAX_RATE_PER_S,
    MAX_STAMP_NS,
    UNIT_NS,
    EventCount,
    ImportedRun,
    ImportedStep,
    ImportFormatError,
    as_float,
    as_int,
    as_list,
    as_map,
    as_text,
    check_span,
    stamp_ns,
    wall_clock,
)
from tokometer.records import RequestRecord

__all__ = ["CHECKED_VERSIONS", "TOOL", "looks_like", "read"]

TOOL: Final = "guidellm"
CHECKED_VERSIONS: Final = ("0.8.1",)
"""The GuideLLM versions whose files this reader was checked on (tests/fixtures/imports)."""

DIFFERENCES: Final = {
    "ttft": "GuideLLM's TTFT is first_token_iteration - request_start: the first chunk with output, as "
            "tokometer's (a role-only chunk is not counted).",
    "tpot": "GuideLLM's time_per_output_token is (last token - request start) / output tokens: TTFT "
            "included. tokometer's TPOT is (last - first token) / (output tokens - 1), which is GuideLLM's "
            "inter_token_latency.",
    "itl": "GuideLLM's inter_token_latency is per request, (last - first token) / (output tokens - 1): "
           "tokometer's TPOT, not a distribution over chunk gaps.",
    "throughput": "GuideLLM's output_tokens_per_second is a rate over time, sampled; tokometer's is all "
                  "output tokens over first send to last end.",
}
NOT_RECOMPUTED: Final = {
    "itl": "GuideLLM keeps only the first and last token times of a request, not each chunk's",
    "chunk_gap": "no per-chunk stamps in the file",
    "connect": "the file does not time connection set-up",
    "finish_reason": "the file does not say why an answer stopped",
}
_SUMMARY: Final = (("time_to_first_token_ms", "ttft_p50_ms", 1.0), ("inter_token_latency_ms", "itl_p50_ms", 1.0),
                   ("time_per_output_token_ms", "tpot_p50_ms", 1.0), ("request_latency", "e2e_p50_ms", 1000.0))
"""GuideLLM's metric, the name `ImportedRun.tool_summary` gives its median, and what makes that milliseconds."""


def looks_like(data: Any) -> bool:
    """True for a mapping with GuideLLM's ``benchmarks`` list and ``metadata.guidellm_version``."""
    return (isinstance(data, Mapping) and isinstance(data.get("benchmarks"), list)
            and isinstance(data.get("metadata"), Mapping) and "guidellm_version" in data["metadata"])


def read(data: Any, path: Path) -> ImportedRun:
    """The run in a parsed GuideLLM benchmarks report: one step per benchmark."""
    if not looks_like(data):
        raise ImportFormatError(f"{path}: not a GuideLLM benchmarks report (no benchmarks list with "
                                "metadata.guidellm_version)")
    events = EventCount(path)
    benchmarks = as_list(data["benchmarks"], path, "benchmarks")
    steps = [_step(k, as_map(b, path, f"benchmarks[{k}]"), path, events) for k, b in enumerate(benchmarks)]
    first = as_map(benchmarks[0], path, "benchmarks[0]") if benchmarks else {}
    config = as_map(first.get("config"), path, "benchmarks[0].config", optional=True)
    backend = as_map(config.get("backend"), path, "benchmarks[0].config.backend", optional=True)

    def text(key: str) -> str | None:
        return as_text(backend.get(key), path, f"benchmarks[0].config.backend.{key}", optional=True)

    version = as_text(data["metadata"].get("guidellm_version"), path, "metadata.guidellm_version", optional=True)
    started = as_float(first.get("start_time"), path, "benchmarks[0].start_time", most=MAX_STAMP_NS / UNIT_NS["s"],
                       optional=True)
    started_at, dated_from = wall_clock(started, "GuideLLM's start_time of the first benchmark") or (None, "")
    return ImportedRun(tool=TOOL, tool_version=version or None, source=str(path), model=text("model") or "",
                       target=text("target") or "guidellm", steps=steps,
                       api="openai-chat" if "chat" in (text("request_format") or "chat") else "openai-completions",
                       tool_summary=_summary(first, path), agrees=("ttft", "e2e"),
                       not_recomputed=dict(NOT_RECOMPUTED), differences=dict(DIFFERENCES), started_at=started_at,
                       dated_from=dated_from)


def _summary(benchmark: Mapping[str, Any], path: Path) -> dict[str, float]:
    """The first benchmark's medians of its successful requests (ms), as GuideLLM computed them."""
    metrics = as_map(benchmark.get("metrics"), path, "benchmarks[0].metrics", optional=True)
    out: dict[str, float] = {}
    for key, ours, scale in _SUMMARY:
        where = f"benchmarks[0].metrics.{key}"
        block = as_map(metrics.get(key), path, where, optional=True)
        ok = as_map(block.get("successful"), path, f"{where}.successful", optional=True)
        median = as_float(ok.get("median"), path, f"{where}.successful.median",
                          most=MAX_DURATION_NS / UNIT_NS["ms"] / scale, optional=True)
        if median is not None:
            out[ours] = median * scale
    return out


def _load(config: Mapping[str, Any], path: Path, where: str) -> dict[str, Any]:
    """The step's ``load`` from its ``config.strategy``."""
    strategy = as_map(config.get("strategy"), path, f"{where}.strategy", optional=True)
    kind = as_text(strategy.get("type_"), path, f"{where}.strategy.type_", optional=True)
    if kind == "concurrent":
        return {"concurrency": as_int(strategy.get("streams"), path, f"{where}.strategy.streams", positive=True)}
    if kind == "synchronous":
        return {"concurrency": 1, "synchronous": True}
    if kind in ("constant", "poisson"):
        return {"rate": as_float(strategy.get("rate"), path, f"{where}.strategy.rate", most=MAX_RATE_PER_S,
                                 positive=True), "arrival": kind}
    return {"guidellm_strategy": kind} if kind else {}


def _step(k: int, benchmark: Mapping[str, Any], path: Path, events: EventCount) -> ImportedStep:
    requests = as_map(benchmark.get("requests"), path, f"benchmarks[{k}].requests")
    records: list[RequestRecord] = []
    for status in ("successful", "errored", "incomplete"):
        where = f"benchmarks[{k}].requests.{status}"
        rows = as_list(requests.get(status), path, where, optional=True)
        events.add(len(rows))
        for j, row in enumerate(rows):
            records.append(_record(len(records), k, status, as_map(row, path, f"{where}[{j}]"), path,
                                   f"{where}[{j}]"))
    config = as_map(benchmark.get("config"), path, f"benchmarks[{k}].config", optional=True)
    return ImportedStep(_load(config, path, f"benchmarks[{k}].config"), records)


def _record(i: int, k: int, status: str, row: Mapping[str, Any], path: Path, where: str) -> RequestRecord:
    info = as_map(row.get("info"), path, f"{where}.info")
    timings = as_map(info.get("timings"), path, f"{where}.info.timings")

    def stamp(name: str) -> int:
        return stamp_ns(timings.get(name), path, f"{where}.info.timings.{name}", unit="s", optional=True) or 0

    sent = stamp("request_start")
    record = RequestRecord(index=i, step=k, due_ns=stamp("targeted_start") or sent, sent_ns=sent,
                           end_ns=stamp("request_end"),
                           input_tokens=as_int(row.get("prompt_tokens"), path, f"{where}.prompt_tokens",
                                               optional=True),
                           output_tokens=as_int(row.get("output_tokens"), path, f"{where}.output_tokens",
                                                optional=True),
                           finish_reason="unknown")
    record.input_tokens_source = "usage" if record.input_tokens is not None else None
    record.output_tokens_source = "usage" if record.output_tokens is not None else None
    if status != "successful":
        error = info.get("error")
        record.error = "cancelled" if status == "incomplete" else "protocol"
        record.error_detail = " ".join(str(error or status).split())[:300]
        record.end_ns = record.end_ns or sent
        if sent:
            check_span(sent, record.end_ns, f"{path}: {where}")
        record.finish_reason = "cancelled" if status == "incomplete" else "error"
        return record
    first, last = stamp("first_token_iteration"), stamp("last_token_iteration")
    if not sent or not first or first < sent or last < first:
        raise ImportFormatError(f"{path}: {where}: request_start, first_token_iteration and "
                                "last_token_iteration should be set and in that order")
    record.first_byte_ns = record.first_token_ns = first
    record.last_token_ns = last
    record.end_ns = max(record.end_ns, last)
    check_span(sent, record.end_ns, f"{path}: {where}")
    record.event_ns, record.event_tokens = [first], [float(min(record.output_tokens or 0, 1))]
    record.chunk_count = as_int(timings.get("token_iterations"), path, f"{where}.info.timings.token_iterations",
                                optional=True) or 1
    record.status = 200
    return record
