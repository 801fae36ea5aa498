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
    ImportedRun,
    ImportedStep,
    ImportFormatError,
    as_float,
    as_int,
    as_list,
    as_map,
    seconds_ns,
)
from tokometer.records import RequestRecord

__all__ = ["TOOL", "looks_like", "read"]

TOOL: Final = "guidellm"

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


def looks_like(data: Any) -> bool:
    """True for a mapping with GuideLLM's ``benchmarks`` list and ``metadata.guidellm_version``."""
    return (isinstance(data, Mapping) and isinstance(data.get("benchmarks"), list)
            and isinstance(data.get("metadata"), Mapping) and "guidellm_version" in data["metadata"])


def read(data: Any, path: Path) -> ImportedRun:
    """The run in a parsed GuideLLM benchmarks report: one step per benchmark."""
    if not looks_like(data):
        raise ImportFormatError(f"{path}: not a GuideLLM benchmarks report (no benchmarks list with "
                                "metadata.guidellm_version)")
    benchmarks = as_list(data["benchmarks"], path, "benchmarks")
    steps = [_step(k, as_map(b, path, f"benchmarks[{k}]"), path) for k, b in enumerate(benchmarks)]
    first = as_map(benchmarks[0], path, "benchmarks[0]") if benchmarks else {}
    backend = (first.get("config") or {}).get("backend") or {}
    version = data["metadata"].get("guidellm_version")
    return ImportedRun(tool=TOOL, tool_version=str(version) if version else None, source=str(path),
                       model=str(backend.get("model") or ""), target=str(backend.get("target") or "guidellm"),
                       steps=steps, api="openai-chat" if "chat" in str(backend.get("request_format") or "chat")
                       else "openai-completions", tool_summary=_summary(first),
                       agrees=("ttft", "e2e"), not_recomputed=dict(NOT_RECOMPUTED), differences=dict(DIFFERENCES))


def _summary(benchmark: Mapping[str, Any]) -> dict[str, float]:
    """The first benchmark's medians of its successful requests (ms), as GuideLLM computed them."""
    metrics = benchmark.get("metrics")
    out: dict[str, float] = {}
    if not isinstance(metrics, Mapping):
        return out
    for key, ours, scale in _SUMMARY:
        block = metrics.get(key)
        ok = block.get("successful") if isinstance(block, Mapping) else None
        if isinstance(ok, Mapping) and isinstance(ok.get("median"), (int, float)):
            out[ours] = float(ok["median"]) * scale
    return out


def _load(config: Mapping[str, Any]) -> dict[str, Any]:
    found = config.get("strategy")
    strategy: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    kind = strategy.get("type_")
    if kind == "concurrent" and isinstance(strategy.get("streams"), int):
        return {"concurrency": strategy["streams"]}
    if kind == "synchronous":
        return {"concurrency": 1, "synchronous": True}
    if kind in ("constant", "poisson") and isinstance(strategy.get("rate"), (int, float)):
        return {"rate": float(strategy["rate"]), "arrival": kind}
    return {"guidellm_strategy": str(kind)} if kind else {}


def _step(k: int, benchmark: Mapping[str, Any], path: Path) -> ImportedStep:
    requests = as_map(benchmark.get("requests"), path, f"benchmarks[{k}].requests")
    records: list[RequestRecord] = []
    for status in ("successful", "errored", "incomplete"):
        for row in as_list(requests.get(status) or [], path, f"benchmarks[{k}].requests.{status}"):
            records.append(_record(len(records), k, status, as_map(row, path, f"a {status} request"), path))
    config = benchmark.get("config")
    return ImportedStep(_load(config if isinstance(config, Mapping) else {}), records)


def _record(i: int, k: int, status: str, row: Mapping[str, Any], path: Path) -> RequestRecord:
    where = f"benchmarks[{k}].requests.{status}[{i}]"
    info = as_map(row.get("info"), path, f"{where}.info")
    timings = as_map(info.get("timings"), path, f"{where}.info.timings")

    def stamp(name: str) -> int:
        value = as_float(timings.get(name), path, f"{where}.info.timings.{name}", optional=True)
        return seconds_ns(value) if value else 0

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
        record.finish_reason = "cancelled" if status == "incomplete" else "error"
        return record
    first, last = stamp("first_token_iteration"), stamp("last_token_iteration")
    if not sent or not first or first < sent or last < first:
        raise ImportFormatError(f"{path}: {where}: request_start, first_token_iteration and "
                                "last_token_iteration should be set and in that order")
    record.first_byte_ns = record.first_token_ns = first
    record.last_token_ns = last
    record.end_ns = max(record.end_ns, last)
    record.event_ns, record.event_tokens = [first], [float(min(record.output_tokens or 0, 1))]
    record.chunk_count = as_int(timings.get("token_iterations"), path, f"{where}.token_iterations",
                                optional=True) or 1
    record.status = 200
    return record
