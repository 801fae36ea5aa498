"""Read ``vllm bench serve --save-result --save-detailed`` JSON into tokometer records.

The file's per-request lists (``start_times``, ``ttfts``, ``itls``, ``latencies``, ``input_lens``,
``output_lens``, ``errors``: one entry per request, seconds on the client's ``time.perf_counter``) give each
request's send time and the arrival of every streamed chunk, so TTFT, TPOT, E2E and the chunk gaps are
tokometer's own. What the file does not hold: how many tokens each chunk carried (the record assumes one in
the first chunk and the rest shared evenly, which makes TPOT exactly vLLM's ``(latency - ttft) /
(output_len - 1)``), whether the first chunk carried text (vLLM's chat backend stamps the first chunk with
``choices``, a role-only one included), and when a request was due. Field names as vLLM 0.32 writes them.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from tokometer.imports.source import (
    ImportedRun,
    ImportedStep,
    ImportFormatError,
    as_float,
    as_int,
    as_list,
    seconds_ns,
    streamed_record,
)
from tokometer.records import RequestRecord

__all__ = ["TOOL", "looks_like", "read"]

TOOL: Final = "vllm-bench-serve"
_PER_REQUEST: Final = ("start_times", "ttfts", "itls", "latencies", "input_lens", "output_lens", "errors")
_SUMMARY_KEYS: Final = {"median_ttft_ms": "ttft_p50_ms", "p99_ttft_ms": "ttft_p99_ms", "mean_ttft_ms": "ttft_mean_ms",
                         "median_tpot_ms": "tpot_p50_ms", "mean_tpot_ms": "tpot_mean_ms",
                         "median_itl_ms": "itl_p50_ms", "mean_itl_ms": "itl_mean_ms", "p99_itl_ms": "itl_p99_ms",
                         "median_e2el_ms": "e2e_p50_ms", "output_throughput": "output_tok_s",
                         "request_throughput": "requests_per_s", "duration": "duration_s"}
"""vLLM's key -> the name `ImportedRun.tool_summary` gives it (the same for every tool)."""

DIFFERENCES: Final = {
    "ttft": "vLLM stamps the first chunk with choices, content or not (a role-only first chunk makes TTFT "
            "the time to that chunk); tokometer stamps the first content-carrying event. The file cannot "
            "tell the two apart: the recomputed TTFT is vLLM's stamp.",
    "itl": "vLLM's ITL is every gap between chunks, pooled over requests, not divided by the tokens a chunk "
           "carried; tokometer's ITL divides each gap by its chunk's tokens, and its chunk_gap_ms is "
           "vLLM's ITL.",
    "tpot": "Both (last chunk - first chunk) / (output tokens - 1) when the first chunk carries one token; "
            "vLLM's latency ends at the last chunk, as tokometer's last_token does.",
    "throughput": "vLLM divides by the benchmark's whole duration (first send to the end of the gather); "
                  "tokometer by first send to last request end.",
}
NOT_RECOMPUTED: Final = {
    "itl": "tokens per chunk are not in the file: each chunk after the first is assumed to carry an equal "
           "share of output_len - 1, so ITL is the chunk gap over that share",
    "ttft_from_due": "the file gives no due times: due is taken as the send time",
    "client_lag": "the file gives no due times",
    "connect": "the file does not time connection set-up",
    "finish_reason": "the file does not say why an answer stopped",
}


def looks_like(data: Any) -> bool:
    """True for a mapping with vLLM's per-request lists (a file saved with ``--save-detailed``)."""
    return isinstance(data, Mapping) and "ttfts" in data and "itls" in data and "start_times" in data


def read(data: Any, path: Path) -> ImportedRun:
    """The run in a parsed vLLM ``bench serve`` result."""
    if not looks_like(data):
        raise ImportFormatError(f"{path}: not a vllm bench serve result saved with --save-detailed "
                                "(no per-request ttfts/itls/start_times)")
    n = len(as_list(data["ttfts"], path, "ttfts"))
    columns = {key: as_list(data.get(key), path, key, length=n) for key in _PER_REQUEST}
    records = [_record(i, {key: column[i] for key, column in columns.items()}, path) for i in range(n)]
    load: dict[str, Any] = {}
    concurrency = data.get("max_concurrency")
    rate = data.get("request_rate")
    if isinstance(rate, (int, float)) and not isinstance(rate, bool) and rate > 0:
        load = {"rate": float(rate), "arrival": "poisson" if data.get("burstiness", 1.0) == 1.0 else "gamma"}
        if concurrency is not None:
            load["max_concurrency"] = as_int(concurrency, path, "max_concurrency")
    elif concurrency is not None:
        load = {"concurrency": as_int(concurrency, path, "max_concurrency")}
    summary = {ours: float(value) for key, ours in _SUMMARY_KEYS.items()
               if isinstance(value := data.get(key), (int, float)) and not isinstance(value, bool)}
    version = data.get("vllm_version") or data.get("version")
    return ImportedRun(tool=TOOL, tool_version=str(version) if version else None, source=str(path),
                       model=str(data.get("model_id") or ""), target=str(data.get("base_url") or "vllm bench serve"),
                       steps=[ImportedStep(load, records)],
                       api="openai-chat" if "chat" in str(data.get("endpoint_type") or "") else "openai-completions",
                       tool_summary=summary, agrees=("ttft", "tpot", "e2e"), not_recomputed=dict(NOT_RECOMPUTED),
                       differences=dict(DIFFERENCES))


def _record(i: int, row: Mapping[str, Any], path: Path) -> RequestRecord:
    where = f"request {i}"
    error = row["errors"]
    if error is not None and not isinstance(error, str):
        raise ImportFormatError(f"{path}: errors[{i}] should be text, not {type(error).__name__}")
    sent = seconds_ns(as_float(row["start_times"], path, f"start_times[{i}]") or 0.0)
    record = RequestRecord(index=i, due_ns=sent, sent_ns=sent,
                           input_tokens=as_int(row["input_lens"], path, f"input_lens[{i}]", optional=True),
                           input_tokens_source="usage", finish_reason="unknown")
    if error:
        record.error, record.error_detail = "protocol", " ".join(error.split())[:300]
        record.end_ns = sent + seconds_ns(as_float(row["latencies"], path, f"latencies[{i}]") or 0.0)
        record.finish_reason = "error"
        return record
    ttft = as_float(row["ttfts"], path, f"ttfts[{i}] ({where})") or 0.0
    gaps = [as_float(g, path, f"itls[{i}]") or 0.0 for g in as_list(row["itls"], path, f"itls[{i}]")]
    latency = as_float(row["latencies"], path, f"latencies[{i}]") or 0.0
    output = as_int(row["output_lens"], path, f"output_lens[{i}]") or 0
    return streamed_record(i, sent_ns=sent, ttft_ns=seconds_ns(ttft), gaps_ns=[seconds_ns(g) for g in gaps],
                           end_ns=sent + seconds_ns(latency), output_tokens=output, input_tokens=record.input_tokens)
