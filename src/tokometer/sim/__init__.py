"""The simulated inference server: scripted timing, seven protocols, faults, a send trace."""

from __future__ import annotations

from tokometer.sim.app import create_app
from tokometer.sim.config import SimConfig
from tokometer.sim.server import bind_socket, serve

__all__ = ["SimConfig", "bind_socket", "create_app", "serve"]
