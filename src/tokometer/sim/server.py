"""Run the simulator on a socket with uvicorn (uvloop + httptools), with the gateway's limits on request heads
and bodies (`tokometer.inbound`): 431 for a head over 32 KiB or 100 fields, 408 for one that takes over 10 s
or a body over 30 s (or pausing 10 s), 413 for a body over ``--max-body-bytes``. Unlike the gateway it does not
close a client that reads nothing of its answer: an engine stand-in is pushed back by TCP, as engines are."""

from __future__ import annotations

import socket

import uvicorn
import uvloop

from tokometer.inbound.connections import ConnectionLimits, fd_budget, guarded_protocol
from tokometer.inbound.request_limits import DEFAULT_LIMITS
from tokometer.sim.app import create_app
from tokometer.sim.config import SimConfig

__all__ = ["bind_socket", "serve"]

_MAX_CONNECTIONS = 1 << 16
"""As many open connections as the descriptors allow: a load test may hold thousands at once."""


def bind_socket(host: str, port: int, send_buffer: int = 0) -> socket.socket:
    """Bind and listen; ``port=0`` picks a free port (read it from the socket). ``send_buffer``: the SO_SNDBUF
    the accepted connections inherit (0: the kernel's, which grows to tcp_wmem's maximum, often 4 MiB)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if send_buffer:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send_buffer)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def serve(config: SimConfig, sock: socket.socket, *, log_level: str = "warning") -> None:
    """Serve until interrupted. Prints the URL line tests and scripts wait for."""
    app = create_app(config)
    host, port = sock.getsockname()[:2]
    limits = DEFAULT_LIMITS  # the gateway's own: a test server people point tools at is on an open port too
    protocol = guarded_protocol(ConnectionLimits(
        max_header_bytes=limits.max_header_bytes, max_header_fields=limits.max_header_fields,
        header_timeout_s=limits.header_timeout_s, max_connections=fd_budget(_MAX_CONNECTIONS), logger="tokometer.sim",
        body_timeout_s=config.body_timeout_s))
    uv_config = uvicorn.Config(
        app,
        loop="uvloop",
        http=protocol,
        ws="none",
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
