"""Split a stamped byte stream into events, after the stream has ended.

The client records ``chunks`` (bytes as they arrived) and ``stamps`` (the
arrival time of each chunk). An event's arrival time is the stamp of the chunk
that completed it: the moment the client could first have acted on it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

__all__ = ["iter_ndjson", "iter_sse"]

_SSE_BOUNDARY = re.compile(rb"\r?\n\r?\n")
_LINE = re.compile(rb"\r?\n")


def _chunk_ends(chunks: Sequence[bytes]) -> list[int]:
    ends: list[int] = []
    total = 0
    for chunk in chunks:
        total += len(chunk)
        ends.append(total)
    return ends


def _iter_frames(
    chunks: Sequence[bytes], stamps: Sequence[int], boundary: re.Pattern[bytes]
) -> Iterator[tuple[int, bytes]]:
    if not chunks:
        return
    data = b"".join(chunks)
    ends = _chunk_ends(chunks)
    chunk_index = 0
    start = 0
    for match in boundary.finditer(data):
        frame_end = match.end()
        while ends[chunk_index] < frame_end:
            chunk_index += 1
        frame = data[start : match.start()]
        start = frame_end
        if frame:
            yield stamps[chunk_index], frame
    tail = data[start:]
    if tail.strip():
        yield stamps[-1], tail


def iter_sse(chunks: Sequence[bytes], stamps: Sequence[int]) -> Iterator[tuple[int, bytes]]:
    """Yield ``(arrival_ns, data)`` for each SSE event that has a ``data`` field.

    Multi-line data is joined with newlines; ``event:``/``id:``/comment lines are
    ignored, as the SSE specification says.
    """
    for stamp, frame in _iter_frames(chunks, stamps, _SSE_BOUNDARY):
        if frame.startswith(b"data:") and b"\n" not in frame:
            payload = frame[5:]
            yield stamp, payload[1:] if payload.startswith(b" ") else payload
            continue
        parts: list[bytes] = []
        for line in _LINE.split(frame):
            if line.startswith(b"data:"):
                value = line[5:]
                parts.append(value[1:] if value.startswith(b" ") else value)
        if parts:
            yield stamp, b"\n".join(parts)


def iter_ndjson(chunks: Sequence[bytes], stamps: Sequence[int]) -> Iterator[tuple[int, bytes]]:
    """Yield ``(arrival_ns, line)`` for each non-empty line."""
    for stamp, frame in _iter_frames(chunks, stamps, _LINE):
        line = frame.strip()
        if line:
            yield stamp, line
