"""llama.cpp server's native API, client side: ``POST /completion`` with ``stream: true``.

Partial events carry ``content`` and the running ``tokens_predicted``; the last
has ``stop: true``, ``stop_type`` (``eos``/``word``/``limit``),
``tokens_evaluated`` and ``timings`` (``prompt_n``, ``prompt_ms``,
``predicted_n``, ``predicted_ms``; ``cache_n`` tokens came from the prompt cache).
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
from tokometer.protocols.common.numbers import count, error_message, text_field
from tokometer.protocols.llamacpp.timings import read_llamacpp_timings

__all__ = ["LlamaCpp"]

class LlamaCpp(ProtocolClient):
    """``POST {base}/completion``."""

    name: ClassVar[str] = "llamacpp"

    def build(self, prompt: Prompt, params: GenerationParams) -> HttpRequest:
        body: dict[str, Any] = {"prompt": prompt.text, "stream": True, "return_tokens": True}
        max_tokens = answer_length(prompt, params)
        if max_tokens is not None:
            body["n_predict"] = max_tokens
        if params.temperature is not None:
            body["temperature"] = params.temperature
        if params.seed is not None:
            body["seed"] = params.seed
        if params.ignore_eos:
            body["ignore_eos"] = True
        body.update(params.extra_body)
        return HttpRequest("/completion", body)

    def parse(self, payload: bytes) -> ParsedEvent | None:
        data = orjson.loads(payload)
        if not isinstance(data, dict):
            raise ValueError("event is not a JSON object")
        event = ParsedEvent()
        if (error := error_message(data.get("error"))) is not None:
            event.error = error
            return event
        event.text = text_field(data, "content")
        tokens = data.get("tokens")
        if isinstance(tokens, list) and tokens:
            event.tokens = len(tokens)
        if data.get("stop"):
            event.done = event.meta = True
            event.finish_reason = map_finish_reason(data.get("stop_type")) or "stop"
            event.completion_tokens_native = count(event, "tokens_predicted", data.get("tokens_predicted"))
            event.prompt_tokens_native = count(event, "tokens_evaluated", data.get("tokens_evaluated"))
            timings = data.get("timings")
            if isinstance(timings, dict):
                read_llamacpp_timings(timings, event)
        return event
