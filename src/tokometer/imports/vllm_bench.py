"""Read ``vllm bench serve --save-result --save-detailed`` JSON into tokometer records.

The file's per-request lists (``start_times``, ``ttfts``, ``itls``, ``latencies``, ``input_lens``,
``output_lens``, ``errors``: one entry per request, seconds on the client's ``time.perf_counter``) give each
request's send time and the arrival of every streamed chunk, so TTFT, TPOT, E2E and the chunk gaps are
tokometer's own. What the file does not hold: how many tokens each chunk carried (the record assumes one in
the first chunk and the rest shared evenly, which makes TPOT exactly vLLM's ``(latency - ttft) /
(output_len - 1)``), whether the first chunk carried text (vLLM's chat backend stamps the first chunk with
``choices``, a role-only one included: a chat stream opens with one, so on the chat endpoint tokometer's
TTFT is taken at the second chunk, `CHAT_TTFT`), and when a request was due. Field names as vLLM 0.32
writes them.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
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
    as_text,
    duration_ns,
    stamp_ns,
    streamed_record,
    wall_clock,
)
from tokometer.records import RequestRecord
from tokometer.util.shown import quoted

__all__ = ["CHECKED_VERSIONS", "TOOL", "looks_like", "read"]

TOOL: Final = "vllm-bench-serve"
CHECKED_VERSIONS: Final = ("0.32.0",)
"""The vLLM versions whose ``bench serve`` files this reader was checked on (tests/fixtures/imports)."""
_DATE_FORMAT: Final = "%Y%m%d-%H%M%S"
"""vLLM's ``date``: the local time of the host that ran the benchmark."""
_PER_REQUEST: Final = ("start_times", "ttfts", "itls", "latencies", "input_lens", "output_lens", "errors")
_MS: Final = MAX_DURATION_NS / UNIT_NS["ms"]
_SUMMARY_KEYS: Final = (
    ("median_ttft_ms", "ttft_p50_ms", _MS), ("p99_ttft_ms", "ttft_p99_ms", _MS), ("mean_ttft_ms", "ttft_mean_ms", _MS),
    ("median_tpot_ms", "tpot_p50_ms", _MS), ("mean_tpot_ms", "tpot_mean_ms", _MS),
    ("median_itl_ms", "itl_p50_ms", _MS), ("mean_itl_ms", "itl_mean_ms", _MS), ("p99_itl_ms", "itl_p99_ms", _MS),
    ("median_e2el_ms", "e2e_p50_ms", _MS), ("output_throughput", "output_tok_s", MAX_RATE_PER_S),
    ("request_throughput", "requests_per_s", MAX_RATE_PER_S), ("duration", "duration_s", MAX_STAMP_NS / UNIT_NS["s"]))
"""vLLM's key, the name `ImportedRun.tool_summary` gives it (the same for every tool), and its largest value."""
_MAX_BURSTINESS: Final = 1e6
"""The largest gamma shape ``--burstiness`` may be: past it the arrivals are as regular as a fixed rate."""

DIFFERENCES: Final = {
    "ttft": "vLLM stamps the first chunk with choices, as tokometer stamps the first token: on the completions "
            "endpoint every chunk carries text, so the two agree.",
    "itl": "vLLM's ITL is every gap between chunks, pooled over requests, not divided by the tokens a chunk "
           "carried; tokometer's ITL divides each gap by its chunk's tokens, and its chunk_gap_ms is "
           "vLLM's ITL.",
    "tpot": "Both (last chunk - first chunk) / (output tokens - 1) when the first chunk carries one token; "
            "vLLM's latency ends at the last chunk, as tokometer's last_token does.",
    "throughput": "vLLM divides by the benchmark's whole duration (first send to the end of the gather); "
                  "tokometer by first send to last request end.",
}
CHAT_TTFT: Final = (
    "vLLM's chat client stops its TTFT at the first chunk with choices, content or not. A chat stream opens with a "
    "role-only chunk (vLLM's server always sends one), which carries no token: tokometer's TTFT runs to the "
    "next chunk, the first that can carry one ({shifted} of {n} requests), and its TPOT and chunk gaps from there. "
    "vLLM's TTFT is shorter, and its TPOT longer, by the gap between the two.")
