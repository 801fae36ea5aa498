"""A small HTTP/1.1 client for streaming responses, built for honest timestamps.

Why not aiohttp on this path: measured on this project's 2-core machine against
the simulator, aiohttp spent 0.3-0.8 ms between ``session.post()`` and the
request reaching the socket, and each arriving chunk waited for a coroutine
wake-up before it could be stamped; both land in TTFT. Here the request is
stamped immediately before the one ``transport.write`` that sends it, and every
chunk is stamped in ``data_received``, the first Python code that sees it, before
the C parser (httptools, the parser uvicorn uses) even looks at it.

What it does (RFC 9112): keep-alive connection pooling per origin; bodies
delimited by Content-Length, by chunked coding (extensions ignored, trailer
fields kept apart in ``trailers``) or by the server closing the connection
(HTTP/1.0 and ``Connection: close`` servers without a length: a clean close
after the head ends the body, a reset or a close before the head does not);
interim 1xx heads (100 Continue, 103 Early Hints) skipped; header values
trimmed of surrounding whitespace and repeated fields joined with ", "; limits
of 64 KiB and 500 fields on a response head; every response's read budget
(`tokometer.util.readbudget`): its bytes, everything counted (head, chunk-size lines and
extensions, trailers, comments, events: one addition per socket read, checked before the
parser sees the bytes), at most 128 KiB of framing between two pieces of body, 100
trailer fields, and the total timeout as a deadline for the whole response; and, where
the caller sets them on the `StreamedResponse`, a limit on the body's size and on a
stream's events (`EventWatch`: one event's size, their number). Past any of them the
request fails with a `ProtocolViolation` (an `HttpTimeout` for time) rather than
waiting or growing; IPv6 literal hosts; TLS
(`TlsOptions`: system trust store, a CA bundle, or no checks); ``HTTP_PROXY`` /
``HTTPS_PROXY`` / ``NO_PROXY`` (`tokometer.client.proxy`: absolute-form
requests, CONNECT tunnels for https); connect/idle/total timeouts (one watchdog
for all requests, not a timer per chunk); a retry when a pooled connection
turns out to be closed before any byte came back; flow control for a consumer
that falls behind (`StreamedResponse.pause` / `resume`: the socket is no longer
read, so TCP pushes back on the server, and the idle timeout waits meanwhile).

What it does not: redirects (a 3xx is the caller's error to report: POST is not
re-sent), compression, HTTP/2, request bodies other than one buffer.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from time import perf_counter_ns
from urllib.parse import urlsplit

import httptools

from tokometer.client.proxy import Proxy, proxy_for
from tokometer.client.tls import TlsOptions
from tokometer.protocols.common.framing import EventWatch
from tokometer.records import ErrorCategory
from tokometer.util.readbudget import (
    MAX_FRAMING_RUN_BYTES,
    MAX_TRAILER_FIELDS,
    UNSIZED_BUDGET_BYTES,
    framing_run_too_long,
    mib,
    over_budget,
)
from tokometer.util.shown import clipped

__all__ = ["MAX_ERROR_BODY_BYTES", "MAX_HEAD_BYTES", "MAX_HEAD_FIELDS", "MAX_SMALL_BODY_BYTES", "TLS_TRUST_HINT",
           "ConnectError", "HttpPool", "HttpTimeout", "PeerReset", "ProtocolViolation", "StreamedResponse",
           "TlsOptions", "transport_error_category"]

_WATCH_INTERVAL_S = 0.05
_STALE_LIMIT = 3
MAX_HEAD_BYTES = 64 * 1024
"""The longest response head (status line and header fields) accepted."""
MAX_HEAD_FIELDS = 500
"""The most header fields accepted in one response head."""
MAX_SMALL_BODY_BYTES = 16 * 1024 * 1024
"""The largest answer to a small request (a model list, ``/props``, ``/metrics``, a non-streamed answer):
a server with thousands of models or label sets is still far below."""
MAX_ERROR_BODY_BYTES = 1024 * 1024
"""The largest body of an answer that is not 2xx, where a response has any limit (an error page)."""
TLS_TRUST_HINT = ("trust its CA (bench --ca-bundle FILE; ca_bundle for a gateway upstream) or, for a test server "
                  "only, turn checks off (bench --insecure; verify = false)")


class ConnectError(OSError):
    """No connection could be made."""


class HttpTimeout(TimeoutError):
    """A connect, idle or total limit was passed."""


class PeerReset(ConnectionError):
    """The connection closed before the response ended."""


class ProtocolViolation(PeerReset):
    """The response broke HTTP/1.1 or one of this client's limits (the connection is dropped)."""


