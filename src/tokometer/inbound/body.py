"""Reading a client's request body within a size and a time limit, refusing before the rest of it is kept.

A body over the limit is never held in memory; one that is not all there within ``timeout_s`` of its
head (a client trickling it, or one that declared more than it sends), or that pauses longer than
``idle_timeout_s`` between two reads (nginx's ``client_body_timeout``), is `BodyTimeout` (408). The idle
deadline runs from the first read too, which is when uvicorn answers ``Expect: 100-continue``: a client
that asked for the 100 and then sends nothing is answered 408 after ``idle_timeout_s``.

Before the refusal (413) is sent, what the client is still sending is read and thrown away, up to
`DRAIN_BYTES` and `DRAIN_S`, stopping when the client pauses for `DRAIN_IDLE_S` (nginx's "lingering
close"): most clients (curl, Python's http.client, httpx) write the whole body before they read, and
closing on them mid-body makes the kernel send a reset that destroys the 413 on its way, so the
client would see "connection reset" instead of the reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import math

from starlette.requests import ClientDisconnect, Request

__all__ = ["DRAIN_BYTES", "DRAIN_S", "BodyTimeout", "BodyTooLarge", "discard_rest", "read_body"]

DRAIN_BYTES = 64 * 1024 * 1024
DRAIN_S = 5.0
DRAIN_IDLE_S = 0.5
"""A client that sends nothing for this long is not sending its body any more: answer it."""


class BodyTooLarge(Exception):
    """The body is over the server's ``limit`` (``setting``: where it is set, named in the message)."""

    def __init__(self, limit: int, declared: int | None = None, setting: str = "[server] max_body_bytes") -> None:
        size = f"{declared:,} bytes" if declared is not None else f"over {limit:,} bytes"
        super().__init__(f"the request body is {size}, more than this server takes ({limit:,} bytes, "
                         f"{setting}): send a smaller request")


class BodyTimeout(Exception):
    """The body did not arrive whole in time (``reason`` ``body_timeout``), or stopped arriving for
    longer than the idle deadline (``body_idle_timeout``)."""

    def __init__(self, timeout_s: float, received: int, idle: bool = False) -> None:
        self.reason = "body_idle_timeout" if idle else "body_timeout"
        if idle:
            super().__init__(f"the request body stopped arriving: nothing came for {timeout_s:g} s ({received:,} "
                             "bytes came before): send it at once")
        else:
            super().__init__(f"the request body did not arrive within {timeout_s:g} s ({received:,} bytes came): "
                             "send it at once")


async def read_body(request: Request, limit: int, timeout_s: float | None = None,
                    setting: str = "[server] max_body_bytes", *, idle_timeout_s: float | None = None) -> bytes:
    """The whole body, or BodyTooLarge as soon as it is known to be over ``limit`` (from Content-Length
    before reading anything, else while reading), or BodyTimeout when it is not all there within
    ``timeout_s`` or nothing of it comes for ``idle_timeout_s``. Raises starlette's ClientDisconnect if
    the client goes away mid-body."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge(limit, int(declared), setting)
    parts: list[bytes] = []
    size = 0
    loop = asyncio.get_running_loop()
    total_at = loop.time() + timeout_s if timeout_s is not None else math.inf
    idle_first = False  # which deadline the one timer is set to now

    def deadline() -> float | None:  # one timer, moved on after each read: the nearer of the two deadlines
        nonlocal idle_first
        idle_at = loop.time() + idle_timeout_s if idle_timeout_s is not None else math.inf
        idle_first = idle_at < total_at
        nearest = min(idle_at, total_at)
        return None if nearest == math.inf else nearest

    try:
        async with asyncio.timeout_at(deadline()) as timer:
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise BodyTooLarge(limit, setting=setting)
                parts.append(chunk)
                timer.reschedule(deadline())
    except TimeoutError:
        if idle_first:
            raise BodyTimeout(idle_timeout_s or 0.0, size, idle=True) from None
        raise BodyTimeout(timeout_s or 0.0, size) from None
    return b"".join(parts)


async def discard_rest(request: Request) -> None:
    """Read and drop the rest of a refused body (bounded by DRAIN_BYTES and DRAIN_S)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > DRAIN_BYTES:
        return  # too much to wait for: the client may see a reset instead of the 413

    async def drain() -> None:  # from the ASGI channel itself: read_body's stream() has been used up
        seen = 0
        while seen <= DRAIN_BYTES:
            async with asyncio.timeout(DRAIN_IDLE_S):
                message = await request.receive()
            if message["type"] != "http.request":
                return
            seen += len(message.get("body", b""))
            if not message.get("more_body", False):
                return

    with contextlib.suppress(TimeoutError, ClientDisconnect):
        async with asyncio.timeout(DRAIN_S):
            await drain()
