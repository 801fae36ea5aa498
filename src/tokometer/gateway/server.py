"""Run the gateway with uvicorn (uvloop + httptools) on a socket."""

from __future__ import annotations

import socket

import uvicorn
import uvloop

from tokometer.gateway.app import create_app
from tokometer.gateway.config import GatewayConfig

__all__ = ["serve"]


def serve(config: GatewayConfig, sock: socket.socket, *, log_level: str = "warning") -> None:
    """Serve until interrupted; prints the URL line scripts and tests wait for."""
    app = create_app(config)
    server = uvicorn.Server(uvicorn.Config(app, loop="uvloop", http="httptools", log_level=log_level,
                                           access_log=False, lifespan="on", backlog=2048, timeout_keep_alive=75))
    host, port = sock.getsockname()[:2]
    print(f"tokometer gateway listening on http://{host}:{port}", flush=True)
    uvloop.run(server.serve(sockets=[sock]))
