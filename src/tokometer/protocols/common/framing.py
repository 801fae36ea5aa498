"""Splitting a byte stream into events: SSE (``text/event-stream``) and NDJSON, one splitter for all.

`EventSplitter` is fed bytes as they arrive and returns each event they complete, exactly as the
server sent it (delimiter included), so that the gateway can look at an event and still relay its
bytes unchanged. The bench, which stamps chunks on arrival and parses only after the stream has
ended, feeds the same splitter from its recorded chunks (`iter_payloads`): an event's arrival time
is the stamp of the chunk that completed it, the moment a client could first have acted on it.

SSE events end at a blank line; a line ends with LF or CRLF (the rare lone-CR line end is not
supported). An event's ``data`` lines are joined with newlines; ``event:``, ``id:``, ``retry:`` and
comment lines carry nothing tokometer reads (the specification's reading). NDJSON events are the
non-empty lines. A ``json`` answer (embeddings, rerank: no stream) is one event, the whole body, capped at
`MAX_BODY_BYTES` rather than an event's limit.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from typing import Literal

__all__ = ["EXTRA_EVENTS", "MAX_BODY_BYTES", "MAX_COMMENT_EVENTS", "MAX_EVENT_BYTES", "EventSplitter",
           "EventTooLarge", "EventWatch", "Framing", "event_limit", "iter_payloads", "ndjson_payload", "payload_reader",
           "sse_payload"]

Framing = Literal["sse", "ndjson", "json"]

_BOUNDARY: dict[str, re.Pattern[bytes]] = {"sse": re.compile(rb"\r?\n\r?\n"), "ndjson": re.compile(rb"\n")}
_LINE = re.compile(rb"\r?\n")

MAX_EVENT_BYTES = 1024 * 1024
"""The default limit on one event's size (1 MiB): a token's event is a few hundred bytes, one with
log-probabilities a few KiB; an event past this is a server that lost its framing, not an answer."""

MAX_COMMENT_EVENTS = 1024
"""The most SSE comment events (``: keep-alive``) read from one stream: a server sends one every few seconds
while a request waits, a handful in all; a flood of them is a server that sends nothing else, and parsing
millions of them would hold the reader's CPU for seconds (they are counted apart from the events that carry
tokens, whose limit comes from ``max_tokens``)."""

EXTRA_EVENTS = 64
"""Events allowed past twice ``max_tokens`` (role, usage, final and keep-alive events, and more)."""


def event_limit(max_tokens: int | None) -> int:
    """The most events read from a stream that asked for ``max_tokens`` (0: no limit, none asked):
    twice ``max_tokens`` plus 64. A token is at most one event on every engine tokometer knows, so a
    stream past this is a server that ignored ``max_tokens`` (the bench's reader and the gateway's alike)."""
    return 2 * max_tokens + EXTRA_EVENTS if max_tokens else 0


MAX_BODY_BYTES = 64 * 1024 * 1024
"""The limit on a whole ``json`` answer (64 MiB): a batch of 256 embeddings of 4096 floats as JSON text is
about 20 MiB; past this the answer is a ``protocol`` error, not read on."""

_CARRY = 3
"""How many of the last bytes scanned may begin a delimiter still to be completed (``\\r\\n\\r`` is the
longest unfinished one): the next search starts there, never at the open event's beginning."""


def _event_ends(framing: str, data: bytes, start: int) -> list[int]:
    """Where each event that ends in ``data[start:]`` ends (just past its delimiter).

    A plain substring search (memchr speed) where it is exact: always for NDJSON, and for SSE
    where the bytes hold no CR and no run of three LFs; the regular expression otherwise."""
    if framing == "json":
        return []  # the whole body is one event, ended by the end of the answer
    if framing == "ndjson":
        delimiter, step = b"\n", 1
    elif b"\r" not in data and b"\n\n\n" not in data:
        delimiter, step = b"\n\n", 2
    else:
        return [match.end() for match in _BOUNDARY["sse"].finditer(data, start)]
    ends = []
    at = data.find(delimiter, start)
    while at >= 0:
        at += step
        ends.append(at)
        at = data.find(delimiter, at)
    return ends


class EventTooLarge(ValueError):
    """An event grew past the splitter's limit without ending."""


