"""Splitting a byte stream into events: SSE (``text/event-stream``) and NDJSON, one splitter for all.

`EventSplitter` is fed bytes as they arrive and returns each event they complete, exactly as the
server sent it (delimiter included), so that the gateway can look at an event and still relay its
bytes unchanged. The bench, which stamps chunks on arrival and parses only after the stream has
ended, feeds the same splitter from its recorded chunks (`iter_payloads`): an event's arrival time
is the stamp of the chunk that completed it, the moment a client could first have acted on it.

SSE events end at a blank line; a line ends with LF or CRLF (the rare lone-CR line end is not
supported). An event's ``data`` lines are joined with newlines; ``event:``, ``id:``, ``retry:`` and
comment lines carry nothing tokometer reads (the specification's reading). NDJSON events are the
non-empty lines.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from typing import Literal

__all__ = ["EventSplitter", "Framing", "iter_payloads", "ndjson_payload", "payload_reader", "sse_payload"]

Framing = Literal["sse", "ndjson"]

_BOUNDARY: dict[str, re.Pattern[bytes]] = {"sse": re.compile(rb"\r?\n\r?\n"), "ndjson": re.compile(rb"\n")}
_LINE = re.compile(rb"\r?\n")


class EventSplitter:
    """Feed bytes, get back the complete events they finish (delimiters included)."""

    __slots__ = ("_boundary", "_buffer")

    def __init__(self, framing: Framing) -> None:
        self._buffer = b""
        self._boundary = _BOUNDARY[framing]

    def feed(self, data: bytes) -> list[bytes]:
        buffer = self._buffer + data if self._buffer else data
        events: list[bytes] = []
        start = 0
        for match in self._boundary.finditer(buffer):  # C speed; one event a chunk is the usual case
            end = match.end()
            events.append(buffer[start:end])
            start = end
        self._buffer = buffer[start:] if start else buffer
        return events

    def flush(self) -> list[bytes]:
        """Whatever is left when the stream ends (a last event without its delimiter)."""
        rest, self._buffer = self._buffer, b""
        return [rest] if rest.strip() else []


def sse_payload(event: bytes) -> bytes | None:
    """The ``data`` of one SSE event (multi-line data joined with newlines), or None if it has none."""
    if event.startswith(b"data: ") and event.endswith(b"\n\n") and event.count(b"\n") == 2:
        return event[6:-2]  # the common case, first: one "data: " line ended by LF LF
    parts = []
    for line in _LINE.split(event):
        if line.startswith(b"data:"):
            value = line[5:]
            parts.append(value[1:] if value.startswith(b" ") else value)
    return b"\n".join(parts) if parts else None


def ndjson_payload(event: bytes) -> bytes | None:
    """One NDJSON line without its line end, or None for a blank line."""
    line = event.strip()
    return line or None


def payload_reader(framing: Framing) -> Callable[[bytes], bytes | None]:
    """`sse_payload` or `ndjson_payload`."""
    return sse_payload if framing == "sse" else ndjson_payload


def iter_payloads(chunks: Sequence[bytes], stamps: Sequence[int], framing: Framing) -> Iterator[tuple[int, bytes]]:
    """``(arrival_ns, payload)`` for each event of a recorded stream that carries one."""
    splitter = EventSplitter(framing)
    payload = payload_reader(framing)
    for chunk, stamp in zip(chunks, stamps, strict=True):
        for event in splitter.feed(chunk):
            if (value := payload(event)) is not None:
                yield stamp, value
    if stamps:
        for event in splitter.flush():
            if (value := payload(event)) is not None:
                yield stamps[-1], value
