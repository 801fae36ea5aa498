"""Split an upstream's byte stream into events as the bytes arrive (SSE or NDJSON).

The gateway relays whole events, each exactly as the upstream sent it, so it
can look at every event (content? usage? an error?) without re-encoding any.
"""

from __future__ import annotations

from typing import Literal

__all__ = ["EventSplitter", "sse_payload"]


class EventSplitter:
    """Feed bytes, get back the complete events they finish (delimiters included)."""

    def __init__(self, framing: Literal["sse", "ndjson"]) -> None:
        self._buffer = b""
        self._ndjson = framing == "ndjson"

    def feed(self, data: bytes) -> list[bytes]:
        buffer = self._buffer + data if self._buffer else data
        events: list[bytes] = []
        start = 0
        if self._ndjson:
            while (end := buffer.find(b"\n", start)) >= 0:
                if buffer[start:end].strip():
                    events.append(buffer[start:end + 1])
                start = end + 1
        else:
            while True:
                end = buffer.find(b"\n\n", start)
                crlf = buffer.find(b"\r\n\r\n", start)
                if crlf >= 0 and (end < 0 or crlf < end):
                    end, width = crlf, 4
                else:
                    width = 2
                if end < 0:
                    break
                events.append(buffer[start:end + width])
                start = end + width
        self._buffer = buffer[start:]
        return events

    def flush(self) -> list[bytes]:
        """Whatever is left when the stream ends (a last event without its delimiter)."""
        rest, self._buffer = self._buffer, b""
        return [rest] if rest.strip() else []


def sse_payload(event: bytes) -> bytes | None:
    """The ``data`` of one SSE event (multi-line data joined), or ``None`` if it has none."""
    if event.startswith(b"data:") and event.count(b"\n") <= 2 and b"\ndata:" not in event:
        value = event[5:].strip(b"\r\n")
        return value[1:] if value.startswith(b" ") else value
    parts = []
    for line in event.splitlines():
        if line.startswith(b"data:"):
            value = line[5:]
            parts.append(value[1:] if value.startswith(b" ") else value)
    return b"\n".join(parts) if parts else None
