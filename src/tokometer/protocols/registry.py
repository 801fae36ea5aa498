"""The protocols tokometer speaks, by name: the one registry.

`PROTOCOLS` maps a protocol's name (what ``--api`` takes, and the gateway's ``api`` of an upstream) to its
`Protocol`: its facts and its parts (client, simulator's server, writer, translation). Adding a protocol is
a new package under `tokometer.protocols` and one line here.
"""

from __future__ import annotations

from tokometer.protocols.anthropic_messages import MESSAGES
from tokometer.protocols.common.base import ProtocolClient
from tokometer.protocols.common.protocol import Protocol
from tokometer.protocols.embeddings import EMBEDDINGS, RERANK
from tokometer.protocols.llamacpp import LLAMACPP
from tokometer.protocols.ollama import OLLAMA
from tokometer.protocols.openai import CHAT, COMPLETIONS
from tokometer.protocols.openai_responses import RESPONSES
from tokometer.protocols.tgi import TGI_GENERATE
from tokometer.util.errors import ConfigError

__all__ = ["PROTOCOLS", "Protocol", "create_client", "default_api_for_url", "protocol_named"]

PROTOCOLS: dict[str, Protocol] = {
    p.name: p for p in (
        CHAT,
        COMPLETIONS,
        RESPONSES,
        MESSAGES,
        OLLAMA,
        TGI_GENERATE,
        LLAMACPP,
        EMBEDDINGS,
        RERANK,
    )
}


def protocol_named(name: str) -> Protocol:
    """The protocol called ``name``; a clear error lists the known names."""
    try:
        return PROTOCOLS[name]
    except KeyError:
        known = ", ".join(sorted(PROTOCOLS))
        raise ConfigError(f"unknown API {name!r}: use one of {known}") from None


def create_client(name: str) -> ProtocolClient:
    """A fresh client of protocol ``name``; a clear error lists the known names."""
    return protocol_named(name).client()


def default_api_for_url(url: str) -> str:
    """Guess the protocol from a URL: Anthropic's own host its Messages API, ``/v1`` OpenAI chat, port 11434
    Ollama."""
    stripped = url.rstrip("/")
    if "://api.anthropic.com" in stripped:
        return MESSAGES.name
    if stripped.endswith("/v1") or "/v1/" in stripped:
        return CHAT.name
    if ":11434" in stripped:
        return OLLAMA.name
    return CHAT.name
