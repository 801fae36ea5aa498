"""Requests as rows and back: the per-event stamps packed as int64 / float64 arrays."""

from __future__ import annotations

import dataclasses
import typing
from array import array
from typing import Any, Final

from tokometer.records import RequestRecord, ServerTiming

__all__ = ["RECORD_HINTS", "SERVER_HINTS", "record_row", "row_record"]

RECORD_HINTS: Final[dict[str, Any]] = typing.get_type_hints(RequestRecord)
"""Each `RequestRecord` field's declared type: what a row's values (and its ``workload``) must be."""
SERVER_HINTS: Final[dict[str, Any]] = typing.get_type_hints(ServerTiming)


def record_row(run_id: int, r: RequestRecord) -> dict[str, Any]:
    """The `requests` row of one finished request (its answer's text is not kept)."""
    return {
        "run_id": run_id,
        "step": r.step,
        "idx": r.index,
        "warmup": r.warmup,
        "due_ns": r.due_ns,
        "connect_ns": r.connect_ns,
        "sent_ns": r.sent_ns,
        "first_byte_ns": r.first_byte_ns,
        "first_token_ns": r.first_token_ns,
        "last_token_ns": r.last_token_ns,
        "end_ns": r.end_ns,
        "chunk_count": r.chunk_count,
        "input_tokens": r.input_tokens,
        "input_tokens_source": r.input_tokens_source,
        "output_tokens": r.output_tokens,
        "output_tokens_source": r.output_tokens_source,
        "requested_output_tokens": r.requested_output_tokens,
        "status": r.status,
        "finish_reason": r.finish_reason,
        "error": r.error,
        "error_detail": r.error_detail.replace("\x00", "\ufffd") or None,  # PostgreSQL's text holds no NUL
        "server": dataclasses.asdict(r.server) if r.server else None,
        "event_ns": array("q", r.event_ns).tobytes(),
        "event_tokens": array("d", r.event_tokens).tobytes(),
        "workload": r.workload(),
    }


def row_record(row: Any) -> RequestRecord:
    """A `requests` row back as the `RequestRecord` it was made from."""
    event_ns = array("q")
    event_ns.frombytes(row.event_ns or b"")
    event_tokens = array("d")
    event_tokens.frombytes(row.event_tokens or b"")
    record = RequestRecord(
        index=row.idx,
        step=row.step,
        warmup=row.warmup,
        due_ns=row.due_ns,
        connect_ns=row.connect_ns,
        sent_ns=row.sent_ns,
        first_byte_ns=row.first_byte_ns,
        first_token_ns=row.first_token_ns,
        last_token_ns=row.last_token_ns,
        end_ns=row.end_ns,
        event_ns=list(event_ns),
        event_tokens=list(event_tokens),
        chunk_count=row.chunk_count,
        input_tokens=row.input_tokens,
        input_tokens_source=row.input_tokens_source,
        output_tokens=row.output_tokens,
        output_tokens_source=row.output_tokens_source,
        requested_output_tokens=row.requested_output_tokens,
        status=row.status,
        finish_reason=row.finish_reason,
        error=row.error,
        error_detail=row.error_detail or "",
        server=_server_timing(row.server),
    )
    record.set_workload(getattr(row, "workload", None))  # a store older than version 4 has no such column
    return record


_SERVER_FIELDS = frozenset(f.name for f in dataclasses.fields(ServerTiming))


def _server_timing(stored: dict[str, Any] | None) -> ServerTiming | None:
    """A stored ServerTiming; fields older versions kept that it no longer has (``queue_ms``) are dropped."""
    if not stored:
        return None
    return ServerTiming(**{k: v for k, v in stored.items() if k in _SERVER_FIELDS})
