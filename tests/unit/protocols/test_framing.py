"""SSE and NDJSON framing (`tokometer.protocols.common.framing`):
events split across chunks get the stamp of the chunk that
completed them."""

from __future__ import annotations

from tokometer.protocols.common.framing import iter_payloads


def iter_sse(chunks: list[bytes], stamps: list[int]) -> list[tuple[int, bytes]]:
    return list(iter_payloads(chunks, stamps, "sse"))


def iter_ndjson(chunks: list[bytes], stamps: list[int]) -> list[tuple[int, bytes]]:
    return list(iter_payloads(chunks, stamps, "ndjson"))


def test_sse_event_split_across_chunks_takes_completing_stamp() -> None:
    chunks = [b'data: {"a"', b': 1}\n', b'\ndata: [DONE]\n\n']
    stamps = [100, 200, 300]
    assert list(iter_sse(chunks, stamps)) == [(300, b'{"a": 1}'), (300, b"[DONE]")]


def test_sse_several_events_in_one_chunk_share_its_stamp() -> None:
    chunks = [b"data: 1\n\ndata: 2\n\n", b"data: 3\n\n"]
    assert list(iter_sse(chunks, [10, 20])) == [(10, b"1"), (10, b"2"), (20, b"3")]


def test_sse_crlf_comments_and_multiline_data() -> None:
    chunks = [b": keep-alive\r\n\r\nevent: message\r\ndata: a\r\ndata: b\r\n\r\ndata:c\n\n"]
    assert list(iter_sse(chunks, [5])) == [(5, b"a\nb"), (5, b"c")]


def test_sse_unterminated_tail_is_kept_with_last_stamp() -> None:
    assert list(iter_sse([b"data: 1\n\n", b"data: 2"], [1, 2])) == [(1, b"1"), (2, b"2")]


def test_boundary_split_between_chunks() -> None:
    chunks = [b"data: 1\n", b"\n", b"data: 2\n\n"]
    assert list(iter_sse(chunks, [1, 2, 3])) == [(2, b"1"), (3, b"2")]


def test_ndjson_lines() -> None:
    chunks = [b'{"a":1}\n{"b"', b':2}\n\n', b'{"c":3}']
    assert list(iter_ndjson(chunks, [1, 2, 3])) == [(1, b'{"a":1}'), (2, b'{"b":2}'), (3, b'{"c":3}')]


def test_empty_stream() -> None:
    assert list(iter_sse([], [])) == []


def _reference(data: bytes, framing: str) -> list[bytes]:
    """Events of ``data`` split in one piece (re.split over the whole buffer, the obvious reading)."""
    import re

    pattern = re.compile(rb"\r?\n\r?\n" if framing == "sse" else rb"\n")
    events, start = [], 0
    for match in pattern.finditer(data):
        events.append(data[start:match.end()])
        start = match.end()
    return events + ([data[start:]] if data[start:].strip() else [])


def test_splitter_gives_the_same_events_for_every_way_of_cutting_the_bytes() -> None:
    """Carrying only the tail over must find the delimiters a whole-buffer scan finds, CRLF split anywhere."""
    import random

    from tokometer.protocols.common.framing import EventSplitter

    rng = random.Random(7)
    pieces = [b"data: a\n\n", b"data: b\r\n\r\n", b": c\r\n", b"data: d\n\r\n", b"x", b"\n", b"\r", b"\r\n"]
    for framing in ("sse", "ndjson"):
        for _ in range(300):
            data = b"".join(rng.choice(pieces) for _ in range(rng.randint(1, 30)))
            splitter = EventSplitter(framing)
            got: list[bytes] = []
            at = 0
            while at < len(data):
                step = rng.randint(1, 7)
                got += splitter.feed(data[at:at + step])
                at += step
            got += splitter.flush()
            assert got == _reference(data, framing), data


def test_splitter_refuses_an_event_past_its_limit_and_counts_the_open_bytes() -> None:
    import pytest

    from tokometer.protocols.common.framing import EventSplitter, EventTooLarge

    splitter = EventSplitter("sse", max_event_bytes=1024)
    assert splitter.feed(b"data: 1\n\ndata: ") == [b"data: 1\n\n"]
    assert splitter.open_bytes == 6
    splitter.feed(b"x" * 900)
    with pytest.raises(EventTooLarge, match="passed 1 KiB without ending"):
        splitter.feed(b"x" * 200)
    with pytest.raises(EventTooLarge):  # a whole event in one piece, too large, is refused as well
        EventSplitter("ndjson", max_event_bytes=10).feed(b"y" * 20 + b"\n")


