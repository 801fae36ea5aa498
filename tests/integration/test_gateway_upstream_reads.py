"""How the gateway reads an upstream's answer: events split and parsed as they are read, taken by the relay
all at once, and a failure found while reading raised after the events before it (a real raw-socket server
on loopback; `tokometer.gateway.upstream`)."""

from __future__ import annotations

import asyncio
import socket
import threading

import pytest

from tests.hostile_servers import hostile
from tokometer.gateway.config import UpstreamConfig
from tokometer.gateway.upstream import Upstream, UpstreamError

_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
_ENDING = b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
_BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True, "max_tokens": 16}


def _content(text: str) -> bytes:
    return b'data: {"choices":[{"index":0,"delta":{"content":"' + text.encode() + b'"}}]}\n\n'


def _apart(conn: socket.socket, stop: threading.Event) -> None:
    """Three content events in three writes 50 ms apart (three reads), then the ending, after the third has been
    taken (the client's next request would not come: the ending waits for ``stop`` or 2 s)."""
    conn.sendall(_HEAD)
    for text in ("a", "b", "c"):
        if stop.wait(0.05):
            return
        conn.sendall(_content(text))
    stop.wait(0.3)
    conn.sendall(_ENDING)


def _then_too_large(conn: socket.socket, stop: threading.Event) -> None:
    conn.sendall(_HEAD + _content("a") + _content("b"))
    stop.wait(0.05)
    conn.sendall(b'data: {"choices":[{"index":0,"delta":{"content":"' + b"y" * (2 * 1024 * 1024))
    stop.wait(5)


async def _open(url: str) -> Upstream:
    return Upstream(UpstreamConfig(name="u", url=url))


def test_events_of_several_reads_are_taken_at_once_in_order_with_their_own_stamps() -> None:
    async def scenario(url: str) -> tuple[list[str], list[int], list[str]]:
        upstream = await _open(url)
        try:
            call = await upstream.open(_BODY, "chat")
            await asyncio.sleep(0.4)  # the relay is busy elsewhere: three reads come meanwhile
            first = await call.take()
            assert first is not None
            rest: list[str] = []
            while (more := await call.take()) is not None:
                rest += [e.parsed.text if e.parsed is not None else "" for e in more]
            return ([e.parsed.text if e.parsed is not None else "" for e in first], [e.stamp for e in first],
                    rest)
        finally:
            await upstream.close()

    with hostile({"/": _apart}) as server:
        texts, stamps, rest = asyncio.run(scenario(server.url))
    assert texts == ["a", "b", "c"]
    assert stamps == sorted(stamps) and len(set(stamps)) == 3  # each event keeps the time its own read came
    assert rest[:1] == [""] and "a" not in rest  # the ending came after, in a take of its own


def test_a_failure_found_while_reading_is_raised_after_the_events_before_it() -> None:
    async def scenario(url: str) -> tuple[list[str], UpstreamError | None, int]:
        upstream = await _open(url)
        try:
            call = await upstream.open(_BODY, "chat")
            texts: list[str] = []
            failure = None
            try:
                while (events := await call.take()) is not None:
                    texts += [e.parsed.text for e in events if e.parsed is not None]
            except UpstreamError as exc:
                failure = exc
            return texts, failure, call.response.received
        finally:
            await upstream.close()

    with hostile({"/": _then_too_large}) as server:
        texts, failure, received = asyncio.run(scenario(server.url))
    assert texts == ["a", "b"]
    assert failure is not None and failure.category == "protocol" and "1.0 MiB" in failure.detail
    assert received < 4 * 1024 * 1024  # no longer read once the event passed its limit


@pytest.mark.parametrize("status", [429, 503])
def test_an_error_answer_is_raised_with_its_body_before_any_event(status: int) -> None:
    def answer(conn: socket.socket, stop: threading.Event) -> None:
        body = b'{"error":{"message":"slow down"}}'
        conn.sendall(b"HTTP/1.1 %d Busy\r\nContent-Type: application/json\r\nRetry-After: 7\r\nContent-Length: %d"
                     b"\r\n\r\n%s" % (status, len(body), body))

    async def scenario(url: str) -> UpstreamError:
        upstream = await _open(url)
        try:
            with pytest.raises(UpstreamError) as caught:
                await upstream.open(_BODY, "chat")
            return caught.value
        finally:
            await upstream.close()

    with hostile({"/": answer}) as server:
        error = asyncio.run(scenario(server.url))
    assert error.status == status and "slow down" in error.body and error.retry_after_s == 7
