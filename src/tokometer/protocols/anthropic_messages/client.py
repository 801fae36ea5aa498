"""Anthropic's Messages API, client side: ``POST {base}/messages``, streamed as named SSE events.

A request carries ``model``, ``messages`` (user and assistant turns; a system prompt goes in the
top-level ``system``), ``max_tokens`` (required) and ``stream``; the key goes in ``x-api-key`` and the
API version in ``anthropic-version``. Each event is an ``event: NAME`` line and a ``data:`` line whose
JSON ``type`` is NAME again (`tokometer.protocols.common.framing.sse_payload` reads the data line). The stream:

- ``message_start``: the ``message`` with empty ``content`` and ``usage.input_tokens`` (prompt tokens
  not read from the cache; ``cache_read_input_tokens`` and ``cache_creation_input_tokens`` are the
  rest, so the prompt is their sum). Its ``usage.output_tokens`` is a placeholder and is not read;
- per content block: ``content_block_start`` (``text`` or ``thinking``), ``content_block_delta``s
  (``text_delta`` with ``text``, ``thinking_delta`` with ``thinking``; ``signature_delta`` and
  ``input_json_delta`` carry no text), ``content_block_stop``;
- ``message_delta``: ``delta.stop_reason`` (``end_turn``, ``max_tokens``, ``stop_sequence``,
  ``tool_use``) and the cumulative ``usage.output_tokens``;
- ``message_stop``: the end;
- ``ping`` at any point, and ``error`` (``error.type``, ``error.message``: ``overloaded_error``,
  ``api_error``, ...) in place of the rest.

An HTTP error's body is ``{"type": "error", "error": {"type": ..., "message": ...}}``. The server side
(these events written) is `tokometer.protocols.anthropic_messages.writer`; the simulator's endpoint,
`tokometer.protocols.anthropic_messages.server`.
``ignore_eos`` is sent only when asked for; the API itself has none (vLLM ignores it here).
"""

from __future__ import annotations

from typing import Any, ClassVar

import orjson

from tokometer.prompt import Prompt
from tokometer.protocols.common.base import (
    GenerationParams,
    HttpRequest,
    ParsedEvent,
    ProtocolClient,
    answer_length,
    map_finish_reason,
)
from tokometer.protocols.common.numbers import count, error_message, obj, text_field

__all__ = ["ANTHROPIC_VERSION", "DEFAULT_MAX_TOKENS", "AnthropicMessages"]

ANTHROPIC_VERSION = "2023-06-01"
"""The ``anthropic-version`` header sent (the API's current version)."""

DEFAULT_MAX_TOKENS = 4096
"""``max_tokens`` when a run asks for no length: the API requires one."""


class AnthropicMessages(ProtocolClient):
    """``POST {base}/messages``."""

    name: ClassVar[str] = "anthropic-messages"

    def build(self, prompt: Prompt, params: GenerationParams) -> HttpRequest:
        system = [m.content for m in prompt.messages if m.role == "system"]
        max_tokens = answer_length(prompt, params)
        body: dict[str, Any] = {
            "model": params.model,
            "messages": [{"role": m.role, "content": m.content} for m in prompt.messages if m.role != "system"],
            "max_tokens": DEFAULT_MAX_TOKENS if max_tokens is None else max_tokens,
            "stream": True,
        }
        if system:
            body["system"] = "\n".join(system)
        if params.temperature is not None:
            body["temperature"] = params.temperature
        if params.ignore_eos:
            body["ignore_eos"] = True
        body.update(params.extra_body)
        return HttpRequest("/messages", body)

    def auth_headers(self, api_key: str) -> dict[str, str]:
        return {"x-api-key": api_key}

    def fixed_headers(self) -> dict[str, str]:
        return {"anthropic-version": ANTHROPIC_VERSION}

    def parse(self, payload: bytes) -> ParsedEvent | None:
        data = orjson.loads(payload)
        if not isinstance(data, dict):
            raise ValueError("event is not a JSON object")
        kind = data.get("type")
        if kind == "content_block_delta":
            delta = obj(data.get("delta"))
            return ParsedEvent(text=text_field(delta, "text"), reasoning=text_field(delta, "thinking"))
        if kind == "content_block_start":  # empty as a rule; text in it is content all the same
            block = obj(data.get("content_block"))
            event = ParsedEvent(text=text_field(block, "text"), reasoning=text_field(block, "thinking"))
            return event if event.has_content else None
        if kind == "message_start":
            event = ParsedEvent(meta=True)
            _read_input(obj(obj(data.get("message")).get("usage")), event)
            return event
        if kind == "message_delta":
            event = ParsedEvent(meta=True)
            event.finish_reason = map_finish_reason(obj(data.get("delta")).get("stop_reason"))
            usage = obj(data.get("usage"))
            event.completion_tokens = count(event, "usage.output_tokens", usage.get("output_tokens"))
            if usage.get("input_tokens") is not None:
                _read_input(usage, event)
            return event
        if kind == "message_stop":
            return ParsedEvent(done=True)
        if kind == "error" or kind is None:  # an error event, or an API error object sent as one
            error = error_message(data.get("error"))
            if error is not None or kind == "error":
                return ParsedEvent(error=error or "error event")
        return None  # ping, content_block_stop, and event types added later


def _read_input(usage: dict[str, Any], event: ParsedEvent) -> None:
    fresh = count(event, "usage.input_tokens", usage.get("input_tokens"))
    read = count(event, "usage.cache_read_input_tokens", usage.get("cache_read_input_tokens"))
    written = count(event, "usage.cache_creation_input_tokens", usage.get("cache_creation_input_tokens"))
    if fresh is not None:
        event.prompt_tokens = fresh + (read or 0) + (written or 0)
    if read is not None:
        event.cached_prompt_tokens = read