def test_splitter_is_linear_in_the_bytes_fed() -> None:
    """12 MiB without a delimiter in 64 KiB pieces took 18 s when every piece rescanned the buffer."""
    import time

    from tokometer.protocols.common.framing import EventSplitter

    splitter = EventSplitter("sse")
    piece = b"y" * 65536
    started = time.perf_counter()
    for _ in range(192):
        assert splitter.feed(piece) == []
    assert splitter.feed(b"\n\n")[0].endswith(b"y\n\n")
    assert time.perf_counter() - started < 1.0


def test_event_watch_counts_events_and_stops_past_its_limits() -> None:
    from tokometer.protocols.common.framing import EventWatch

    watch = EventWatch("sse", max_event_bytes=100, max_events=3)
    assert watch.feed(b"data: 1\n") is None
    assert watch.feed(b"\ndata: 2\r\n\r") is None
    assert watch.feed(b"\ndata: 3\n\n") is None
    assert (watch.events, watch.open_bytes) == (3, 0)
    assert watch.feed(b"data: 4\n\n") == "4 events, more than the 3 allowed"
    big = EventWatch("ndjson", max_event_bytes=100)
    assert big.feed(b"{}\n" + b"z" * 99) is None
    assert big.feed(b"zz") == ("a line of the stream passed 100 bytes without ending (101 bytes so far): the server "
                               "lost its framing or sends events larger than the limit")


def test_event_watch_does_not_count_sse_comments() -> None:
    """Some servers and proxies send ``: keep-alive`` comments while a request waits in their queue: they carry
    no token, so they must not bring a stream closer to the "server ignored max_tokens" limit."""
    from tokometer.protocols.common.framing import EventWatch

    watch = EventWatch("sse", max_events=2)
    for _ in range(100):
        assert watch.feed(b": PROCESSING\n\n") is None
    assert watch.feed(b"data: 1\n\n: ping\n") is None
    assert watch.feed(b"\ndata: 2\n\n:") is None
    assert watch.feed(b" ping\r\n\r\ndata") is None
    assert watch.events == 2
    # the open event began with "data", so the ": 3" that completes it is no comment: a third event
    assert watch.feed(b": 3\n\n") == "3 events, more than the 2 allowed"


def test_event_watch_stops_a_comment_flood_and_counts_comment_prefixed_events() -> None:
    """A stream of nothing but comments took bench to 3 GB (they counted nowhere): past 1,024 it is a flood.
    An event whose comment lines precede a data line carries a token: it counts as an event (towards
    "server ignored max_tokens"), however the chunks cut it."""
    from tokometer.protocols.common.framing import MAX_COMMENT_EVENTS, EventWatch

    flood = EventWatch("sse", max_events=10)
    reasons = [flood.feed(b": ping\n\n") for _ in range(MAX_COMMENT_EVENTS + 1)]
    assert reasons[:-1] == [None] * MAX_COMMENT_EVENTS
    assert reasons[-1] is not None and "comment events" in reasons[-1]
    prefixed = EventWatch("sse", max_events=3)
    assert prefixed.feed(b": p\n: p\ndata: 1\n\n") is None  # the one-event fast path
    assert prefixed.feed(b": p\nda") is None
    assert prefixed.feed(b"ta: 2\n\n: p\ndata") is None  # "data:" cut across two chunks
    assert prefixed.feed(b": 3\n\n") is None
    assert (prefixed.events, prefixed.comments) == (3, 0)
    assert prefixed.feed(b": p\ndata: 4\n\n") == "4 events, more than the 3 allowed"


def test_named_events_give_their_data_line_only() -> None:
    """OpenAI Responses and Anthropic name each event (``event: TYPE``); the reader takes the data line alone,
    however the event is spelt (the one-data-line form has a fast path of its own)."""
    from tokometer.protocols.common.framing import sse_payload

    cases = {
        b'event: ping\ndata: {"type": "ping"}\n\n': b'{"type": "ping"}',
        b'event: ping\r\ndata: {"type": "ping"}\r\n\r\n': b'{"type": "ping"}',
        b"event: x\ndata:y\n\n": b"y",
        b"event: x\nid: 7\n\n": None,
        b"event: x\ndata: a\ndata: b\n\n": b"a\nb",
        b"event: x\ndata: \n\n": b"",
        b"id: 1\nevent: x\ndata: z\n\n": b"z",
    }
    assert {event: sse_payload(event) for event in cases} == cases
