"""Run the gateway with uvicorn (uvloop + httptools, with the limits of `gateway.connections`) on a socket."""

from __future__ import annotations

import logging
import socket
import sys

import uvicorn
import uvloop

from tokometer.gateway.app import Gateway, create_app
from tokometer.gateway.config import GatewayConfig
from tokometer.gateway.connections import ConnectionLimits, fd_budget, guarded_protocol

__all__ = ["serve"]


def serve(config: GatewayConfig, sock: socket.socket, *, log_level: str = "warning") -> None:
    """Serve until interrupted; prints the URL line scripts and tests wait for."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s tokometer gateway %(levelname)s: %(message)s"))
    own = logging.getLogger("tokometer.gateway")
    own.addHandler(handler)
    own.setLevel(log_level.upper())
    own.propagate = False
    # Prompt counting runs in threads, and Python code there (chat templates) holds the GIL for up to
    # the switch interval at a time, which the event loop then waits out: 5 ms by default, 1 ms here.
    sys.setswitchinterval(0.001)
    app = create_app(config)
    limits = config.server
    gateway: Gateway = app.state.gateway
    protocol = guarded_protocol(ConnectionLimits(
        max_header_bytes=limits.max_header_bytes, max_header_fields=limits.max_header_fields,
        header_timeout_s=limits.header_timeout_s, max_connections=fd_budget(limits.max_connections),
        on_refusal=lambda reason: gateway.metrics.rejected.labels(reason).inc()))
    server = uvicorn.Server(uvicorn.Config(app, loop="uvloop", http=protocol, log_level=log_level,
                                           access_log=False, lifespan="on", backlog=2048,
                                           timeout_keep_alive=int(max(1, limits.keep_alive_timeout_s))))
    host, port = sock.getsockname()[:2]
    print(f"tokometer gateway listening on http://{host}:{port}", flush=True)
    uvloop.run(server.serve(sockets=[sock]))