def _too_large(framing: str, size: int, limit: int) -> EventTooLarge:
    what = {"sse": "an event", "ndjson": "a line"}.get(framing, "the answer")
    return EventTooLarge(f"{what} of the stream passed {_size(limit)} without ending ({_size(size)} so far): the "
                         "server lost its framing or sends events larger than the limit")


def _size(n: int) -> str:
    if n >= 1048576:
        return f"{n / 1048576:.1f} MiB"
    return f"{n / 1024:.0f} KiB" if n >= 1024 else f"{n} bytes"


class EventSplitter:
    """Feed bytes, get back the complete events they finish (delimiters included).

    Linear in the bytes fed: each `feed` searches only the new bytes (and the last few of the open
    event, which may begin a delimiter), never the open event again; the open event's pieces are
    joined once, when it ends. With ``max_event_bytes``, an event that grows past it raises
    `EventTooLarge` (the caller classifies the stream as a protocol error; the splitter is then spent).
    """

    __slots__ = ("_framing", "_open", "_open_bytes", "_tail", "max_event_bytes")

    def __init__(self, framing: Framing, max_event_bytes: int = 0) -> None:
        self._open: list[bytes] = []
        """The pieces of the event begun and not yet ended."""
        self._open_bytes = 0
        self._tail = b""
        """The open event's last bytes (at most `_CARRY`): where a delimiter may have begun."""
        self._framing = framing
        self.max_event_bytes = max_event_bytes

    @property
    def open_bytes(self) -> int:
        """The size of the event begun and not yet ended."""
        return self._open_bytes

    def feed(self, data: bytes) -> list[bytes]:
        if self._open:
            return self._feed_open(data)
        events: list[bytes] = []  # the usual case, inline: nothing carried over, whole events in the chunk
        start = 0
        for end in _event_ends(self._framing, data, 0):
            events.append(data[start:end])
            start = end
        if start < len(data) or (self.max_event_bytes and len(data) > self.max_event_bytes):
            self._keep(data, start, events)
        return events

    def _feed_open(self, data: bytes) -> list[bytes]:
        window = self._tail + data
        ends = _event_ends(self._framing, window, 0) if b"\n" in window else []  # memchr first: no LF, no search
        if not ends:
            self._open.append(data)
            self._open_bytes += len(data)
            self._tail = window[-_CARRY:]
            if self.max_event_bytes and self._open_bytes > self.max_event_bytes:
                raise _too_large(self._framing, self._open_bytes, self.max_event_bytes)
            return []
        cut = ends[0] - len(self._tail)  # > 0: the tail alone held no delimiter
        self._open.append(data[:cut])
        first = b"".join(self._open)
        self._open.clear()
        self._open_bytes, self._tail = 0, b""
        events = [first]
        start = cut
        for end in ends[1:]:
            end -= len(window) - len(data)
            events.append(data[start:end])
            start = end
        self._keep(data, start, events)
        return events

    def _keep(self, data: bytes, start: int, events: list[bytes]) -> None:
        """Carry ``data[start:]`` over as the open event; check the limit."""
        if start < len(data):
            rest = data[start:] if start else data
            self._open.append(rest)
            self._open_bytes = len(rest)
            self._tail = rest[-_CARRY:]
        limit = self.max_event_bytes
        if limit and any(len(event) > limit for event in events):
            raise _too_large(self._framing, max(map(len, events)), limit)
        if limit and self._open_bytes > limit:
            raise _too_large(self._framing, self._open_bytes, limit)

    def flush(self) -> list[bytes]:
        """Whatever is left when the stream ends (a last event without its delimiter)."""
        rest = b"".join(self._open)
        self._open.clear()
        self._open_bytes, self._tail = 0, b""
        return [rest] if rest.strip() else []


