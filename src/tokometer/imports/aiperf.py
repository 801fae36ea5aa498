"""Read AIPerf's per-request export (``profile_export.jsonl``, one record a line) into tokometer records.

Each line holds ``metadata`` (``credit_issued_ns``: when the request was due; ``request_start_ns`` and
``request_end_ns``: wall-clock nanoseconds) and ``metrics`` (``time_to_first_token``, ``inter_chunk_latency``:
the gaps between content chunks, ``request_latency``, ``http_req_connection_overhead``, all ms;
``usage_completion_tokens``, else ``output_token_count`` (AIPerf's own tokenizer), ``input_sequence_length``),
or an ``error``. AIPerf's
TTFT runs from ``request_start_ns``, before the connection was opened; tokometer's from when the request was
sent, so the connection overhead is taken off (it becomes the record's ``connect_ns``). Tokens per chunk are
not in the file (shared as `streamed_record` says). The version and AIPerf's own aggregates come from
``profile_export_aiperf.json`` beside the file when it is there. Field names as AIPerf 0.13.0 writes them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from tokometer.imports.jsonstream import ImportStream
from tokometer.imports.source import (
    MAX_DURATION_NS,
    MAX_RATE_PER_S,
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
    duration_ns,
    stamp_ns,
    streamed_record,
    wall_clock,
)
from tokometer.records import RequestRecord, TokenSource

__all__ = ["CHECKED_VERSIONS", "TOOL", "looks_like_jsonl", "read"]

TOOL: Final = "aiperf"
CHECKED_VERSIONS: Final = ("0.13.0",)
"""The AIPerf versions whose files this reader was checked on (tests/fixtures/imports)."""
SUMMARY_FILE: Final = "profile_export_aiperf.json"

DIFFERENCES: Final = {
    "ttft": "AIPerf's TTFT runs from request_start, before the connection is opened (its "
            "http_req_connection_overhead included); tokometer's from the send. The first chunk is the "
            "first with content in both.",
    "itl": "AIPerf's inter_token_latency is per request, (request_latency - TTFT) / (output tokens - 1): "
           "tokometer's TPOT. Its inter_chunk_latency is tokometer's chunk gap.",
    "tpot": "AIPerf reports no TPOT; tokometer's TPOT equals AIPerf's per-request inter_token_latency.",
    "throughput": "AIPerf divides by its benchmark_duration (first credit to last response); tokometer by "
                  "first send to last end.",
}
NOT_RECOMPUTED: Final = {
    "itl": "tokens per chunk are not in the file: each chunk after the first is taken to carry an equal "
           "share of output tokens - 1",
    "finish_reason": "the file does not say why an answer stopped",
}
_SUMMARY: Final = (("time_to_first_token", "ttft_p50_ms"), ("inter_token_latency", "itl_p50_ms"),
                   ("request_latency", "e2e_p50_ms"), ("inter_chunk_latency", "chunk_gap_p50_ms"))


def looks_like_jsonl(raw: bytes) -> bool:
    """True when the first line is a JSON object with AIPerf's ``metadata`` and ``metrics`` (or ``error``)."""
    head = raw[:65536].split(b"\n", 1)[0].strip()
    if not head.startswith(b"{") or b'"metadata"' not in head:
        return False
    try:
        first = json.loads(head)
    except (ValueError, RecursionError):
        return False
    return isinstance(first, Mapping) and "metadata" in first and ("metrics" in first or "error" in first)


def read(stream: ImportStream, path: Path) -> ImportedRun:
    """The run in an AIPerf ``profile_export.jsonl``, read a line at a time (`ImportStream.lines`)."""
    events = EventCount(path)
    records: list[RequestRecord] = []
    for n, row in stream.lines():
        events.add(1)
        row = as_map(row, path, f"line {n}")
        if _phase(row, path, f"line {n}") in (None, "profiling"):
            records.append(_record(len(records), row, path, events, f"line {n}"))
    version, summary, config = _beside(path)
    model, target, api, load = _from_config(config, path.with_name(SUMMARY_FILE))
    not_recomputed = dict(NOT_RECOMPUTED)
    if version is None:
        not_recomputed["tool_summary"] = f"no {SUMMARY_FILE} beside the file: AIPerf's own numbers unknown"
    first = min((r.sent_ns - r.connect_ns for r in records), default=None)
    started_at, dated_from = (wall_clock(None if first is None else first / UNIT_NS["s"],
                                         "the first request's request_start_ns") or (None, ""))
    return ImportedRun(tool=TOOL, tool_version=version, source=str(path), model=model, target=target,
                       steps=[ImportedStep(load, records)], api=api, tool_summary=summary,
                       agrees=("chunk_gap",), not_recomputed=not_recomputed, differences=dict(DIFFERENCES),
                       started_at=started_at, dated_from=dated_from)


def _phase(row: Mapping[str, Any], path: Path, where: str) -> str | None:
    """The record's ``metadata.benchmark_phase`` (``warmup``, ``profiling``; None when absent)."""
    meta = as_map(row.get("metadata"), path, f"{where}.metadata")
    return as_text(meta.get("benchmark_phase"), path, f"{where}.metadata.benchmark_phase", optional=True)


