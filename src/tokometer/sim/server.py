"""Run the simulator on a socket with uvicorn (uvloop + httptools)."""

from __future__ import annotations

import socket

import uvicorn
import uvloop

from tokometer.sim.app import create_app
from tokometer.sim.config import SimConfig

__all__ = ["bind_socket", "serve"]


def bind_socket(host: str, port: int) -> socket.socket:
    """Bind and listen; ``port=0`` picks a free port (read it from the socket)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def serve(config: SimConfig, sock: socket.socket, *, log_level: str = "warning") -> None:
    """Serve until interrupted. Prints the URL line tests and scripts wait for."""
    app = create_app(config)
    host, port = sock.getsockname()[:2]
    uv_config = uvicorn.Config(
        app,
        loop="uvloop",
        http="httptools",
        log_level=log_level,
        access_log=False,
        lifespan="off",
        backlog=2048,
        timeout_keep_alive=75,
    )
    server = uvicorn.Server(uv_config)
    shown = f"[{host}]" if ":" in host else host
    print(f"tokometer sim listening on http://{shown}:{port}", flush=True)
    uvloop.run(server.serve(sockets=[sock]))
