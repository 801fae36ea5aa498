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
from tokometer.wire.base import Backend, GenerationParams, HttpRequest, ParsedEvent, answer_length, map_finish_reason
from tokometer.wire.numbers import count, duration_ms, obj, text_field
from tokometer.wire.server_protocol import (
    Count,
    RequestInfo,
    ServerProtocol,
    StreamTiming,
    opt_int,
    prompt_tokens,
    stream_field,
)

__all__ = ["Ollama", "OllamaChatServer"]

_MS_PER_NS = 1e-6


class Ollama(Backend):
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
        if data.get("error"):
            event.error = str(data["error"])
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


class OllamaChatServer(ServerProtocol):
    path: ClassVar[str] = "/api/chat"
    content_type: ClassVar[str] = "application/x-ndjson"
    carries_reasoning: ClassVar[bool] = True
    stream_default: ClassVar[bool | None] = True  # Ollama's API: /api/chat streams unless "stream": false

    def read(self, body: dict[str, Any], default_model: str, count: Count) -> RequestInfo:
        options = body.get("options") or {}
        if not isinstance(options, dict):
            raise ValueError("'options' must be an object")
        return RequestInfo(
            model=str(body.get("model") or default_model),
            prompt_tokens=prompt_tokens(body.get("messages"), count),
            max_tokens=opt_int(options.get("num_predict"), "options.num_predict"),
            stream=stream_field(body, True),
        )

    def _payload(self, info: RequestInfo, content: str, thinking: str = "", **extra: Any) -> dict[str, Any]:
        message = {"role": "assistant", "content": content}
        if thinking:
            message["thinking"] = thinking
        payload: dict[str, Any] = {"model": info.model, "created_at": "2026-01-01T00:00:00Z", "message": message}
        payload.update(extra)
        return payload

    def _line(self, info: RequestInfo, content: str, thinking: str = "", **extra: Any) -> bytes:
        return orjson.dumps(self._payload(info, content, thinking, **extra)) + b"\n"

    def tokens(self, info: RequestInfo, ids: list[int], text: str, done_before: int, reasoning: str = "") -> bytes:
        return self._line(info, text, reasoning, done=False)

    def finish(self, info: RequestInfo, finish: str, completion_tokens: int, timing: StreamTiming) -> bytes:
        return orjson.dumps(self._final(info, "", "", finish, completion_tokens, timing)) + b"\n"

    def whole(self, info: RequestInfo, text: str, reasoning: str, ids: list[int], finish: str,
              completion_tokens: int, timing: StreamTiming) -> dict[str, Any]:
        return self._final(info, text, reasoning, finish, completion_tokens, timing)

    def _final(self, info: RequestInfo, text: str, reasoning: str, finish: str, completion_tokens: int,
               timing: StreamTiming) -> dict[str, Any]:
        return self._payload(
            info,
            text,
            reasoning,
            done=True,
            done_reason=finish,
            total_duration=int(timing.total_ms * 1e6),
            load_duration=0,
            prompt_eval_count=info.prompt_tokens,
            prompt_eval_duration=int(timing.prompt_ms * 1e6),
            eval_count=completion_tokens,
            eval_duration=int(timing.decode_ms * 1e6),
        )

    def error_event(self, info: RequestInfo, message: str) -> bytes:
        return orjson.dumps({"error": message}) + b"\n"

    def malformed(self) -> bytes:
        return b'{"message": {"content": "broken\n'

    def error_body(self, status: int, message: str, kind: str) -> dict[str, Any]:
        return {"error": message}