def _beside(path: Path) -> tuple[str | None, dict[str, float], Mapping[str, Any]]:
    """The version, AIPerf's own p50s and its input config, from the summary file next to ``path``."""
    summary_path = path.with_name(SUMMARY_FILE)
    if not summary_path.is_file():
        return None, {}, {}
    try:
        data = ImportStream(summary_path).document()
    except ImportFormatError as exc:
        raise ImportFormatError(f"{exc} (move {summary_path.name} away to import {path.name} alone)") from None
    data = as_map(data, summary_path, "the summary")
    out: dict[str, float] = {}
    for key, short in _SUMMARY:
        block = as_map(data.get(key), summary_path, key, optional=True)
        p50 = as_float(block.get("p50"), summary_path, f"{key}.p50", most=MAX_DURATION_NS / UNIT_NS["ms"],
                       optional=True)
        if p50 is not None:
            out[short] = p50
    throughput = as_map(data.get("output_token_throughput"), summary_path, "output_token_throughput", optional=True)
    avg = as_float(throughput.get("avg"), summary_path, "output_token_throughput.avg", most=MAX_RATE_PER_S,
                   optional=True)
    if avg is not None:
        out["output_tok_s"] = avg
    version = as_text(data.get("aiperf_version"), summary_path, "aiperf_version", optional=True)
    return version or None, out, as_map(data.get("input_config"), summary_path, "input_config", optional=True)


def _from_config(config: Mapping[str, Any], where: Path) -> tuple[str, str, str, dict[str, Any]]:
    """The model, target, protocol and load of AIPerf's ``input_config`` (read from the summary file ``where``)."""
    endpoint = as_map(config.get("endpoint"), where, "input_config.endpoint", optional=True)
    urls = as_list(endpoint.get("urls"), where, "input_config.endpoint.urls", optional=True)
    target = as_text(urls[0], where, "input_config.endpoint.urls[0]") if urls else None
    models = as_map(config.get("models"), where, "input_config.models", optional=True)
    items = as_list(models.get("items"), where, "input_config.models.items", optional=True)
    model = as_text(as_map(items[0], where, "input_config.models.items[0]").get("name"), where,
                    "input_config.models.items[0].name", optional=True) if items else None
    kind = as_text(endpoint.get("type"), where, "input_config.endpoint.type", optional=True)
    phases = as_list(config.get("phases"), where, "input_config.phases", optional=True)
    load: dict[str, Any] = {}
    for j, phase in enumerate(phases):
        phase = as_map(phase, where, f"input_config.phases[{j}]")
        if phase.get("kind") == "profiling":
            concurrency = as_int(phase.get("concurrency"), where, f"input_config.phases[{j}].concurrency",
                                 optional=True, positive=True)
            load = {} if concurrency is None else {"concurrency": concurrency}
            break
    return (model or "", target or "aiperf", "openai-completions" if kind == "completions" else "openai-chat",
            load)


def _metric(metrics: Mapping[str, Any], name: str, path: Path, where: str) -> Any:
    """The ``value`` of metric ``name`` (None when the record has no such metric)."""
    return as_map(metrics.get(name), path, f"{where}.{name}", optional=True).get("value")


def _record(i: int, row: Mapping[str, Any], path: Path, events: EventCount, where: str) -> RequestRecord:
    """Record ``i`` of the run, from the file's ``where`` (``line N``)."""
    meta = as_map(row.get("metadata"), path, f"{where}.metadata")
    metrics = as_map(row.get("metrics"), path, f"{where}.metrics", optional=True)

    def metric_ns(name: str, *, optional: bool = False) -> int:
        return duration_ns(_metric(metrics, name, path, where), path, f"{where}.{name}", unit="ms",
                           optional=optional) or 0

    def count(name: str) -> int | None:
        return as_int(_metric(metrics, name, path, where), path, f"{where}.{name}", optional=True)

    start = stamp_ns(meta.get("request_start_ns"), path, f"{where}.metadata.request_start_ns", unit="ns") or 0
    due = stamp_ns(meta.get("credit_issued_ns"), path, f"{where}.metadata.credit_issued_ns", unit="ns",
                   optional=True) or start
    end = stamp_ns(meta.get("request_end_ns"), path, f"{where}.metadata.request_end_ns", unit="ns",
                   optional=True) or start
    inputs = count("input_sequence_length")
    error = row.get("error")
    if error or meta.get("was_cancelled"):
        check_span(start, end, f"{path}: {where}")
        detail = error.get("message") or error.get("type") if isinstance(error, Mapping) else error
        return RequestRecord(index=i, due_ns=min(due, start), sent_ns=start, end_ns=end,
                             error="cancelled" if meta.get("was_cancelled") and not error else "protocol",
                             error_detail=" ".join(str(detail or "cancelled").split())[:300],
                             input_tokens=inputs, finish_reason="error")
    overhead = metric_ns("http_req_connection_overhead", optional=True)
    ttft = metric_ns("time_to_first_token")
    chunk_gaps = as_list(_metric(metrics, "inter_chunk_latency", path, where), path, f"{where}.inter_chunk_latency",
                         optional=True)
    events.add(len(chunk_gaps))
    latency = metric_ns("request_latency")
    usage = count("usage_completion_tokens")
    counted = count("output_token_count") or count("output_sequence_length") or 0
    source: TokenSource = "usage" if usage is not None else "tokenizer"
    connect = min(overhead, ttft)
    gaps_ns = [duration_ns(g, path, f"{where}.inter_chunk_latency[{j}]", unit="ms") or 0
               for j, g in enumerate(chunk_gaps)]
    return streamed_record(i, where=f"{path}: {where}", due_ns=min(due, start), connect_ns=connect,
                           sent_ns=start + connect, ttft_ns=ttft - connect, gaps_ns=gaps_ns, end_ns=start + latency,
                           output_tokens=usage if usage is not None else counted, input_tokens=inputs,
                           output_source=source)
