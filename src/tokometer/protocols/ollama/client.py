"""Ollama's native chat API, client side: ``POST /api/chat``, NDJSON, one JSON object a line.

The last object has ``done: true`` and the engine's own counters: ``eval_count``
and ``eval_duration`` (decode, nanoseconds), ``prompt_eval_count`` and
``prompt_eval_duration`` (prefill), ``total_duration``. Ollama has no
``ignore_eos``; ``options.num_predict`` caps the length.
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
from tokometer.protocols.common.numbers import count, duration_ms, error_message, obj, text_field

__all__ = ["Ollama"]

_MS_PER_NS = 1e-6


class Ollama(ProtocolClient):
    """``POST {base}/api/chat``."""

    name: ClassVar[str] = "ollama"
    framing: ClassVar[Any] = "ndjson"

    def build(self, prompt: Prompt, params: GenerationParams) -> HttpRequest:
        options: dict[str, Any] = {}
        max_tokens = answer_length(prompt, params)
        if max_tokens is not None:
            options["num_predict"] = max_tokens
        if params.temperature is not None:
            options["temperature"] = params.temperature
        if params.seed is not None:
            options["seed"] = params.seed
        body: dict[str, Any] = {
            "model": params.model,
            "messages": [{"role": m.role, "content": m.content} for m in prompt.messages],
            "stream": True,
            "options": options,
        }
        body.update(params.extra_body)
        return HttpRequest("/api/chat", body)

    def parse(self, payload: bytes) -> ParsedEvent | None:
        data = orjson.loads(payload)
        if not isinstance(data, dict):
            raise ValueError("line is not a JSON object")
        event = ParsedEvent()
        if (error := error_message(data.get("error"))) is not None:
            event.error = error
            return event
        message = obj(data.get("message"))
        event.text = text_field(message, "content")
        event.reasoning = text_field(message, "thinking")
        if data.get("done"):
            event.done = event.meta = True
            event.finish_reason = map_finish_reason(data.get("done_reason")) or "stop"
            event.completion_tokens_native = event.server_decode_n = count(event, "eval_count", data.get("eval_count"))
            event.prompt_tokens_native = event.server_prompt_n = count(event, "prompt_eval_count",
                                                                       data.get("prompt_eval_count"))
            event.server_decode_ms = duration_ms(event, "eval_duration", data.get("eval_duration"), _MS_PER_NS)
            event.server_prompt_ms = duration_ms(event, "prompt_eval_duration", data.get("prompt_eval_duration"),
                                                 _MS_PER_NS)
            event.server_total_ms = duration_ms(event, "total_duration", data.get("total_duration"), _MS_PER_NS)
        return event
