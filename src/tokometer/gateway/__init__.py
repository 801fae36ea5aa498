"""The gateway: an OpenAI-compatible server in front of any engines, keeping them fast, affordable and up."""

from __future__ import annotations

from tokometer.gateway.app import Gateway, create_app
from tokometer.gateway.config import GatewayConfig, load_config

__all__ = ["Gateway", "GatewayConfig", "create_app", "load_config"]
