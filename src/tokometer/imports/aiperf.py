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

from tokometer.imports.source import (
    MAX_REQUESTS,
    ImportedRun,
    ImportedStep,
    ImportFormatError,
    as_float,
    as_int,
    as_list,
    as_map,
    check_nesting,
    read_bytes,
    streamed_record,
)
from tokometer.records import RequestRecord, TokenSource

__all__ = ["TOOL", "looks_like_jsonl", "read"]

TOOL: Final = "aiperf"
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


def read(raw: bytes, path: Path) -> ImportedRun:
    """The run in an AIPerf ``profile_export.jsonl`` (its bytes, already size-checked)."""
    lines = [line for line in raw.splitlines() if line.strip()]
    if len(lines) > MAX_REQUESTS:
        raise ImportFormatError(f"{path} holds more than {MAX_REQUESTS:,} records: not imported")
    rows: list[Mapping[str, Any]] = []
    for n, line in enumerate(lines, 1):
        try:
            row = json.loads(line)
        except RecursionError:
            raise ImportFormatError(f"{path}: line {n}: nested too deeply: not imported") from None
        except (ValueError, UnicodeDecodeError) as exc:
            raise ImportFormatError(f"{path}: line {n}: not JSON ({exc})") from None
        check_nesting(row, f"{path}: line {n}")
        rows.append(as_map(row, path, f"line {n}"))
    profiling = [r for r in rows if as_map(r.get("metadata"), path, "metadata").get("benchmark_phase")
                 in (None, "profiling")]
    records = [_record(i, row, path) for i, row in enumerate(profiling)]
    version, summary, config = _beside(path)
    endpoint = _mapping(config.get("endpoint"))
    urls = [u for u in endpoint.get("urls") or () if isinstance(u, str)]
    models = _mapping(config.get("models"))
    names = [m.get("name") for m in models.get("items") or () if isinstance(m, Mapping)]
    phases = [p for p in config.get("phases") or () if isinstance(p, Mapping) and p.get("kind") == "profiling"]
    concurrency = phases[0].get("concurrency") if phases else None
    load = {"concurrency": concurrency} if isinstance(concurrency, int) and not isinstance(concurrency, bool) else {}
    not_recomputed = dict(NOT_RECOMPUTED)
    if version is None:
        not_recomputed["tool_summary"] = f"no {SUMMARY_FILE} beside the file: AIPerf's own numbers unknown"
    return ImportedRun(tool=TOOL, tool_version=version, source=str(path),
                       model=str(names[0]) if names and names[0] else "", target=urls[0] if urls else "aiperf",
                       steps=[ImportedStep(load, records)],
                       api="openai-completions" if endpoint.get("type") == "completions" else "openai-chat",
                       tool_summary=summary,
                       agrees=("chunk_gap",), not_recomputed=not_recomputed, differences=dict(DIFFERENCES))


def _beside(path: Path) -> tuple[str | None, dict[str, float], Mapping[str, Any]]:
    """The version, AIPerf's own p50s and its input config, from the summary file next to ``path``."""
    summary_path = path.with_name(SUMMARY_FILE)
    if not summary_path.is_file():
        return None, {}, {}
    try:
        data = json.loads(read_bytes(summary_path))
        check_nesting(data, summary_path)
    except (ValueError, RecursionError):
        raise ImportFormatError(f"{summary_path}: not JSON: not imported (move it away to import "
                                f"{path.name} alone)") from None
    if not isinstance(data, Mapping):
        return None, {}, {}
    out: dict[str, float] = {}
    for key, short in _SUMMARY:
        block = data.get(key)
        if isinstance(block, Mapping) and isinstance(block.get("p50"), (int, float)):
            out[short] = float(block["p50"])
    throughput = data.get("output_token_throughput")
    if isinstance(throughput, Mapping) and isinstance(throughput.get("avg"), (int, float)):
        out["output_tok_s"] = float(throughput["avg"])
    version = data.get("aiperf_version")
    config = data.get("input_config")
    return (str(version) if version else None), out, config if isinstance(config, Mapping) else {}


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _metric(metrics: Mapping[str, Any], name: str) -> Any:
    block = metrics.get(name)
    return block.get("value") if isinstance(block, Mapping) else None


def _record(i: int, row: Mapping[str, Any], path: Path) -> RequestRecord:
    where = f"record {i + 1}"
    meta = as_map(row.get("metadata"), path, f"{where}.metadata")
    metrics = as_map(row.get("metrics", {}), path, f"{where}.metrics")
    start = as_int(meta.get("request_start_ns"), path, f"{where}.metadata.request_start_ns") or 0
    due = as_int(meta.get("credit_issued_ns"), path, f"{where}.metadata.credit_issued_ns", optional=True) or start
    end = as_int(meta.get("request_end_ns"), path, f"{where}.metadata.request_end_ns", optional=True) or start
    inputs = as_int(_metric(metrics, "input_sequence_length"), path, f"{where}.input_sequence_length",
                    optional=True)
    error = row.get("error")
    if error or meta.get("was_cancelled"):
        detail = error.get("message") or error.get("type") if isinstance(error, Mapping) else error
        return RequestRecord(index=i, due_ns=min(due, start), sent_ns=start, end_ns=end,
                             error="cancelled" if meta.get("was_cancelled") and not error else "protocol",
                             error_detail=" ".join(str(detail or "cancelled").split())[:300],
                             input_tokens=inputs, finish_reason="error")
    overhead_ms = as_float(_metric(metrics, "http_req_connection_overhead"), path,
                           f"{where}.http_req_connection_overhead", optional=True) or 0.0
    ttft_ms = as_float(_metric(metrics, "time_to_first_token"), path, f"{where}.time_to_first_token") or 0.0
    gaps = as_list(_metric(metrics, "inter_chunk_latency") or [], path, f"{where}.inter_chunk_latency")
    latency_ms = as_float(_metric(metrics, "request_latency"), path, f"{where}.request_latency") or 0.0
    usage = as_int(_metric(metrics, "usage_completion_tokens"), path, f"{where}.usage_completion_tokens",
                   optional=True)
    counted = as_int(_metric(metrics, "output_token_count") or _metric(metrics, "output_sequence_length") or 0,
                     path, f"{where}.output_token_count") or 0
    source: TokenSource = "usage" if usage is not None else "tokenizer"
    output = usage if usage is not None else counted
    connect = round(min(overhead_ms, ttft_ms) * 1e6)
    gaps_ns = [round((as_float(g, path, f"{where}.inter_chunk_latency") or 0.0) * 1e6) for g in gaps]
    return streamed_record(i, due_ns=min(due, start), connect_ns=connect, sent_ns=start + connect,
                           ttft_ns=round(ttft_ms * 1e6) - connect, gaps_ns=gaps_ns,
                           end_ns=start + round(latency_ms * 1e6), output_tokens=output, input_tokens=inputs,
                           output_source=source)
