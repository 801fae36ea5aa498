"""Run the gateway with uvicorn (uvloop + httptools, with the limits of `inbound.connections`) on a socket.

`serve` runs one gateway process: the only one (it prints the URL line itself), or one worker of
`tokometer.gateway.supervisor` (it reports ready to its supervisor instead, and exits when the
supervisor's end of the ``lifeline`` pipe closes).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import socket
import sys
from collections.abc import Callable

import uvicorn
import uvloop

from tokometer.gateway.app import Gateway, create_app
from tokometer.gateway.config import GatewayConfig
from tokometer.inbound.connections import ConnectionLimits, fd_budget, guarded_protocol
from tokometer.util.shown import printable

__all__ = ["serve", "setup_logging", "url_line"]

_LOG_FORMAT = "%(asctime)s tokometer gateway %(levelname)s: %(message)s"
_GC_YOUNGEST = 20_000
"""Allocations between collections of the youngest generation (Python's default: 700). A streamed request makes
a few hundred short-lived objects, almost all freed by their reference counts; at the default, the collector
ran every few requests and walked every young object each time."""


class _PrintableFormatter(logging.Formatter):
    """Log lines whose upstream's words (an error body, an error event) cannot act on the terminal they reach: every
    non-printable character but a line break written out (`tokometer.util.shown.printable`)."""

    def format(self, record: logging.LogRecord) -> str:
        return printable(super().format(record), keep="\n")


def setup_logging(log_level: str) -> None:
    """The gateway's own log lines, on stderr (once per process, whoever asks first)."""
    own = logging.getLogger("tokometer.gateway")
    own.setLevel(log_level.upper())
    own.propagate = False
    if not any(getattr(h, "tokometer", False) for h in own.handlers):
        handler = logging.StreamHandler()
        handler.setFormatter(_PrintableFormatter(_LOG_FORMAT))
        handler.tokometer = True  # type: ignore[attr-defined]
        own.addHandler(handler)


def url_line(sock: socket.socket) -> str:
    """The line scripts and tests wait for: the gateway's URL is its last word."""
    host, port = sock.getsockname()[:2]
    return f"tokometer gateway listening on http://{host}:{port}"


def serve(config: GatewayConfig, sock: socket.socket, *, log_level: str = "warning", worker: int | None = None,
          ready: Callable[[], None] | None = None, lifeline: int | None = None) -> None:
    """Serve until interrupted. Alone (``ready`` None) it prints the URL line; as worker ``worker`` it calls
    ``ready()`` once it accepts connections, and stops when ``lifeline`` (a pipe's read end) closes."""
    setup_logging(log_level)
    # Prompt counting runs in threads, and Python code there (chat templates) holds the GIL for up to
    # the switch interval at a time, which the event loop then waits out: 5 ms by default, 1 ms here.
    sys.setswitchinterval(0.001)
    app = create_app(config)
    limits = config.server
    gateway: Gateway = app.state.gateway
    if worker is not None:
        gateway.worker = str(worker)
    protocol = guarded_protocol(ConnectionLimits(
        max_header_bytes=limits.max_header_bytes, max_header_fields=limits.max_header_fields,
        header_timeout_s=limits.header_timeout_s, max_connections=fd_budget(limits.max_connections),
        client_stall_s=limits.client_stall_s, body_timeout_s=limits.body_timeout_s,
        on_refusal=lambda reason: gateway.metrics.rejected.labels(reason).inc()))
    server = _Server(uvicorn.Config(app, loop="uvloop", http=protocol, ws="none", log_level=log_level,
                                    access_log=False, lifespan="on", backlog=2048,
                                    timeout_keep_alive=int(max(1, limits.keep_alive_timeout_s))), ready, lifeline)
    _settle_collector()
    if ready is None:
        print(url_line(sock), flush=True)
    uvloop.run(server.serve(sockets=[sock]))


def _settle_collector() -> None:
    """What start-up made (modules, config, tokenizers) is never garbage: frozen out of the collector's walks,
    and the youngest generation collected less often (`_GC_YOUNGEST`)."""
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(_GC_YOUNGEST, older, oldest)


class _Server(uvicorn.Server):
    """uvicorn's server, telling a supervisor when it is ready, and stopping when the supervisor is gone."""

    def __init__(self, config: uvicorn.Config, ready: Callable[[], None] | None, lifeline: int | None) -> None:
        super().__init__(config)
        self._ready = ready
        self._lifeline = lifeline

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self._lifeline is not None:
            loop, lifeline = asyncio.get_running_loop(), self._lifeline

            def orphaned() -> None:  # the pipe's other end closed: nobody would ever stop this worker
                loop.remove_reader(lifeline)
                self.should_exit = True

            loop.add_reader(lifeline, orphaned)
        if self.started and self._ready is not None:
            self._ready()
