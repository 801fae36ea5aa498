"""The protocols the gateway's clients speak, and what each one changes on the request path.

A client speaks OpenAI chat or completions (``/v1/chat/completions``, ``/v1/completions``), Anthropic's
Messages API (``/v1/messages``) or OpenAI's Responses API (``/v1/responses``). Inside the gateway every
request is an OpenAI chat (or completions) request: a Messages or Responses body is translated on the way in
(each protocol's ``translate``: its registry entry's ``to_chat``), so that the prompt check, the cache, the
budgets, the router (retries, fallback, hedging) and the relay (resume, continuation) work on one shape, and
the answer is written back in the client's own protocol by its
`tokometer.protocols.common.writer.StreamWriter` (the Messages and Responses writers are the ones the
simulator writes its own streams with). Errors the gateway answers itself are written in the client's error
shape (`error_body`): OpenAI's ``{"error": {...}}`` for chat, completions and Responses clients, ``{"type":
"error", "error": {...}}`` for Anthropic's. Each of these facts is read from the client's protocol in
`tokometer.protocols.registry`.
"""

from __future__ import annotations

from typing import Any, Literal

from tokometer.protocols.common.protocol import Protocol
from tokometer.protocols.common.writer import StreamWriter
from tokometer.protocols.registry import PROTOCOLS

__all__ = ["CLIENT_PATHS", "ClientApi", "Endpoint", "api_name", "client_protocol", "error_body", "relays_openai_bytes",
           "to_chat_request", "writer_for"]

ClientApi = Literal["openai", "anthropic-messages", "openai-responses"]
"""The protocols the gateway's clients speak (``openai``: chat or completions, by the endpoint)."""


def api_name(api: ClientApi, endpoint: str) -> str:
    """The client's protocol in `tokometer bench --api`'s names (the request log's ``api``)."""
    return f"openai-{endpoint}" if api == "openai" else api


Endpoint = Literal["chat", "completions"]
"""Which of the gateway's two request shapes a client's request becomes inside it."""

_CLIENTS: dict[str, tuple[Endpoint, ClientApi]] = {
    "openai-chat": ("chat", "openai"), "openai-completions": ("completions", "openai"),
    "anthropic-messages": ("chat", "anthropic-messages"), "openai-responses": ("chat", "openai-responses")}
"""The protocols the gateway serves to clients, by their registry name."""


CLIENT_PATHS: dict[str, tuple[Endpoint, ClientApi]] = {
    server.path: client for name, client in _CLIENTS.items() if (server := PROTOCOLS[name].server) is not None}
"""The path a client of each protocol the gateway serves posts to (where its own servers answer it), with the
gateway's endpoint (``chat`` or ``completions``) and the client's protocol: the gateway's routes, declared once."""


def client_protocol(api: ClientApi, endpoint: str = "chat") -> Protocol:
    """The registry's entry of a client's protocol."""
    return PROTOCOLS[api_name(api, endpoint)]


def relays_openai_bytes(api: ClientApi) -> bool:
    """The client reads OpenAI chunks, the gateway's own shape: an OpenAI upstream's stream passes to it byte for
    byte, and it gets the usage only when it asks (``stream_options.include_usage``)."""
    return client_protocol(api).gateway_native


def to_chat_request(api: ClientApi, body: dict[str, Any]) -> dict[str, Any]:
    """The chat request a client's body asks for (an OpenAI client's is its own); ValueError: a bad field."""
    translate = client_protocol(api).to_chat
    return body if translate is None else translate(body)


def error_body(api: ClientApi, status: int, openai_body: dict[str, Any]) -> dict[str, Any]:
    """An error the gateway answers (built in OpenAI's shape) in the shape ``api``'s clients read."""
    shape = client_protocol(api).error_body
    return openai_body if shape is None else shape(status, openai_body)


def writer_for(api: ClientApi, chat: bool, model: str, include_usage: bool, prompt_tokens: int | None,
               max_tokens: int | None, ident: str | None = None, created: int | None = None,
               opened: bool = False) -> StreamWriter:
    """The writer of one answer to a client of ``api`` (``opened``: an OpenAI client has seen the stream's
    start already, relayed byte for byte)."""
    factory = client_protocol(api, "chat" if chat else "completions").writer
    assert factory is not None, f"the gateway serves no {api} clients"
    return factory(chat=chat, model=model, include_usage=include_usage, prompt_tokens=prompt_tokens,
                   max_tokens=max_tokens, ident=ident, created=created, opened=opened)