"""How the recomputed TTFT of a chat endpoint's file differs from vLLM's."""
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
    events = EventCount(path)
    n = len(as_list(data["ttfts"], path, "ttfts"))
    events.add(n)
    columns = {key: as_list(data.get(key), path, key, length=n) for key in _PER_REQUEST}
    chat = "chat" in (_text(data, "endpoint_type", path) or _text(data, "backend", path) or "")
    read_rows = [_record(i, {key: column[i] for key, column in columns.items()}, path, events, chat) for i in range(n)]
    records = [record for record, _ in read_rows]
    role_only = sum(role for _, role in read_rows)
    version = _text(data, "vllm_version", path) or _text(data, "version", path)
    started_at, dated_from = _date(data, path)
    differences = dict(DIFFERENCES)
    if role_only:
        differences["ttft"] = CHAT_TTFT.format(shifted=role_only, n=n)
    return ImportedRun(tool=TOOL, tool_version=version, source=str(path), model=_text(data, "model_id", path) or "",
                       target=_text(data, "base_url", path) or "vllm bench serve",
                       steps=[ImportedStep(_load(data, path), records)],
                       api="openai-chat" if chat else "openai-completions",
                       tool_summary=_summary(data, path), agrees=("e2e",) if role_only else ("ttft", "tpot", "e2e"),
                       not_recomputed=dict(NOT_RECOMPUTED), differences=differences, started_at=started_at,
                       dated_from=dated_from)


def _date(data: Mapping[str, Any], path: Path) -> tuple[str | None, str]:
    """When the run started, from vLLM's ``date`` (the local time of the host that ran it, read in this
    host's zone); ``(None, "")`` when the file gives none."""
    text = _text(data, "date", path)
    if text is None:
        return None, ""
    try:
        seconds = datetime.strptime(text[:20], _DATE_FORMAT).timestamp()  # naive: this host's zone
    except (ValueError, OverflowError, OSError):
        raise ImportFormatError(f"{path}: date should be vLLM's YYYYMMDD-HHMMSS, not {quoted(text)}") from None
    return wall_clock(seconds, "vLLM's date (the local time it ran, read in this host's time zone)") or (None, "")


def _text(data: Mapping[str, Any], key: str, path: Path) -> str | None:
    """The text at ``key``; None when absent or empty."""
    return as_text(data.get(key), path, key, optional=True) or None


def _load(data: Mapping[str, Any], path: Path) -> dict[str, Any]:
    """The step's ``load``: a rate (``request_rate``; vLLM writes ``"inf"`` for none) and/or a concurrency."""
    concurrency = as_int(data.get("max_concurrency"), path, "max_concurrency", optional=True, positive=True)
    rate = data.get("request_rate")
    if rate is None or rate == "inf":
        return {} if concurrency is None else {"concurrency": concurrency}
    burstiness = as_float(data.get("burstiness"), path, "burstiness", most=_MAX_BURSTINESS, optional=True,
                          positive=True)
    load: dict[str, Any] = {"rate": as_float(rate, path, "request_rate", most=MAX_RATE_PER_S, positive=True),
                            "arrival": "poisson" if burstiness in (None, 1.0) else "gamma"}
    if concurrency is not None:
        load["max_concurrency"] = concurrency
    return load


def _summary(data: Mapping[str, Any], path: Path) -> dict[str, float]:
    """vLLM's own headline numbers, under `ImportedRun.tool_summary`'s names (those in the file)."""
    summary = {}
    for key, ours, most in _SUMMARY_KEYS:
        value = as_float(data.get(key), path, key, most=most, optional=True)
        if value is not None:
            summary[ours] = value
    return summary


def _record(i: int, row: Mapping[str, Any], path: Path, events: EventCount,
            chat: bool) -> tuple[RequestRecord, bool]:
    """Request ``i``, and whether its first chunk carried no token (``chat``: a role-only chunk can be first)."""
    where = f"request {i}"
    error = as_text(row["errors"], path, f"errors[{i}]", optional=True)
    sent = stamp_ns(row["start_times"], path, f"start_times[{i}]", unit="s") or 0
    latency = duration_ns(row["latencies"], path, f"latencies[{i}]", unit="s") or 0
    record = RequestRecord(index=i, due_ns=sent, sent_ns=sent,
                           input_tokens=as_int(row["input_lens"], path, f"input_lens[{i}]", optional=True),
                           input_tokens_source="usage", finish_reason="unknown")
    if error:
        record.error, record.error_detail = "protocol", " ".join(error.split())[:300]
        record.end_ns = sent + latency
        record.finish_reason = "error"
        return record, False
    ttft = duration_ns(row["ttfts"], path, f"ttfts[{i}] ({where})", unit="s") or 0
    itls = as_list(row["itls"], path, f"itls[{i}]")
    events.add(len(itls))
    gaps = [duration_ns(g, path, f"itls[{i}][{j}]", unit="s") or 0 for j, g in enumerate(itls)]
    output = as_int(row["output_lens"], path, f"output_lens[{i}]") or 0
    role_only = chat and bool(gaps)  # a chat stream opens with a role-only chunk: the first token comes next
    if role_only:
        ttft, gaps = ttft + gaps[0], gaps[1:]
    return streamed_record(i, where=f"{path}: {where}", sent_ns=sent, ttft_ns=ttft, gaps_ns=gaps,
                           end_ns=sent + latency, output_tokens=output, input_tokens=record.input_tokens), role_only
