"""The protocols the simulator speaks, by path: the server side of each registered protocol that has one.

OpenAI chat and completions (SSE, as vLLM sends them), OpenAI Responses ``/v1/responses`` and
Anthropic Messages ``/v1/messages`` (named SSE events, as the two APIs document them), Ollama
``/api/chat`` (NDJSON), TGI ``/generate_stream`` (SSE, one token per event) and llama.cpp
``/completion``: each `tokometer.protocols.registry.Protocol`'s ``server``. The simulator's tokenizer is
`count_words`: one whitespace-separated word is one token.
"""

from __future__ import annotations

from tokometer.inbound.shapes import Shape
from tokometer.protocols.common.server import ProtocolServer
from tokometer.protocols.registry import PROTOCOLS

__all__ = ["REQUESTS", "SERVERS", "count_words"]


def count_words(text: str) -> int:
    """The simulator's tokenizer: one whitespace-separated word is one token."""
    return len(text.split())


SERVERS: dict[str, ProtocolServer] = {
    protocol.server.path: protocol.server() for protocol in PROTOCOLS.values() if protocol.server is not None
}
"""The server side of each protocol the simulator streams, by its path."""

REQUESTS: dict[str, Shape] = {
    protocol.server.path: protocol.request for protocol in PROTOCOLS.values()
    if protocol.server is not None and protocol.request is not None
}
"""The request shape of each protocol the simulator streams, by its path (checked before its server reads it)."""
