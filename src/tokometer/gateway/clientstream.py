"""The client's side of a relayed answer: the response head, body writes gathered into sends, the end.

`ClientStream` wraps the ASGI ``send`` of one response. While the relay takes in the events one
upstream read brought, `put` gathers what the client gets (``batch``) and `flush` sends it in one
write; the ending (finish, usage, ``[DONE]``, the last chunk) is gathered the same way and goes out
with the response's end (`end`). It also watches the connection (`watch`): once the client is
``gone``, nothing more is written. `first_sent_ns` is when the first send after content arrived
left: the gateway's view of the client's first token.

Nothing here knows about upstreams or answers beyond the ``content`` list of the stream assembly
it is given, which says when the answer's first content is in.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from starlette.types import Message, Receive, Send

__all__ = ["ClientStream"]


class ClientStream:
    """One response to the client: head, gathered writes, end, or one JSON answer."""

    __slots__ = ("_send", "batch", "content", "first_sent_ns", "gone", "sent_head", "status")

    def __init__(self, send: Send) -> None:
        self._send = send
        self.gone = False
        """The client went away (`watch` saw ``http.disconnect``): nothing more is written."""
        self.sent_head = False
        self.status = 200
        self.first_sent_ns: int | None = None
        """When the first send after the answer's first content left (None: none did)."""
        self.batch: list[bytes] | None = None
        """While gathering: writes for the next send (`flush`, `end`); None: every write is a send."""
        self.content: list[Any] | None = None
        """The stream assembly's content events: the first send once it is not empty stamps
        `first_sent_ns`."""

    async def watch(self, receive: Receive, on_gone: Callable[[], Awaitable[None]]) -> None:
        """Read the request's messages until the client disconnects; then mark it ``gone`` and call
        ``on_gone``."""
        while True:
            message: Message = await receive()
            if message["type"] == "http.disconnect":
                self.gone = True
                await on_gone()
                return

    async def head(self, status: int, content_type: bytes, headers: list[tuple[bytes, bytes]]) -> None:
        self.status = status
        await self._send({"type": "http.response.start", "status": status,
                          "headers": [(b"content-type", content_type), (b"cache-control", b"no-cache"), *headers]})
        self.sent_head = True

    def put(self, data: bytes) -> None:
        """Gather ``data`` for the next send (only while gathering)."""
        if data and not self.gone:
            assert self.batch is not None
            self.batch.append(data)

    async def write(self, data: bytes) -> None:
        """Gather ``data`` while gathering; else send it now."""
        if not data or self.gone:
            return
        if self.batch is not None:
            self.batch.append(data)
            return
        await self._body(data, True)

    async def flush(self) -> None:
        """Send what was gathered (and go on gathering)."""
        batch = self.batch
        if batch:
            data = batch[0] if len(batch) == 1 else b"".join(batch)
            batch.clear()
            if not self.gone:
                await self._body(data, True)

    async def _body(self, data: bytes, more: bool) -> None:
        if self.first_sent_ns is None and self.content:
            self.first_sent_ns = time.perf_counter_ns()
        await self._send({"type": "http.response.body", "body": data, "more_body": more})

    async def end(self) -> None:
        """End the response, with whatever was gathered (one write: events, ``[DONE]``, the last chunk)."""
        data = b"".join(self.batch) if self.batch else b""
        self.batch = None
        with contextlib.suppress(OSError):
            await self._body(data, False)

    async def json(self, status: int, body: dict[str, Any], headers: list[tuple[bytes, bytes]]) -> None:
        """The whole response: one JSON body."""
        if self.content:
            self.first_sent_ns = time.perf_counter_ns()
        await self.head(status, b"application/json", headers)
        await self._send({"type": "http.response.body", "body": orjson.dumps(body), "more_body": False})
