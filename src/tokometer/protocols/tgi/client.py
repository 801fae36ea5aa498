"""Hugging Face TGI's native streaming API, client side: ``POST /generate_stream``.

Each SSE event carries exactly one token (``token.id``/``token.text``); the last
one also carries ``generated_text`` and, with ``parameters.details``,
``details.generated_tokens`` and ``details.finish_reason``. TGI has no
``ignore_eos``.
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

__all__ = ["TGI"]

class TGI(ProtocolClient):
    """``POST {base}/generate_stream``."""

    name: ClassVar[str] = "tgi"
    exact_event_tokens: ClassVar[bool] = True

    def build(self, prompt: Prompt, params: GenerationParams) -> HttpRequest:
        parameters: dict[str, Any] = {"details": True}
        max_tokens = answer_length(prompt, params)
        if max_tokens is not None:
            parameters["max_new_tokens"] = max_tokens
        if params.temperature:
            parameters["temperature"] = params.temperature
            parameters["do_sample"] = True
        if params.seed is not None:
            parameters["seed"] = params.seed
        body: dict[str, Any] = {"inputs": prompt.text, "parameters": parameters, "stream": True}
        body.update(params.extra_body)
        return HttpRequest("/generate_stream", body)

    def parse(self, payload: bytes) -> ParsedEvent | None:
        data = orjson.loads(payload)
        if not isinstance(data, dict):
            raise ValueError("event is not a JSON object")
        event = ParsedEvent()
        if (error := error_message(data.get("error"))) is not None:
            event.error = error
            return event
        token = data.get("token")
        if isinstance(token, dict):
            event.tokens = 1
            if not token.get("special"):
                event.text = text_field(token, "text")
        details = data.get("details")
        if isinstance(details, dict):
            event.done = event.meta = True
            event.finish_reason = map_finish_reason(details.get("finish_reason"))
            event.completion_tokens_native = count(event, "details.generated_tokens", details.get("generated_tokens"))
            event.prompt_tokens_native = count(event, "details.input_length", details.get("input_length"))
        elif data.get("generated_text") is not None:
            event.done = True
        return event
