"""Protocol adapters, by name: one class per wire protocol.

``BACKENDS`` is the registry the CLI and the gateway look names up in.
"""

from __future__ import annotations

from tokometer.errors import ConfigError
from tokometer.protocols.anthropic_messages.client import AnthropicMessages
from tokometer.protocols.common.base import Backend, GenerationParams, HttpRequest, ParsedEvent
from tokometer.protocols.embeddings.client import OpenAIEmbeddings, Rerank
from tokometer.protocols.llamacpp.client import LlamaCpp
from tokometer.protocols.ollama.client import Ollama
from tokometer.protocols.openai.client import OpenAIChat, OpenAICompletions
from tokometer.protocols.openai_responses.client import OpenAIResponses
from tokometer.protocols.tgi.client import TGI

__all__ = [
    "BACKENDS",
    "Backend",
    "GenerationParams",
    "HttpRequest",
    "ParsedEvent",
    "create_backend",
    "default_api_for_url",
]

BACKENDS: dict[str, type[Backend]] = {
    cls.name: cls for cls in (OpenAIChat, OpenAICompletions, OpenAIResponses, AnthropicMessages, Ollama, TGI, LlamaCpp,
                              OpenAIEmbeddings, Rerank)
}


def create_backend(name: str) -> Backend:
    """A fresh adapter for protocol ``name``; a clear error lists the known names."""
    try:
        return BACKENDS[name]()
    except KeyError:
        known = ", ".join(sorted(BACKENDS))
        raise ConfigError(f"unknown API {name!r}: use one of {known}") from None


def default_api_for_url(url: str) -> str:
    """Guess the protocol from a URL: Anthropic's own host its Messages API, ``/v1`` OpenAI chat, port 11434
    Ollama."""
    stripped = url.rstrip("/")
    if "://api.anthropic.com" in stripped:
        return "anthropic-messages"
    if stripped.endswith("/v1") or "/v1/" in stripped:
        return "openai-chat"
    if ":11434" in stripped:
        return "ollama"
    return "openai-chat"
