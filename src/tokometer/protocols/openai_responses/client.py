"""OpenAI's Responses API, client side: ``POST {base}/responses`` with ``input``, streamed as typed SSE events.

Every event is an SSE ``event: TYPE`` line and a ``data:`` line holding a JSON object whose ``type``
is TYPE again (the data line is what `tokometer.protocols.common.framing.sse_payload` reads). The ones read:

- ``response.output_text.delta``: answer text (``delta``);
- ``response.reasoning_text.delta`` (vLLM, open models) and ``response.reasoning_summary_text.delta``
  (OpenAI's reasoning models): reasoning text (``delta``);
- ``response.completed`` / ``response.incomplete``: the end, with the whole ``response`` object: its
  ``status`` (``completed``; ``incomplete`` with ``incomplete_details.reason`` ``max_output_tokens`` is
  a ``length`` finish; vLLM sends ``response.completed`` with status ``incomplete``) and ``usage``
  (``input_tokens``, ``output_tokens``, ``input_tokens_details.cached_tokens``,
  ``output_tokens_details.reasoning_tokens``);
- ``response.failed`` (``response.error.message``) and ``error`` (``message``, ``code``): failures.

The rest (``response.created``, ``response.in_progress``, ``response.output_item.added``,
``response.content_part.added``, the ``*.done`` events) carry nothing a measurement needs. There is no
``[DONE]`` sentinel. The request's length cap is ``max_output_tokens``; ``stream`` defaults to false.
The API has no ``seed``; ``ignore_eos`` is sent only when asked for (vLLM reads it). The server side
(these events written) is `tokometer.protocols.openai_responses.writer`; the simulator's endpoint,
`tokometer.protocols.openai_responses.server`.
"""

from __future__ import annotations

from typing import Any, ClassVar

import orjson

from tokometer.prompt import Prompt
from tokometer.protocols.common.base import GenerationParams, HttpRequest, ParsedEvent, ProtocolClient, answer_length
from tokometer.protocols.common.numbers import count, error_message, obj, text_field

__all__ = ["OpenAIResponses", "read_responses_usage"]

_REASONING_DELTAS = frozenset({"response.reasoning_text.delta", "response.reasoning_summary_text.delta"})
_FINAL = frozenset({"response.completed", "response.incomplete"})


class OpenAIResponses(ProtocolClient):
    """``POST {base}/responses``."""

    name: ClassVar[str] = "openai-responses"

    def build(self, prompt: Prompt, params: GenerationParams) -> HttpRequest:
        body: dict[str, Any] = {
            "model": params.model,
            "input": [{"role": m.role, "content": m.content} for m in prompt.messages],
            "stream": True,
        }
        if (max_tokens := answer_length(prompt, params)) is not None:
            body["max_output_tokens"] = max_tokens
        if params.temperature is not None:
            body["temperature"] = params.temperature
        if params.ignore_eos:
            body["ignore_eos"] = True
        body.update(params.extra_body)
        return HttpRequest("/responses", body)

    def parse(self, payload: bytes) -> ParsedEvent | None:
        data = orjson.loads(payload)
        if not isinstance(data, dict):
            raise ValueError("event is not a JSON object")
        kind = data.get("type")
        kind = kind if isinstance(kind, str) else ""  # looked up in sets: a list or an object is no known event
        if kind == "response.output_text.delta":
            return ParsedEvent(text=text_field(data, "delta"))
        if kind in _REASONING_DELTAS:
            return ParsedEvent(reasoning=text_field(data, "delta"))
        if kind in _FINAL:
            event = ParsedEvent(done=True, meta=True)
            response = obj(data.get("response"))
            event.finish_reason = _finish(response)
            usage = response.get("usage")
            if isinstance(usage, dict):
                read_responses_usage(usage, event)
            return event
        if kind == "response.failed":
            error = error_message(obj(data.get("response")).get("error"))
            return ParsedEvent(error=error or "response.failed without an error message")
        if kind == "error":  # the error in its own field, or the event's own code and message
            nested = data.get("error")
            return ParsedEvent(error=error_message(nested if isinstance(nested, dict) else data) or "error event")
        if kind is None and (error := error_message(data.get("error"))) is not None:  # an OpenAI error object
            return ParsedEvent(error=error)
        return None


def _finish(response: dict[str, Any]) -> Any:
    status = response.get("status")
    if status == "completed":
        return "stop"
    if status == "incomplete":
        reason = obj(response.get("incomplete_details")).get("reason")
        return "length" if reason in (None, "max_output_tokens") else "unknown"
    return None


def read_responses_usage(usage: dict[str, Any], event: ParsedEvent) -> None:
    """The Responses API's ``usage`` onto ``event``, every count through `tokometer.protocols.common.numbers.count`."""
    event.prompt_tokens = count(event, "usage.input_tokens", usage.get("input_tokens"))
    event.completion_tokens = count(event, "usage.output_tokens", usage.get("output_tokens"))
    cached = count(event, "usage.input_tokens_details.cached_tokens",
                   obj(usage.get("input_tokens_details")).get("cached_tokens"))
    if cached is not None:
        event.cached_prompt_tokens = cached
    event.reasoning_tokens = count(event, "usage.output_tokens_details.reasoning_tokens",
                                   obj(usage.get("output_tokens_details")).get("reasoning_tokens"))
