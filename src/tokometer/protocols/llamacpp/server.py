"""llama.cpp server's native API, server side: the simulator's ``/completion`` (`LlamaCppServer`)."""

from __future__ import annotations

from typing import Any, ClassVar

import orjson

from tokometer.protocols.common.server import (
    Count,
    ProtocolServer,
    RequestInfo,
    StreamTiming,
    no_field,
    opt_int,
    stream_field,
)

__all__ = ["LlamaCppServer"]

class LlamaCppServer(ProtocolServer):
    path: ClassVar[str] = "/completion"
    stream_default: ClassVar[bool | None] = False  # llama.cpp server's README: "stream": default false

    def read(self, body: dict[str, Any], default_model: str, count: Count) -> RequestInfo:
        prompt = body.get("prompt")
        if not isinstance(prompt, str):
            raise ValueError("'prompt' must be a string")
        n_predict = body.get("n_predict")
        return RequestInfo(
            model=default_model,
            prompt_tokens=count(prompt),
            max_tokens=None if n_predict in (None, -1) else opt_int(n_predict, "n_predict"),
            ignore_eos=bool(body.get("ignore_eos")),
            return_tokens=bool(body.get("return_tokens")),
            stream=stream_field(body, False),
        )

    def tokens(self, info: RequestInfo, ids: list[int], text: str, done_before: int, reasoning: str = "") -> bytes:
        no_field(self, reasoning)
        payload = {
            "index": 0,
            "content": text,
            "tokens": ids if info.return_tokens else [],
            "stop": False,
            "id_slot": 0,
            "tokens_predicted": done_before + len(ids),
            "tokens_evaluated": info.prompt_tokens,
        }
        return b"data: " + orjson.dumps(payload) + b"\n\n"

    def finish(self, info: RequestInfo, finish: str, completion_tokens: int, timing: StreamTiming) -> bytes:
        return b"data: " + orjson.dumps(self._final(info, finish, completion_tokens, timing)) + b"\n\n"

    def whole(self, info: RequestInfo, text: str, reasoning: str, ids: list[int], finish: str,
              completion_tokens: int, timing: StreamTiming) -> dict[str, Any]:
        no_field(self, reasoning)
        return {**self._final(info, finish, completion_tokens, timing), "content": text,
                "tokens": ids if info.return_tokens else []}

    def _final(self, info: RequestInfo, finish: str, completion_tokens: int, timing: StreamTiming) -> dict[str, Any]:
        decode_n = max(completion_tokens - 1, 0)
        payload = {
            "index": 0,
            "content": "",
            "tokens": [],
            "id_slot": 0,
            "stop": True,
            "model": info.model,
            "tokens_predicted": completion_tokens,
            "tokens_evaluated": info.prompt_tokens,
            "stop_type": "limit" if finish == "length" else "eos",
            "stopping_word": "",
            "tokens_cached": info.prompt_tokens + completion_tokens,
            "timings": {
                "cache_n": info.cached_tokens or 0,
                "prompt_n": info.prompt_tokens - (info.cached_tokens or 0),  # llama.cpp: the cached ones apart
                "prompt_ms": timing.prompt_ms,
                "predicted_n": completion_tokens,
                "predicted_ms": timing.decode_ms,
                "predicted_per_token_ms": timing.decode_ms / decode_n if decode_n else 0.0,
            },
        }
        return payload

    def error_event(self, info: RequestInfo, message: str) -> bytes:
        return b"data: " + orjson.dumps({"error": {"code": 500, "message": message, "type": "server_error"}}) + b"\n\n"

    def error_body(self, status: int, message: str, kind: str) -> dict[str, Any]:
        return {"error": {"code": status, "message": message, "type": kind}}