def transport_error_category(exc: BaseException) -> ErrorCategory:
    """The error category of an exception raised by `HttpPool.request` (the one map bench and gateway use)."""
    if isinstance(exc, HttpTimeout):
        return "timeout"
    if isinstance(exc, ProtocolViolation):
        return "protocol"
    if isinstance(exc, ConnectError):
        return "connect"
    return "reset"


class _Stop(Exception):
    """Raised from a parser callback to stop parsing; the reason is kept on the connection."""


@dataclass(slots=True)
class StreamedResponse:
    """One response: status, headers, and the body as stamped chunks."""

    status: int = 0
    sent_ns: int = 0
    """Stamped just before the request's one socket write."""
    connect_ns: int = 0
    """Time spent opening a new connection for this request (0 when one was reused)."""
    headers: dict[str, str] = field(default_factory=dict)
    """Header fields, names lower-cased, values trimmed; repeated fields joined with ", "."""
    trailers: dict[str, str] = field(default_factory=dict)
    """Trailer fields after a chunked body."""
    http_version: str = ""
    first_byte_ns: int = 0
    chunks: list[bytes] = field(default_factory=list)
    stamps: list[int] = field(default_factory=list)
    end_ns: int = 0
    on_head: Callable[[StreamedResponse], None] | None = None
    """Called once the status and headers are in (the gateway starts relaying then)."""
    on_chunk: Callable[[bytes, int], None] | None = None
    """When set, each body chunk goes here with its stamp instead of into ``chunks``/``stamps``."""
    max_body_bytes: int = 0
    """The largest body accepted (0: no limit; bodies that are not 2xx are then limited only with a
    ``watch``). Past it the request fails with a `ProtocolViolation`; what came is kept."""
    watch: EventWatch | None = None
    """For a 2xx stream kept in ``chunks``: counts its events as they arrive and stops the reading
    when one grows past its size limit or there are too many (`EventWatch`)."""
    body_bytes: int = 0
    max_bytes: int = UNSIZED_BUDGET_BYTES
    """The read budget: the most bytes the whole response may take, head, framing and trailers included
    (`tokometer.util.readbudget`); past it the request fails with a `ProtocolViolation` naming it."""
    max_bytes_setting: str = ""
    """The option or key that raises ``max_bytes``, for the error (empty: none, the budget is far past any
    real answer)."""
    received: int = 0
    """Bytes read for this response so far, everything counted."""
    _conn: _Connection | None = None
    """The connection reading this response, while it does (for `pause` and `resume`)."""

    def pause(self) -> None:
        """Stop reading the body: the consumer of ``on_chunk`` is behind. The server's writes then fill the
        socket's buffers and TCP stops it; the idle timeout does not run while paused (the total one does)."""
        if self._conn is not None:
            self._conn.set_reading(False)

    def resume(self) -> None:
        """Read the body again after `pause` (the idle timeout restarts now)."""
        if self._conn is not None:
            self._conn.set_reading(True)


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
        self._keep_alive = False
        self._head_done = False
        self._interim = False
        self._close_delimited = False
        self._head_fields = 0
        self._violation = ""
        self._received = self._body = self._received_mark = self._body_mark = self._next_check = 0
        """Bytes read for the response and of them body bytes, both at the last checkpoint, and the count of bytes
        read at which the next checkpoint comes (`_checkpoint`: the budget and the framing run)."""
        self._budget = 0
        self._tunnel: asyncio.Future[None] | None = None
        self._tunnel_buffer = bytearray()
        self.last_data_ns = 0
        self.deadline_ns = 0
        self.total_s = 0.0
        self.idle_ns = 0
        self.got_bytes = False
        self.paused = False
        """Reading was paused by the response's consumer (`StreamedResponse.pause`)."""

    # -- asyncio.Protocol ------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's transports are not subclasses
        if self.pool.receive_buffer:
            sock = transport.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.pool.receive_buffer)

    def data_received(self, data: bytes) -> None:
        now = self._now = perf_counter_ns()
        self.last_data_ns = now
        self.got_bytes = True
        parser = self._parser
        if parser is None:
            if self._tunnel is not None:
                self._tunnel_data(data)
            else:
                self._fail(PeerReset("unexpected bytes on an idle connection"))
            return
        received = self._received = self._received + len(data)
        if received > self._next_check and self._checkpoint(data, received):
            return
        try:
            parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(ProtocolViolation("the server switched protocols (HTTP 101), which a streaming "
                                         "completion cannot use"))
            return
        except httptools.HttpParserError as exc:
            self._fail(ProtocolViolation(self._violation or f"malformed HTTP response: {exc}"))
            return
        if not self._head_done and received > MAX_HEAD_BYTES and self._done is not None:  # all of it head so far
            self._fail(ProtocolViolation(f"the response head is longer than {MAX_HEAD_BYTES // 1024} KiB "
                                         "without ending: is this an HTTP server?"))

    def _checkpoint(self, data: bytes, received: int) -> bool:
        """Every `MAX_FRAMING_RUN_BYTES` read, and at the budget (one comparison per read until then): fail the
        request (True, ``data`` not parsed but what fits the budget) past the budget, or when what was read
        since the last checkpoint was framing (a head, chunk-size lines, extensions, trailers) and no body."""
        if received > self._budget:
            self._over_budget(data)
            return True
        before = received - len(data)
        framing = before - self._received_mark - (self._body - self._body_mark)
        if framing > MAX_FRAMING_RUN_BYTES and self._head_done and self._done is not None:
            self._fail(ProtocolViolation(framing_run_too_long(framing)))
            return True
        self._received_mark, self._body_mark = before, self._body
        self._next_check = min(self._budget, received + MAX_FRAMING_RUN_BYTES)
        return False

    def _over_budget(self, data: bytes) -> None:
        """The response passed its read budget: the parser is fed only up to it (what fits is kept), then the
        request fails naming the budget."""
        response = self._response
        assert response is not None and self._parser is not None
        fits = len(data) - (self._received - self._budget)
        if fits > 0 and self._head_done:
            with contextlib.suppress(httptools.HttpParserError, httptools.HttpParserUpgrade):
                self._parser.feed_data(data[:fits])
        if self._done is not None and not self._done.done():
            self._fail(ProtocolViolation(over_budget(self._budget, response.max_bytes_setting or "")))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.pool._forget(self)
        if self._tunnel is not None and not self._tunnel.done():
            self._tunnel.set_exception(ConnectError("the proxy closed the connection during CONNECT"))
        if self._done is None or self._done.done():
            return
        if exc is None and self._head_done and self._close_delimited and not self._interim:
            # RFC 9112 6.3 rule 8: a response with neither Content-Length nor Transfer-Encoding
            # ends when the server closes the connection.
            self._now = perf_counter_ns()
            self._complete(keep_alive=False)
            return
        where = "before the response head" if not self._head_done else "mid-response"
        self._fail(PeerReset(f"connection closed {where}{': ' + str(exc) if exc else ''}"))

    # -- httptools callbacks ---------------------------------------------------------------
    def on_header(self, name: bytes, value: bytes) -> None:
        response = self._response
        assert response is not None
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1").strip(" \t")
        if self._head_done:  # a chunked body's trailer fields
            if len(response.trailers) >= MAX_TRAILER_FIELDS:
                self._violation = f"the response has more than {MAX_TRAILER_FIELDS} trailer fields"
                raise _Stop
            response.trailers[key] = text
            return
        self._head_fields += 1
        if self._head_fields > MAX_HEAD_FIELDS:
            self._violation = f"the response has more than {MAX_HEAD_FIELDS} header fields"
            raise _Stop
        if len(name) + len(value) > MAX_HEAD_BYTES:
            self._violation = (f"a response header ({clipped(key)}) is longer than {MAX_HEAD_BYTES // 1024} KiB")
            raise _Stop
        previous = response.headers.get(key)
        response.headers[key] = text if previous is None else f"{previous}, {text}"  # RFC 9110 5.3

    def on_headers_complete(self) -> None:
        response = self._response
        assert response is not None and self._parser is not None
        status = self._parser.get_status_code()
        if 100 <= status < 200:  # 100 Continue, 103 Early Hints: an interim head, the real one follows
            self._interim = True
            response.headers.clear()
            self._head_fields = 0
            return
        self._head_done = True
        response.status = status
        response.http_version = self._parser.get_http_version()
        response.first_byte_ns = self._now
        headers = response.headers
        self._close_delimited = (status not in (204, 304) and "content-length" not in headers
                                 and "chunked" not in headers.get("transfer-encoding", "").lower())
        if response.on_head is not None:
            response.on_head(response)

    def on_body(self, body: bytes) -> None:
        response = self._response
        assert response is not None
        self._body += len(body)
        if response.on_chunk is not None:
            response.on_chunk(body, self._now)
            return
        response.chunks.append(body)
        response.stamps.append(self._now)
        if response.watch is not None or response.max_body_bytes:
            self._limit(response, body)

    def _limit(self, response: StreamedResponse, body: bytes) -> None:
        """Stop reading (`_Stop`, a `ProtocolViolation`) a body past its size or event limits."""
        response.body_bytes = self._body
        ok = 200 <= response.status < 300
        limit = response.max_body_bytes if ok else min(response.max_body_bytes or MAX_ERROR_BODY_BYTES,
                                                       MAX_ERROR_BODY_BYTES)
        if limit and response.body_bytes > limit:
            self._violation = (f"the answer passed {mib(limit)} (HTTP {response.status}) without ending: "
                               "is this the server meant?")
            raise _Stop
        if ok and response.watch is not None and (why := response.watch.feed(body)):
            self._violation = why
            raise _Stop

    def on_message_complete(self) -> None:
        assert self._parser is not None
        if self._interim:
            self._interim = False
            return
        self._complete(keep_alive=self._parser.should_keep_alive())

    # -- used by the pool ------------------------------------------------------------------
    def _complete(self, keep_alive: bool) -> None:
        assert self._response is not None
        self._response.end_ns = self._now
        self._response.received = self._received
        self._keep_alive = keep_alive
        self._parser = None
        if self._done is not None and not self._done.done():
            self._done.set_result(None)

    def _fail(self, error: BaseException) -> None:
        if self._response is not None:
            self._response.received = self._received
        if self._done is not None and not self._done.done():
            self._done.set_exception(error)
        self.abort()

    def abort(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    def set_reading(self, on: bool) -> None:
        """Pause (``on`` False) or resume reading the socket; resuming restarts the idle clock."""
        if on == (not self.paused) or self.closed or self.transport is None:
            return
        self.paused = not on
        if on:
            self.last_data_ns = perf_counter_ns()
            self.transport.resume_reading()
        else:
            self.transport.pause_reading()

    def check_time(self, now: int) -> None:
        """Called by the watchdog: fail the request if a limit has passed."""
        if self._done is None or self._done.done():
            return
        if self.deadline_ns and now > self.deadline_ns:
            what = "the response head" if not self._head_done else "the answer's end"
            self._fail(HttpTimeout(f"the request took longer than its total timeout ({self.total_s:g} s): "
                                   f"{what} had not come{' (bytes did, a trickle)' if self.got_bytes else ''}"))
        elif self.idle_ns and not self.paused and now - self.last_data_ns > self.idle_ns:
            what = "response headers" if not self.got_bytes else "more of the stream"
            self._fail(HttpTimeout(f"no {what} within the idle timeout"))

    def start(self, request: bytes, response: StreamedResponse, idle_ns: int, total_ns: int) -> asyncio.Future[None]:
        assert self.transport is not None
        loop = asyncio.get_running_loop()
        self._response = response
        response._conn = self
        self._parser = httptools.HttpResponseParser(self)
        self._done = loop.create_future()
        self._head_done = self._interim = self._close_delimited = False
        self._head_fields = 0
        self._received = self._body = self._received_mark = self._body_mark = 0
        self._budget = response.max_bytes
        self._next_check = min(self._budget, MAX_FRAMING_RUN_BYTES)
        self._violation = ""
        self.got_bytes = False
        now = perf_counter_ns()
        self.last_data_ns = now
        self.idle_ns = idle_ns
        self.deadline_ns = now + total_ns if total_ns else 0
        self.total_s = total_ns / 1e9
        self.transport.write(request)
        return self._done

    def finish(self) -> bool:
        """After a response: True if the connection can serve another request."""
        self._done = None
        if self._response is not None:
            self._response._conn = None
        self._response = None
        self.set_reading(True)  # a consumer that paused an answer which then ended: the next one is read
        return self._keep_alive and not self.closed

    # -- CONNECT tunnels through a proxy ---------------------------------------------------
    async def open_tunnel(self, authority: str, authorization: str | None, what: str) -> None:
        """Ask the proxy for a tunnel to ``authority`` (host:port); raise ConnectError if refused."""
        assert self.transport is not None
        self._tunnel = asyncio.get_running_loop().create_future()
        lines = [f"CONNECT {authority} HTTP/1.1", f"Host: {authority}"]
        if authorization:
            lines.append(f"Proxy-Authorization: {authorization}")
        self.transport.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        try:
            await self._tunnel
        except ConnectError as exc:
            raise ConnectError(f"{what}: {exc}") from None
        finally:
            self._tunnel = None

    def _tunnel_data(self, data: bytes) -> None:
        assert self._tunnel is not None
        self._tunnel_buffer += data
        end = self._tunnel_buffer.find(b"\r\n\r\n")
        if end < 0:
            if len(self._tunnel_buffer) > MAX_HEAD_BYTES:
                self._tunnel.set_exception(ConnectError("the proxy's answer to CONNECT has no end"))
            return
        status_line = bytes(self._tunnel_buffer[:end]).split(b"\r\n", 1)[0].decode("latin-1")
        parts = status_line.split(" ", 2)
        if not self._tunnel.done():
            if len(parts) >= 2 and parts[0].startswith("HTTP/1.") and parts[1].startswith("2"):
                self._tunnel.set_result(None)
            else:
                self._tunnel.set_exception(ConnectError(f"the proxy refused CONNECT ({status_line.strip()})"))
        del self._tunnel_buffer[:]


class HttpPool:
    """Keep-alive connections to one origin (scheme://host:port), directly or through a proxy."""

    def __init__(self, base_url: str, *, connect_timeout: float = 10.0, idle_timeout: float = 60.0,
                 total_timeout: float = 600.0, tls: TlsOptions | None = None, use_env_proxy: bool = True,
                 receive_buffer: int = 0) -> None:
        parts = urlsplit(base_url)
        try:
            port = parts.port
        except ValueError:
            raise ValueError(f"invalid port in URL: {base_url!r}") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = port or (443 if parts.scheme == "https" else 80)
        self.base_path = parts.path.rstrip("/")
        self.ssl: ssl.SSLContext | None = (tls or TlsOptions()).context() if parts.scheme == "https" else None
        default_port = self.port == (443 if parts.scheme == "https" else 80)
        host = f"[{self.host}]" if ":" in self.host else self.host  # an IPv6 literal (RFC 9110 7.2, RFC 3986)
        self.authority = f"{host}:{self.port}"
        self.host_header = host if default_port else self.authority
        self.proxy: Proxy | None = proxy_for(parts.scheme, self.host, self.port) if use_env_proxy else None
        self._target_prefix = ""
        """Absolute form for plain HTTP through a proxy (RFC 9112 3.2.2); origin form otherwise."""
        if self.proxy is not None and self.ssl is None:
            self._target_prefix = f"http://{self.host_header}"
        self.connect_timeout = connect_timeout
        self.receive_buffer = receive_buffer
        """The sockets' SO_RCVBUF (0: the kernel's, which grows to tcp_rmem's maximum, often 6-32 MiB):
        with `StreamedResponse.pause`, what the kernel holds of an answer nobody is taking."""
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

    def describe(self) -> str:
        """Where connections go, for error messages."""
        if self.proxy is None:
            return self.authority
        return f"{self.authority} through the {self.proxy.describe()}"

    async def _connect(self) -> _Connection:
        try:
            async with asyncio.timeout(self.connect_timeout):
                return await self._open()
        except TimeoutError:
            raise HttpTimeout(f"could not connect to {self.describe()} within {self.connect_timeout:g} s") from None

    async def _open(self) -> _Connection:
        loop = asyncio.get_running_loop()
        proxy = self.proxy
        if proxy is None:
            try:
                _, conn = await loop.create_connection(lambda: _Connection(self), self.host, self.port, ssl=self.ssl)
            except ssl.SSLError as exc:
                raise ConnectError(_tls_failure(self.authority, exc)) from None
            except OSError as exc:
                raise ConnectError(f"cannot connect to {self.describe()}: {exc.strerror or exc}") from None
            return conn
        try:
            _, conn = await loop.create_connection(lambda: _Connection(self), proxy.host, proxy.port)
        except OSError as exc:
            raise ConnectError(f"cannot connect to the {proxy.describe()}: {exc.strerror or exc}; "
                               f"fix it, or add {self.host} to NO_PROXY") from None
        if self.ssl is None:
            return conn
        try:
            await conn.open_tunnel(self.authority, proxy.authorization, proxy.describe())
            assert conn.transport is not None
            transport = await loop.start_tls(conn.transport, conn, self.ssl, server_hostname=self.host)
        except ssl.SSLError as exc:
            conn.abort()
            raise ConnectError(_tls_failure(self.authority, exc)) from None
        except (OSError, ConnectError) as exc:
            conn.abort()
            raise ConnectError(str(exc)) from None
        if transport is None:
            conn.abort()
            raise ConnectError(f"TLS through the {proxy.describe()} could not start")
        conn.transport = transport
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
        lines = [f"{method} {self._target_prefix}{self.base_path}{path} HTTP/1.1", f"Host: {self.host_header}"]
        if body or method not in ("GET", "HEAD"):  # RFC 9110 8.6: no Content-Length where no content is expected
            lines.append(f"Content-Length: {len(body)}")
        if self._target_prefix and self.proxy is not None and self.proxy.authorization:
            lines.append(f"Proxy-Authorization: {self.proxy.authorization}")
        lines.extend(f"{name}: {value}" for name, value in headers.items())
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body

    async def request(self, request: bytes, response: StreamedResponse) -> None:
        """Send ``request`` and read the whole response into ``response``.

        Raises ConnectError, HttpTimeout or PeerReset (ProtocolViolation for a
        response that breaks HTTP/1.1); on cancellation the connection is dropped.
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


def _tls_failure(authority: str, exc: ssl.SSLError) -> str:
    if isinstance(exc, ssl.SSLCertVerificationError):
        return (f"TLS handshake with {authority} failed: certificate verify failed ({exc.verify_message}); "
                f"{TLS_TRUST_HINT}")
    return f"TLS handshake with {authority} failed: {exc.reason or exc}"
