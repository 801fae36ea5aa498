"""SSE and NDJSON framing (`tokometer.wire.framing`): events split across chunks get the stamp of the chunk that
completed them."""

from __future__ import annotations

from tokometer.wire.framing import iter_payloads


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
