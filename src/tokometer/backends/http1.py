"""A small HTTP/1.1 client for streaming responses, built for honest timestamps.

Why not aiohttp on this path: measured on this project's 2-core machine against
the simulator, aiohttp spent 0.3-0.8 ms between ``session.post()`` and the
request reaching the socket, and each arriving chunk waited for a coroutine
wake-up before it could be stamped; both land in TTFT. Here the request is
stamped immediately before the one ``transport.write`` that sends it, and every
chunk is stamped in ``data_received``, the first Python code that sees it, before
the C parser (httptools, the parser uvicorn uses) even looks at it.

What it does: keep-alive connection pooling per host, chunked and
content-length bodies, TLS, connect/idle/total timeouts (one watchdog for all
requests, not a timer per chunk), a retry when a pooled connection turns out to
be closed before any byte came back. What it does not: proxies, redirects,
compression, HTTP/2.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from time import perf_counter_ns
from urllib.parse import urlsplit

import httptools

__all__ = ["ConnectError", "HttpPool", "HttpTimeout", "PeerReset", "StreamedResponse"]

_WATCH_INTERVAL_S = 0.05
_STALE_LIMIT = 3


class ConnectError(OSError):
    """No connection could be made."""


class HttpTimeout(TimeoutError):
    """A connect, idle or total limit was passed."""


class PeerReset(ConnectionError):
    """The connection closed before the response ended."""


@dataclass(slots=True)
class StreamedResponse:
    """One response: status, headers, and the body as stamped chunks."""

    status: int = 0
    sent_ns: int = 0
    """Stamped just before the request's one socket write."""
    connect_ns: int = 0
    """Time spent opening a new connection for this request (0 when one was reused)."""
    headers: dict[str, str] = field(default_factory=dict)
    first_byte_ns: int = 0
    chunks: list[bytes] = field(default_factory=list)
    stamps: list[int] = field(default_factory=list)
    end_ns: int = 0
    on_head: Callable[[StreamedResponse], None] | None = None
    """Called once the status and headers are in (the gateway starts relaying then)."""
    on_chunk: Callable[[bytes, int], None] | None = None
    """When set, each body chunk goes here with its stamp instead of into ``chunks``/``stamps``."""


