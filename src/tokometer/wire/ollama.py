"""Ollama's native chat API: ``POST /api/chat``, NDJSON, one JSON object a line.

The last object has ``done: true`` and the engine's own counters: ``eval_count``
and ``eval_duration`` (decode, nanoseconds), ``prompt_eval_count`` and
``prompt_eval_duration`` (prefill), ``total_duration``. Ollama has no
``ignore_eos``; ``options.num_predict`` caps the length.
"""

from __future__ import annotations

from typing import Any, ClassVar

import orjson

from tokometer.datasets.base import Prompt
from tokometer.wire.base import Backend, GenerationParams, HttpRequest, ParsedEvent, map_finish_reason

__all__ = ["Ollama"]

_NS_PER_MS = 1_000_000.0


class Ollama(Backend):
    """``POST {base}/api/chat``."""

    name: ClassVar[str] = "ollama"
    framing: ClassVar[Any] = "ndjson"

    def build(self, prompt: Prompt, params: GenerationParams) -> HttpRequest:
        options: dict[str, Any] = {}
        max_tokens = prompt.max_tokens if prompt.max_tokens is not None and not params.ignore_eos else params.max_tokens
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
        if data.get("error"):
            event.error = str(data["error"])
            return event
        message = data.get("message") or {}
        event.text = message.get("content") or ""
        event.reasoning = message.get("thinking") or ""
        if data.get("done"):
            event.done = event.meta = True
            event.finish_reason = map_finish_reason(data.get("done_reason")) or "stop"
            event.completion_tokens_native = data.get("eval_count")
            event.prompt_tokens_native = data.get("prompt_eval_count")
            event.server_decode_n = data.get("eval_count")
            event.server_prompt_n = data.get("prompt_eval_count")
            event.server_decode_ms = _ms(data.get("eval_duration"))
            event.server_prompt_ms = _ms(data.get("prompt_eval_duration"))
            event.server_total_ms = _ms(data.get("total_duration"))
        return event


def _ms(ns: Any) -> float | None:
    return ns / _NS_PER_MS if isinstance(ns, (int, float)) else None
