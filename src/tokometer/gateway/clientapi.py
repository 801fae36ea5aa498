"""The protocols the gateway's clients speak, and what each one changes on the request path.

A client speaks OpenAI chat or completions (``/v1/chat/completions``, ``/v1/completions``),
Anthropic's Messages API (``/v1/messages``) or OpenAI's Responses API (``/v1/responses``). Inside the
gateway every request is an OpenAI chat (or completions) request: a Messages or Responses body is
translated on the way in (`tokometer.protocols.anthropic_messages.translate`,
`tokometer.protocols.openai_responses.translate`),
so that the prompt check, the cache, the budgets, the router (retries, fallback, hedging) and the
relay (resume, continuation) work on one shape, and the answer is written back in the client's own
protocol by its `tokometer.protocols.common.writer.StreamWriter` (the Messages and Responses writers are the
ones the simulator writes its own streams with). Errors the gateway answers itself are
written in the client's error shape (`error_body`): OpenAI's ``{"error": {...}}`` for chat,
completions and Responses clients, ``{"type": "error", "error": {...}}`` for Anthropic's.
"""

from __future__ import annotations

from typing import Any, Literal

from tokometer.protocols.anthropic_messages.translate import chat_request_from_anthropic
from tokometer.protocols.anthropic_messages.writer import AnthropicStreamWriter, anthropic_error_body, error_type
from tokometer.protocols.common.writer import StreamWriter
from tokometer.protocols.openai.chunks import ChunkWriter
from tokometer.protocols.openai.writer import OpenAIStreamWriter
from tokometer.protocols.openai_responses.translate import chat_request_from_responses
from tokometer.protocols.openai_responses.writer import ResponsesStreamWriter

__all__ = ["ClientApi", "api_name", "error_body", "to_chat_request", "writer_for"]

ClientApi = Literal["openai", "anthropic-messages", "openai-responses"]


def api_name(api: ClientApi, endpoint: str) -> str:
    """The client's protocol in `tokometer bench --api`'s names (the request log's ``api``)."""
    return f"openai-{endpoint}" if api == "openai" else api


def to_chat_request(api: ClientApi, body: dict[str, Any]) -> dict[str, Any]:
    """The chat request a client's body asks for (an OpenAI client's is its own); ValueError: a bad field."""
    if api == "anthropic-messages":
        return chat_request_from_anthropic(body)
    if api == "openai-responses":
        return chat_request_from_responses(body)
    return body


def error_body(api: ClientApi, status: int, openai_body: dict[str, Any]) -> dict[str, Any]:
    """An error the gateway answers (built in OpenAI's shape) in the shape ``api``'s clients read."""
    if api != "anthropic-messages":
        return openai_body
    error = openai_body.get("error")
    message = error.get("message") if isinstance(error, dict) else None
    return anthropic_error_body(error_type(status), str(message or error or "error"))


def writer_for(api: ClientApi, chat: bool, model: str, include_usage: bool, prompt_tokens: int | None,
               max_tokens: int | None, ident: str | None = None, created: int | None = None,
               opened: bool = False) -> StreamWriter:
    """The writer of one answer to a client of ``api`` (``opened``: an OpenAI client has seen the stream's
    start already, relayed byte for byte)."""
    if api == "anthropic-messages":
        return AnthropicStreamWriter(model, prompt_tokens)
    if api == "openai-responses":
        return ResponsesStreamWriter(model, max_tokens)
    return OpenAIStreamWriter(ChunkWriter(chat, model, ident, created), include_usage, opened)
