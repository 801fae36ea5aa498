"""The HTTP connections of tokometer's servers (gateway, simulator), bounded the way nginx and Envoy bound theirs.

uvicorn's httptools protocol, with what it lacks for a server on an open port:

- **request heads**: at most ``max_header_bytes`` (request line and fields) and
  ``max_header_fields`` fields, else ``431`` and the connection is closed; a head must arrive
  within ``header_timeout_s`` of its first byte (or of the connection opening), else ``408``.
  A client that connects and sends nothing, or sends a header a byte at a time, holds its
  connection for seconds, not forever.
- **idle keep-alive**: closed after ``keep_alive_timeout_s`` (uvicorn's own timer).
- **open connections**: at most ``max_connections``, and never so many that the process would run
  out of file descriptors (each streaming client also needs one to its upstream): when the limit is
  reached, the connection idle the longest (no request in progress, however it got there) is
  closed to make room; if every connection is busy, the new one is answered ``503`` and closed.

Refusals are reported to ``on_refusal`` (the gateway counts them in ``tokometer_gateway_rejected_total``;
reasons ``header_too_large``, ``header_timeout``, ``connections``, and ``idle_evicted`` for connections
closed to make room) and logged as one line with the client's address (evictions at level info) on the
``logger`` the server names.
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

__all__ = ["ConnectionLimits", "fd_budget", "guarded_protocol"]

_FD_RESERVE = 64
"""Descriptors kept for everything else: the listening socket, logs, Redis, the tokenizer, probes."""


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

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_bytes = 0
        self._head_fields = 0
        self._in_head = False
        self._refused = False
        self._head_timer: asyncio.TimerHandle | None = None
        self.idle_since = time.monotonic()

    # -- connection ------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.limits.max_connections and not self._evict_idlest():
            self._refuse(503, "Service Unavailable", "connections",
                         "the gateway is at its connection limit; retry shortly")
            return
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_head_timer()
        super().connection_lost(exc)

    def _evict_idlest(self) -> bool:
        idle = [c for c in self.connections
                if c is not self and isinstance(c, _GuardedProtocol) and not c._refused and c.idle()]
        if not idle:
            return False
        victim = min(idle, key=lambda c: c.idle_since)
        logging.getLogger(self.limits.logger).info("closing the connection idle longest (from %s) to make room",
                                                   _address(victim.client))
        victim._refused = True
        victim.transport.close()
        if self.limits.on_refusal is not None:
            self.limits.on_refusal("idle_evicted")
        return True

    def idle(self) -> bool:
        """No request is being answered (it may be sending one slowly)."""
        return self.cycle is None or self.cycle.response_complete

    # -- request heads ---------------------------------------------------------------------
    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        idle = self.idle()
        if idle and self._head_timer is None and not self._in_head:
            self._arm_head_timer()  # the first bytes of a request on a kept-alive connection
        counting = self._in_head or idle
        if counting:
            self._head_bytes += len(data)
        super().data_received(data)
        if counting and self._in_head and self._head_bytes > self.limits.max_header_bytes:
            self._too_large()  # a head that goes on and on without ending (a field line never ends)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_head = True
        self._head_fields = 0
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
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        self.idle_since = time.monotonic()
        super().on_response_complete()

    def send_400_response(self, msg: str) -> None:
        if not self._refused:  # a refusal has answered already; the parser error is ours
            super().send_400_response(msg)

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
        logging.getLogger(self.limits.logger).warning("refused a connection from %s: %s (%d)", _address(self.client),
                                                      message, status)
        if self.limits.on_refusal is not None:
            self.limits.on_refusal(label)
        self.transport.write(_response(status, reason, message))
        self.transport.close()


class _Stop(Exception):
    """Raised from a parser callback to stop parsing a refused request."""


def _address(client: tuple[str, int] | None) -> str:
    return f"{client[0]}:{client[1]}" if client else "an unknown address"


def guarded_protocol(limits: ConnectionLimits) -> type[asyncio.Protocol]:
    """uvicorn's httptools protocol class bound to ``limits`` (pass it as ``uvicorn.Config(http=...)``)."""
    return type("GatewayHttpProtocol", (_GuardedProtocol,), {"limits": limits})


# httptools reports an exception raised in a callback as HttpParserCallbackError; uvicorn answers it
# with a 400, which `send_400_response` above suppresses once a refusal has been sent.
assert issubclass(httptools.HttpParserCallbackError, httptools.HttpParserError)