class EventWatch:
    """Counts a stream's events as its bytes arrive, and the size of the one still open, keeping none.

    For a reader that keeps the raw bytes for later (the bench stamps chunks and parses after the
    stream): `feed` is linear in the new bytes and says why to stop reading, or None. Stops when an
    event grows past ``max_event_bytes``, when more than ``max_events`` events came (0: no limit), or
    more than `MAX_COMMENT_EVENTS` SSE comment events (``: keep-alive``, which some servers send while a
    request waits): those carry no token and are counted apart.
    """

    __slots__ = ("_edge", "_first", "_framing", "_open_data", "_tail", "comments", "events", "max_event_bytes",
                 "max_events", "open_bytes")

    def __init__(self, framing: Framing, max_event_bytes: int = MAX_EVENT_BYTES, max_events: int = 0) -> None:
        self._framing = framing
        self._tail = b""
        self._first = b""
        """The open event's first byte (b"" before it has one)."""
        self._open_data = False
        """The open event, begun with ``:``, has had a data line (it is no comment event)."""
        self._edge = b""
        """The last 4 bytes fed: where a ``data:`` the next bytes complete may have begun."""
        self.events = 0
        self.comments = 0
        self.open_bytes = 0
        self.max_event_bytes = max_event_bytes
        self.max_events = max_events

    def feed(self, data: bytes) -> str | None:
        if (not self._tail and self._framing == "sse" and data[-2:] == b"\n\n" and data.count(b"\n\n") == 1
                and b"\r" not in data and b"\n\n\n" not in data):
            # the common chunk: exactly one whole event, bare LF, nothing open before it (half the work)
            if data[0] != 58 or b"data:" in data:  # ":" begins a comment event, unless a data line follows
                self.events += 1
                if self.max_events and self.events > self.max_events:
                    return f"{self.events} events, more than the {self.max_events} allowed"
            else:
                self.comments += 1
                if self.comments > MAX_COMMENT_EVENTS:
                    return _too_many_comments()
            self._first = self._edge = b""
            self.open_bytes = 0
            return None
        if not self._first:
            self._first = data[:1]
        window = self._tail + data if self._tail else data
        end = 0
        if b"\n" in window:  # memchr first: a run without LF (a huge event) costs no search
            ends = _event_ends(self._framing, window, 0)
            if ends:
                if self._framing == "ndjson":
                    self.events += len(ends)
                else:
                    self._count_sse(window, ends, len(window) - len(data))
                end = ends[-1]
                self.open_bytes = len(window) - end
            else:
                self.open_bytes += len(data)
        else:
            self.open_bytes += len(data)
        if self._first == b":" and not self._open_data:
            self._open_data = b"data:" in (window[end:] if end else self._edge + data)
        self._edge = (self._edge + data)[-4:]
        self._tail = window[max(end, len(window) - _CARRY):] if end < len(window) else b""
        if self.max_event_bytes and self.open_bytes > self.max_event_bytes:
            return str(_too_large(self._framing, self.open_bytes, self.max_event_bytes))
        if self.max_events and self.events > self.max_events:
            return f"{self.events} events, more than the {self.max_events} allowed"
        if self.comments > MAX_COMMENT_EVENTS:
            return _too_many_comments()
        return None

    def _count_sse(self, window: bytes, ends: list[int], lead: int) -> None:
        """Count the SSE events ending at ``ends``: a comment event (``:`` first, no data line) apart. ``window``
        is the new bytes after ``lead`` carried ones; a data line may have begun in the bytes fed before
        (``_edge``: a ``data:`` holds no line end, so one that crosses into the new bytes is the open event's)."""
        first, start, has_data = self._first, 0, self._open_data
        for at in ends:
            segment = window[start:at] if start else self._edge + window[lead:at]
            if first == b":" and not has_data and b"data:" not in segment:
                self.comments += 1
            else:
                self.events += 1
            first, start, has_data = window[at:at + 1], at, False
        self._first = first
        self._open_data = False


def _too_many_comments() -> str:
    return (f"more than {MAX_COMMENT_EVENTS} SSE comment events (': ...') and nothing in them: a server that "
            "floods keep-alive comments")


def sse_payload(event: bytes) -> bytes | None:
    """The ``data`` of one SSE event (multi-line data joined with newlines), or None if it has none."""
    if event.startswith(b"data: ") and event.endswith(b"\n\n") and event.count(b"\n") == 2:
        return event[6:-2]  # the common case, first: one "data: " line ended by LF LF
    if event.startswith(b"event: ") and event.endswith(b"\n\n") and event.count(b"\n") == 3 \
            and b"\r" not in event:
        at = event.find(b"\ndata: ")  # a named event (OpenAI Responses, Anthropic): "event: X", one data line
        if at > 0:
            return event[at + 7:-2]
    if event[:1] == b":" and b"data:" not in event:
        return None  # a comment event (a keep-alive), without a data line
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
    """`sse_payload`, or `ndjson_payload` (a ``json`` answer too: the body, stripped)."""
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
