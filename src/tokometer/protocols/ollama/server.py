"""Ollama's native chat API, server side: the simulator's ``/api/chat`` (`OllamaChatServer`)."""

from __future__ import annotations

from typing import Any, ClassVar

import orjson

from tokometer.protocols.common.server import (
    Count,
    ProtocolServer,
    RequestInfo,
    StreamTiming,
    opt_int,
    prompt_tokens,
    stream_field,
)

__all__ = ["OllamaChatServer"]

class OllamaChatServer(ProtocolServer):
    path: ClassVar[str] = "/api/chat"
    content_type: ClassVar[str] = "application/x-ndjson"
    carries_reasoning: ClassVar[bool] = True
    stream_default: ClassVar[bool | None] = True  # Ollama's API: /api/chat streams unless "stream": false
    models_path: ClassVar[str | None] = "/api/tags"

    def models(self, model: str, max_context: int, owner: str) -> dict[str, Any]:
        """``/api/tags``: ``{"models": [{"name", "model", "size"}]}``."""
        return {"models": [{"name": model, "model": model, "size": 0}]}

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
