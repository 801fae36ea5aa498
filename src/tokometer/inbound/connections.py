"""The HTTP connections of tokometer's servers (gateway, simulator), bounded the way nginx and Envoy bound theirs.

uvicorn's httptools protocol, with what it lacks for a server on an open port:

- **the request line**: HTTP/1.0 and HTTP/1.1 only (an HTTP/0.9 line, which has no version, ``400``;
  any other version ``505``), and a target in origin form (``/path``), absolute form (``http://...``)
  or ``*``, else ``400``; each answered and the connection closed before the application sees it.
- **request heads**: at most ``max_header_bytes`` (request line and fields) and
  ``max_header_fields`` fields, else ``431`` and the connection is closed; a head must arrive
  within ``header_timeout_s`` of its first byte (or of the connection opening), else ``408``.
  A client that connects and sends nothing, or sends a header a byte at a time, holds its
  connection for seconds, not forever.
- **request bodies on the wire**: a chunked body's framing (chunk-size lines and their extensions,
  CRLFs, trailers) may take ``max_body_framing_bytes`` and 1/`FRAMING_SHARE` of the body (``413`` and
  close: a 1 MiB chunk extension, a million one-byte chunks); trailer fields count against the head's limits; and
  whatever endpoint the request is for, read or not, its body must be whole within ``body_timeout_s``
  of its head (a moment later than `tokometer.inbound.body`'s own deadline, so that an endpoint that
  reads its body answers first, in its client's shape), else ``408`` (or, once answered, the
  connection is closed).
- **idle keep-alive**: closed after ``keep_alive_timeout_s`` (uvicorn's own timer).
- **pipelining**: at most `MAX_PIPELINED` requests waiting behind the one being answered; a client that sends
  more ahead of their answers (200,000 ``GET /health`` in one write) is closed (``pipelined``).
- **a client that takes nothing of its answer** (nginx's ``send_timeout``): when the transport has
  paused writing (its buffer is over the high-water mark; uvicorn's ``send`` then waits) and for
  ``client_stall_s`` nothing of that buffer went out, the connection is aborted; the application
  sees ``http.disconnect`` (the gateway's relay then cancels the upstream request).
- **open connections**: at most ``max_connections``, and never so many that the process would run
  out of file descriptors (each streaming client also needs one to its upstream). When the limit is
  reached, a connection that is not progressing is closed to make room, in this order:

  1. idle: no request in progress (kept alive, or opened over `PROGRESS_GRACE_S` ago and never used), the
     longest idle first;
  2. still sending its request (a head, or a body the
     application waits for) and behind: nothing came for `PROGRESS_GRACE_S`, or its body has come
     slower than ``min_body_rate`` bytes a second since the request began (a head earns no time: a
     client that trickles a byte every few seconds, or every tenth of one, is behind at once); the one
     furthest behind first, answered ``408`` (with ``connection: close``). A client that sends its
     request at once is never behind, so however fast slow clients reconnect they make room for it;
  3. still sending its request after `SLOW_AFTER_S`, though keeping up: the slowest body first (408 too), so that
     clients that keep just above the minimum rate cannot hold every connection either;
  4. just opened (within `PROGRESS_GRACE_S`) and nothing sent yet, the oldest first (counted as idle);
  5. its answer stalled: writing paused and nothing drained for `PROGRESS_GRACE_S`, the longest
     stalled first, aborted.

  When none can be closed yet but some request is on its way and keeping up (in its first `SLOW_AFTER_S`), the new
  connection waits, unread, in line for its slot (`tokometer.inbound.waiting_room`: first come first served, at most
  ``MAX_WAIT_S``), so that clients that keep just above the minimum rate and reconnect at once cannot keep every
  slot in its first second. Only when every connection is doing real work (its request being answered, its answer
  being read), or the line is full or waited too long, is the new one answered ``503`` and closed.

Refusals are reported to ``on_refusal`` (the gateway counts them in ``tokometer_gateway_rejected_total``;
reasons ``header_too_large``, ``header_timeout``, ``bad_request_line``, ``http_version``, ``body_framing``,
``body_timeout``, ``pipelined``, ``connections``, ``client_stalled``, and for the
connections closed to make room ``idle_evicted``, ``slow_request_evicted`` and ``stalled_evicted``)
and logged as one line with the client's address (evictions at level info) on the ``logger`` the
server names.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from dataclasses import dataclass
from typing import Any

import httptools
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from tokometer.inbound.request_limits import DEFAULT_LIMITS
from tokometer.inbound.waiting_room import MAX_WAITING, SLOW_AFTER_S, WaitingRoom

__all__ = ["EVICTED", "FRAMING_SHARE", "MAX_PIPELINED", "PROGRESS_GRACE_S", "ConnectionLimits", "fd_budget",
           "guarded_protocol"]

EVICTED = "tokometer.evicted"
"""Set (True) in a request's ASGI scope when its connection was closed to make room: the application then
sees a disconnect it need not log again (the eviction was)."""

FRAMING_SHARE = 8
"""Beyond ``max_body_framing_bytes``, a chunked body's framing may take this fraction of the body (1/8: an upload
in 64-byte chunks passes, one in 1-byte chunks does not)."""

MAX_PIPELINED = 32
"""Requests a client may send ahead of their answers on one connection (HTTP/1.1 pipelining); with more
waiting, the connection is closed (uvicorn would read and queue them all, ~8,000 a read)."""

PROGRESS_GRACE_S = 0.5
"""A connection that moved a byte (of its request in, or of its answer out) this recently is progressing:
it is not closed to make room for a new one."""

_FD_RESERVE = 64 + MAX_WAITING
"""Descriptors kept for everything else: the listening socket, logs, Redis, the tokenizer, probes, and the new
connections waiting for a slot."""


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    max_header_bytes: int
    max_header_fields: int
    header_timeout_s: float
    max_connections: int
    on_refusal: Any = None
    """Called with a reason label for each refusal (the gateway counts them)."""
    logger: str = "tokometer.gateway"
    """The logger refusals are written to."""
    client_stall_s: float | None = None
    """A connection whose answer is stalled (writes paused, nothing drained) this long is aborted; None: never."""
    body_timeout_s: float | None = None
    """A request's body must be whole within this of its head, whether the application reads it or not
    (answered a moment after the application's own deadline); None: no deadline here."""
    max_body_framing_bytes: int = DEFAULT_LIMITS.max_body_framing_bytes
    """Bytes a chunked body's framing may take beyond the body (413)."""
    min_body_rate: float = DEFAULT_LIMITS.min_body_rate
    """At the connection limit, a request whose body comes slower than this (bytes a second) makes room."""


def fd_budget(wanted: int) -> int:
    """How many client connections the process can hold: ``wanted``, or fewer if the descriptor
    limit (raised to its hard maximum first, as nginx's worker_rlimit_nofile does) leaves less,
    counting two descriptors a client (its own and its upstream's)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        target = 1 << 20 if hard == resource.RLIM_INFINITY else hard
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    return max(1, min(wanted, (soft - _FD_RESERVE) // 2))


def _response(status: int, reason: str, message: str) -> bytes:
    body = message.encode()
    return (f"HTTP/1.1 {status} {reason}\r\ncontent-type: text/plain; charset=utf-8\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n").encode() + body


class _GuardedProtocol(HttpToolsProtocol):
    limits: ConnectionLimits
    waiting_room: WaitingRoom
    """New connections waiting for a slot, one room a server (`guarded_protocol`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_bytes = 0
        self._head_fields = 0
        self._in_head = False
        self._refused = False
        self._waiting = False
        """In the waiting room, unread (`tokometer.inbound.waiting_room`)."""
        self._held = b""
        """What came while waiting (the first read; reading is then paused until admitted)."""
        self._head_timer: asyncio.TimerHandle | None = None
        self.idle_since = time.monotonic()
        self.last_byte = self.idle_since
        """When the client last sent something (or connected)."""
        self._drained_at = self.idle_since
        """When its answer last made progress out of a paused write buffer (or writing was paused)."""
        self._buffered = 0
        self._stall_timer: asyncio.TimerHandle | None = None
        self._used = False
        """A request has begun on this connection (else it is new: it counts as sending one)."""
        self._request_began = self.idle_since
        """When the request now on its way began (or the connection opened)."""
        self._in_body = False
        self._body_bytes = 0
        """Of the request now on its way: its body's bytes as decoded, and as they came on the wire."""
        self._body_wire = 0
        self._body_timer: asyncio.TimerHandle | None = None
        self._body_began = self.idle_since

    # -- connection ------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        room = self.waiting_room
        wait_s: float | None = 0.0  # others wait already: behind them
        if not room:
            wait_s = self.make_room()
            if wait_s == 0.0:
                self._arm_head_timer()
                return
        if wait_s is None or not room.join(self, wait_s):
            self.turn_away()
        else:
            self._waiting = True  # unread until admitted (`tokometer.inbound.waiting_room`): see `data_received`

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_head_timer()
        self._disarm_stall_timer()
        self._disarm_body_timer()
        if self._waiting:
            self.waiting_room.leave(self)
        else:
            self.waiting_room.slot_freed()
        super().connection_lost(exc)

    # -- a slot at the connection limit (the waiting room's `Newcomer`) ---------------------------
    def make_room(self) -> float | None:
        """0.0 if this connection has a slot (the limit not reached, or the connection that progresses least
        closed: module docstring); else the seconds until a request on its way may make room, or None if every
        other connection does real work."""
        if len(self.connections) - len(self.waiting_room) + self._waiting <= self.limits.max_connections:
            return 0.0
        now = time.monotonic()
        victim, rank, since, soonest = None, _BUSY, 0.0, None
        for other in self.connections:
            if other is self or not isinstance(other, _GuardedProtocol) or other._waiting:
                continue
            other_rank, other_since = other._stage(now)
            if other_rank < rank or (other_rank == rank != _BUSY and other_since < since):
                victim, rank, since = other, other_rank, other_since
            elif other_rank == _KEEPING_UP:
                soonest = other_since if soonest is None else min(soonest, other_since)
        if victim is not None:
            victim._evict(rank, now - since)
            return 0.0
        return None if soonest is None else max(soonest - now, 0.001)

    def admit(self) -> None:
        self._waiting = False
        self.idle_since = self.last_byte = time.monotonic()
        self._arm_head_timer()
        held, self._held = self._held, b""
        self.transport.resume_reading()
        if held:
            self.data_received(held)

    def turn_away(self) -> None:
        self._waiting = False
        self._refuse(503, "Service Unavailable", "connections", "the gateway is at its connection limit; retry shortly")

    def gone(self) -> bool:
        return self._refused or self.transport.is_closing()

    def _stage(self, now: float) -> tuple[int, float]:
        """How much this connection progresses, for `make_room`: its rank, and since when it has not (for a
        request on its way, `_behind_since`: in the future while it keeps up)."""
        if self._refused or self.transport.is_closing():
            return _BUSY, 0.0
        cycle = self.cycle
        if cycle is None or cycle.response_complete:
            if not self._in_head:  # kept alive, or opened and never used (just opened: after those still sending)
                return (_IDLE if self._used or now - self.idle_since >= PROGRESS_GRACE_S else _FRESH), self.idle_since
            return self._sending(now)  # a head on its way
        if not cycle.response_started:
            if cycle.more_body and not self.flow.read_paused:
                return self._sending(now)  # the application waits for a body still on its way
            return _BUSY, 0.0  # being answered
        if self.flow.write_paused:
            self._sample_drain(now)
            if now - self._drained_at >= PROGRESS_GRACE_S:
                return _STALLED, self._drained_at
        return _BUSY, 0.0

    def _evict(self, rank: int, still_s: float) -> None:
        log = logging.getLogger(self.limits.logger)
        self._refused = True
        self._disarm_head_timer()
        self._disarm_stall_timer()
        self._disarm_body_timer()
        client = _address(self.client)
        if rank in (_IDLE, _FRESH):
            log.info("closing the connection idle longest (from %s) to make room", client)
            label = "idle_evicted"
            self.transport.close()
        elif rank in (_SENDING, _SLOW):
            elapsed = max(1e-3, time.monotonic() - self._request_began)
            log.info("closing the connection from %s to make room: its request has not progressed enough (on its "
                     "way for %.1f s, its body at %.0f bytes a second; 408)", client, elapsed,
                     self._body_bytes / elapsed)
            label = "slow_request_evicted"
            self._release_application()
            self.transport.write(_response(408, "Request Timeout", "the request did not progress and the server "
                                           "needed its connection: send it at once"))
            self.transport.close()
        else:
            log.info("closing the connection from %s to make room: it has taken nothing of its answer for %.1f s",
                     client, still_s)
            label = "stalled_evicted"
            self.transport.abort()
        if self.limits.on_refusal is not None:
            self.limits.on_refusal(label)

    def _sending(self, now: float) -> tuple[int, float]:
        """The rank of a request on its way: behind (`_SENDING`, since when), or, on its way for `SLOW_AFTER_S`,
        slow (`_SLOW`, ordered by its body's rate), else busy."""
        on_time = self._request_began + self._body_bytes / self.limits.min_body_rate  # a head earns no time
        behind = min(on_time, self.last_byte + PROGRESS_GRACE_S)
        if behind <= now:
            return _SENDING, behind
        elapsed = now - self._request_began
        if elapsed >= SLOW_AFTER_S:
            return _SLOW, self._body_bytes / elapsed
        return _KEEPING_UP, min(behind, self._request_began + SLOW_AFTER_S)

    def _release_application(self) -> None:
        """The application stops waiting for a request body this connection will not deliver (it sees a
        disconnect, marked `EVICTED`: the server has logged why) and writes nothing more."""
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete:
            cycle.scope[EVICTED] = True  # type: ignore[literal-required]
            cycle.disconnected = True
            cycle.message_event.set()

    def idle(self) -> bool:
        """No request is being answered (it may be sending one slowly)."""
        return self.cycle is None or self.cycle.response_complete

    # -- answers the client does not take ---------------------------------------------------
    def pause_writing(self) -> None:
        super().pause_writing()
        self._drained_at = time.monotonic()
        self._buffered = self.transport.get_write_buffer_size()
        if self.limits.client_stall_s is not None and self._stall_timer is None:
            self._stall_timer = self.loop.call_later(self._stall_step(), self._check_stall)

    def resume_writing(self) -> None:
        super().resume_writing()
        self._disarm_stall_timer()

    def _sample_drain(self, now: float) -> None:
        buffered = self.transport.get_write_buffer_size()
        if buffered < self._buffered:
            self._drained_at = now
        self._buffered = buffered

    def _stall_step(self) -> float:
        return max(0.05, (self.limits.client_stall_s or 0.0) / 4)

    def _check_stall(self) -> None:
        self._stall_timer = None
        stall_s = self.limits.client_stall_s
        if stall_s is None or not self.flow.write_paused or self._refused or self.transport.is_closing():
            return
        now = time.monotonic()
        self._sample_drain(now)
        if now - self._drained_at < stall_s:
            self._stall_timer = self.loop.call_later(self._stall_step(), self._check_stall)
            return
        self._refused = True
        self._disarm_head_timer()
        logging.getLogger(self.limits.logger).warning(
            "closing the connection from %s: it took nothing of its answer for %g s (client_stall_s), %s bytes "
            "waiting", _address(self.client), stall_s, f"{self._buffered:,}")
        if self.limits.on_refusal is not None:
            self.limits.on_refusal("client_stalled")
        self.transport.abort()

    def _disarm_stall_timer(self) -> None:
        if self._stall_timer is not None:
            self._stall_timer.cancel()
            self._stall_timer = None

    # -- request heads ---------------------------------------------------------------------
    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        if self._waiting:  # (uvloop starts reading after connection_made, so it is paused at the first read)
            self._held += data  # one read at most
            self.transport.pause_reading()
            return
        self.last_byte = time.monotonic()
        idle = self.idle()
        if idle and self._head_timer is None and not self._in_head:
            self._arm_head_timer()  # the first bytes of a request on a kept-alive connection
        counting = self._in_head or idle
        if counting:
            self._head_bytes += len(data)
        in_body = self._in_body
        if in_body:
            self._body_wire += len(data)
        super().data_received(data)
        if counting and self._in_head and self._head_bytes > self.limits.max_header_bytes:
            self._too_large()  # a head that goes on and on without ending (a field line never ends)
        elif in_body and self._in_body:  # (a body that ended in this piece is not measured: one read at most)
            self._check_framing()
        if self._in_body and self._body_timer is None and not self._refused:
            self._arm_body_timer()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_head = True
        self._head_fields = 0
        self._used = True
        self._request_began = time.monotonic()
        self._body_bytes = self._body_wire = 0
        if self._head_timer is None:
            self._arm_head_timer()

    def on_url(self, url: bytes) -> None:
        super().on_url(url)
        if len(self.url) > self.limits.max_header_bytes:
            self._too_large()
            raise _Stop

    def on_header(self, name: bytes, value: bytes) -> None:
        self._head_fields += 1
        size = len(self.url) + sum(len(n) + len(v) + 4 for n, v in self.headers) + len(name) + len(value)
        if self._head_fields > self.limits.max_header_fields or size > self.limits.max_header_bytes:
            self._too_large()
            raise _Stop
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._head_bytes = 0
        self._disarm_head_timer()
        self._check_request_line()
        self._in_body = True  # until on_message_complete, which comes at once for a request without a body
        self._body_began = time.monotonic()
        super().on_headers_complete()
        if len(self.pipeline) > MAX_PIPELINED:
            self._refused = True
            self._disarm_head_timer()
            logging.getLogger(self.limits.logger).warning(
                "closing the connection from %s: over %d requests sent ahead of their answers", _address(self.client),
                MAX_PIPELINED)
            if self.limits.on_refusal is not None:
                self.limits.on_refusal("pipelined")
            self.transport.close()
            raise _Stop

    def on_body(self, body: bytes) -> None:
        self._body_bytes += len(body)
        super().on_body(body)

    def on_message_complete(self) -> None:
        self._in_body = False
        self._disarm_body_timer()
        super().on_message_complete()

    def on_response_complete(self) -> None:
        self.idle_since = time.monotonic()
        super().on_response_complete()

    def send_400_response(self, msg: str) -> None:
        if not self._refused:  # a refusal has answered already; the parser error is ours
            super().send_400_response(msg)

    # -- request lines and bodies ----------------------------------------------------------------
    def _check_request_line(self) -> None:
        """HTTP/1.0 or 1.1, and a target a server answers (``/path``, ``http://...``, ``*``); else refused."""
        version = self.parser.get_http_version()
        if version not in _VERSIONS:
            if version == "0.9":
                self._refuse(400, "Bad Request", "bad_request_line", "an HTTP/0.9 request line (no version): send "
                             "'METHOD /path HTTP/1.1'")
            else:
                self._refuse(505, "HTTP Version Not Supported", "http_version",
                             f"HTTP/{version} is not spoken here: send HTTP/1.1 (or HTTP/1.0)")
            raise _Stop
        url = self.url
        if not (url.startswith(b"/") or url == b"*" or url[:7].lower() == b"http://" or url[:8].lower() == b"https://"):
            self._refuse(400, "Bad Request", "bad_request_line", "the request target must be a path ('/...'), an "
                         "absolute URL or '*'")
            raise _Stop

    def _check_framing(self) -> None:
        framing = self._body_wire - self._body_bytes
        most = self.limits.max_body_framing_bytes + self._body_bytes // FRAMING_SHARE
        if framing > most:
            self._refuse(413, "Content Too Large", "body_framing",
                         f"the chunked body's framing (chunk-size lines, extensions, trailers) is over {most:,} bytes "
                         f"beside its {self._body_bytes:,} bytes of body (max_body_framing_bytes and 1/{FRAMING_SHARE} "
                         "of the body): send it in larger chunks, or with Content-Length")

    def _arm_body_timer(self) -> None:
        timeout_s = self.limits.body_timeout_s
        if timeout_s is not None:
            at = self._body_began + timeout_s + PROGRESS_GRACE_S - time.monotonic()
            self._body_timer = self.loop.call_later(max(0.0, at), self._body_timeout)

    def _disarm_body_timer(self) -> None:
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None

    def _body_timeout(self) -> None:
        self._body_timer = None
        if not self._in_body or self._refused or self.transport.is_closing():
            return
        cycle = self.cycle
        if cycle is None or not cycle.response_started:
            self._refuse(408, "Request Timeout", "body_timeout",
                         f"the request body did not arrive within {self.limits.body_timeout_s:g} s of its head")
            return
        self._refused = True  # answered already (without reading it all): the rest is not waited for
        logging.getLogger(self.limits.logger).warning("closing the connection from %s: its request body went on "
                                                      "past %g s", _address(self.client), self.limits.body_timeout_s)
        self.transport.close()

    # -- refusals --------------------------------------------------------------------------
    def _too_large(self) -> None:
        self._refuse(431, "Request Header Fields Too Large", "header_too_large",
                     f"request head over {self.limits.max_header_bytes:,} bytes or "
                     f"{self.limits.max_header_fields} fields")

    def _arm_head_timer(self) -> None:
        self._disarm_head_timer()
        self._head_timer = self.loop.call_later(self.limits.header_timeout_s, self._head_timeout)

    def _disarm_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timeout(self) -> None:
        self._head_timer = None
        if self._in_head or self.cycle is None:
            self._refuse(408, "Request Timeout", "header_timeout",
                         f"no complete request head within {self.limits.header_timeout_s:g} s")

    def _refuse(self, status: int, reason: str, label: str, message: str) -> None:
        if self._refused or self.transport.is_closing():
            return
        self._refused = True
        self._disarm_head_timer()
        self._disarm_body_timer()
        self._release_application()
        logging.getLogger(self.limits.logger).warning("refused a connection from %s: %s (%d)", _address(self.client),
                                                      message, status)
        if self.limits.on_refusal is not None:
            self.limits.on_refusal(label)
        self.transport.write(_response(status, reason, message))
        self.transport.close()


_VERSIONS = frozenset({"1.0", "1.1"})
"""The HTTP versions a request line may name."""

_IDLE, _SENDING, _SLOW, _FRESH, _STALLED, _BUSY, _KEEPING_UP = range(7)
"""The ranks of `_GuardedProtocol._stage`: who is closed first to make room (`_BUSY` and `_KEEPING_UP` never; a new
connection waits for one `_KEEPING_UP`, a request on its way in its first `SLOW_AFTER_S`, until it may be closed)."""


class _Stop(Exception):
    """Raised from a parser callback to stop parsing a refused request."""


def _address(client: tuple[str, int] | None) -> str:
    return f"{client[0]}:{client[1]}" if client else "an unknown address"


def guarded_protocol(limits: ConnectionLimits) -> type[asyncio.Protocol]:
    """uvicorn's httptools protocol class bound to ``limits`` (pass it as ``uvicorn.Config(http=...)``)."""
    return type("GatewayHttpProtocol", (_GuardedProtocol,), {"limits": limits, "waiting_room": WaitingRoom()})


# httptools reports an exception raised in a callback as HttpParserCallbackError; uvicorn answers it
# with a 400, which `send_400_response` above suppresses once a refusal has been sent.
assert issubclass(httptools.HttpParserCallbackError, httptools.HttpParserError)
