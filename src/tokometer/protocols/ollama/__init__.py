"""Ollama's native chat API: ``POST /api/chat``, NDJSON (``client``: bench's side; ``server``: the simulator's)."""

from __future__ import annotations

from typing import Any

from tokometer.protocols.common.protocol import ModelList, Protocol
from tokometer.protocols.ollama.client import Ollama
from tokometer.protocols.ollama.request import CHAT_REQUEST
from tokometer.protocols.ollama.server import OllamaChatServer

__all__ = ["OLLAMA"]


def _names(data: Any) -> list[str] | None:
    """The model names of ``/api/tags`` (``{"models": [{"name": ...}]}``)."""
    entries = data.get("models") if isinstance(data, dict) else None
    return [e["name"] for e in entries if isinstance(e, dict) and isinstance(e.get("name"), str)] \
        if isinstance(entries, list) else None


OLLAMA = Protocol("Ollama", Ollama, OllamaChatServer, model_list=ModelList("/api/tags", _names, at_root=True),
                  detect=("/api/tags", "models"), chat=True, request=CHAT_REQUEST)