class _Connection(asyncio.Protocol):
    """One TCP connection; serves one request at a time."""

    def __init__(self, pool: HttpPool) -> None:
        self.pool = pool
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.reused = False
        self._now = 0
        self._response: StreamedResponse | None = None
        self._done: asyncio.Future[None] | None = None
        self._parser: httptools.HttpResponseParser | None = None
        self._header_name = b""
        self._keep_alive = False
        self.last_data_ns = 0
        self.deadline_ns = 0
        self.idle_ns = 0
        self.got_bytes = False

    # -- asyncio.Protocol ------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's transports are not subclasses

    def data_received(self, data: bytes) -> None:
        now = self._now = perf_counter_ns()
        self.last_data_ns = now
        self.got_bytes = True
        if self._parser is None:
            self._fail(PeerReset("unexpected bytes on an idle connection"))
            return
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(PeerReset("the server switched protocols"))
        except httptools.HttpParserError as exc:
            self._fail(PeerReset(f"malformed HTTP response: {exc}"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.pool._forget(self)
        if self._done is not None and not self._done.done():
            self._fail(PeerReset(f"connection closed mid-response{': ' + str(exc) if exc else ''}"))

    # -- httptools callbacks ---------------------------------------------------------------
    def on_header(self, name: bytes, value: bytes) -> None:
        assert self._response is not None
        self._response.headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        assert self._response is not None and self._parser is not None
        self._response.status = self._parser.get_status_code()
        self._response.first_byte_ns = self._now
        if self._response.on_head is not None:
            self._response.on_head(self._response)

    def on_body(self, body: bytes) -> None:
        response = self._response
        assert response is not None
        if response.on_chunk is not None:
            response.on_chunk(body, self._now)
            return
        response.chunks.append(body)
        response.stamps.append(self._now)

    def on_message_complete(self) -> None:
        assert self._response is not None and self._parser is not None
        self._response.end_ns = self._now
        self._keep_alive = self._parser.should_keep_alive()
        self._parser = None
        if self._done is not None and not self._done.done():
            self._done.set_result(None)

    # -- used by the pool ------------------------------------------------------------------
    def _fail(self, error: BaseException) -> None:
        if self._done is not None and not self._done.done():
            self._done.set_exception(error)
        self.abort()

    def abort(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    def check_time(self, now: int) -> None:
        """Called by the watchdog: fail the request if a limit has passed."""
        if self._done is None or self._done.done():
            return
        if self.deadline_ns and now > self.deadline_ns:
            self._fail(HttpTimeout("the request took longer than its total timeout"))
        elif self.idle_ns and now - self.last_data_ns > self.idle_ns:
            what = "response headers" if not self.got_bytes else "more of the stream"
            self._fail(HttpTimeout(f"no {what} within the idle timeout"))

    def start(self, request: bytes, response: StreamedResponse, idle_ns: int, total_ns: int) -> asyncio.Future[None]:
        assert self.transport is not None
        loop = asyncio.get_running_loop()
        self._response = response
        self._parser = httptools.HttpResponseParser(self)
        self._done = loop.create_future()
        self.got_bytes = False
        now = perf_counter_ns()
        self.last_data_ns = now
        self.idle_ns = idle_ns
        self.deadline_ns = now + total_ns if total_ns else 0
        self.transport.write(request)
        return self._done

    def finish(self) -> bool:
        """After a response: True if the connection can serve another request."""
        self._done = None
        self._response = None
        return self._keep_alive and not self.closed


class HttpPool:
    """Keep-alive connections to one origin (scheme://host:port)."""

    def __init__(self, base_url: str, *, connect_timeout: float = 10.0, idle_timeout: float = 60.0,
                 total_timeout: float = 600.0) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.base_path = parts.path.rstrip("/")
        self.ssl: ssl.SSLContext | None = ssl.create_default_context() if parts.scheme == "https" else None
        default_port = (parts.scheme == "https" and self.port == 443) or (parts.scheme == "http" and self.port == 80)
        self.host_header = self.host if default_port else f"{self.host}:{self.port}"
        if ":" in self.host and not default_port:
            self.host_header = f"[{self.host}]:{self.port}"
        self.connect_timeout = connect_timeout
        self.idle_ns = int(idle_timeout * 1e9)
        self.total_ns = int(total_timeout * 1e9)
        self._idle: list[_Connection] = []
        self._busy: set[_Connection] = set()
        self._stale = 0
        self.reuse = True
        """Cleared after repeated stale kept-alive connections: some servers (llama.cpp's among
        them) promise keep-alive yet close the connection after each streamed answer."""
        self._watchdog: asyncio.Task[None] | None = None

    def _forget(self, conn: _Connection) -> None:
        if conn in self._idle:
            self._idle.remove(conn)

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        try:
            _, conn = await asyncio.wait_for(
                loop.create_connection(lambda: _Connection(self), self.host, self.port, ssl=self.ssl),
                self.connect_timeout,
            )
        except TimeoutError:
            raise HttpTimeout(f"could not connect to {self.host}:{self.port} within {self.connect_timeout:g} s") \
                from None
        except OSError as exc:
            raise ConnectError(f"cannot connect to {self.host}:{self.port}: {exc.strerror or exc}") from None
        return conn

    async def _acquire(self, fresh: bool = False) -> _Connection:
        while self._idle and self.reuse and not fresh:
            conn = self._idle.pop()
            if not conn.closed:
                conn.reused = True
                return conn
        conn = await self._connect()
        conn.reused = False
        return conn

    def _ensure_watchdog(self) -> None:
        if self._watchdog is None or self._watchdog.done():
            self._watchdog = asyncio.get_running_loop().create_task(self._watch())

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(_WATCH_INTERVAL_S)
            now = perf_counter_ns()
            for conn in list(self._busy):
                conn.check_time(now)

    def encode(self, method: str, path: str, body: bytes, headers: Mapping[str, str]) -> bytes:
        """The request's bytes, ready for one write."""
        lines = [f"{method} {self.base_path}{path} HTTP/1.1", f"Host: {self.host_header}",
                 f"Content-Length: {len(body)}"]
        lines.extend(f"{name}: {value}" for name, value in headers.items())
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body

    async def request(self, request: bytes, response: StreamedResponse) -> None:
        """Send ``request`` and read the whole response into ``response``.

        Raises ConnectError, HttpTimeout or PeerReset; on cancellation the
        connection is dropped.
        """
        self._ensure_watchdog()
        for attempt in (0, 1):
            before = perf_counter_ns()
            conn = await self._acquire(fresh=attempt > 0)
            response.connect_ns = 0 if conn.reused else perf_counter_ns() - before
            self._busy.add(conn)
            response.sent_ns = perf_counter_ns()
            done = conn.start(request, response, self.idle_ns, self.total_ns)
            try:
                await done
            except PeerReset:
                if attempt == 0 and conn.reused and not conn.got_bytes:
                    self._stale += 1
                    if self._stale >= _STALE_LIMIT:
                        self.reuse = False
                    continue  # a stale keep-alive connection: retry once on a fresh one
                raise
            except BaseException:
                conn.abort()
                raise
            finally:
                self._busy.discard(conn)
            if conn.finish() and self.reuse:
                self._idle.append(conn)
            else:
                conn.abort()
            return

    async def close(self) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watchdog
        for conn in self._idle + list(self._busy):
            conn.abort()
        self._idle.clear()
        self._busy.clear()
