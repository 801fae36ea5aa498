"""OpenAI-compatible streaming, both directions: chat completions and (legacy) completions.

Both speak SSE with ``data: {json}`` events and ``data: [DONE]``. With
``stream_options.include_usage`` the server ends with a usage-only event
(``choices: []``). vLLM, SGLang, TGI's Messages API, llama.cpp, Ollama's `/v1`
and TensorRT-LLM's OpenAI server all speak it; some add their own fields, and
llama.cpp adds ``timings``, which are read when present.

Client side: `OpenAIChat` / `OpenAICompletions` build requests and parse events. Server side:
`ChunkWriter` renders chunks as vLLM sends them (the simulator's streams, the gateway's translated
streams and cached replays, whole non-streamed answers), and `error_body` is OpenAI's error shape.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, ClassVar

import orjson

from tokometer.datasets.base import Prompt
from tokometer.wire.base import Backend, GenerationParams, HttpRequest, ParsedEvent, map_finish_reason
from tokometer.wire.serving import Count, RequestInfo, ServerProtocol, StreamTiming, opt_int, prompt_tokens
from tokometer.wire.timings import read_llamacpp_timings

__all__ = ["DONE", "ChunkWriter", "OpenAIChat", "OpenAIChatServer", "OpenAICompletions", "OpenAICompletionsServer",
           "error_body", "error_event"]

DONE = b"data: [DONE]\n\n"


class _OpenAIBase(Backend):
    supports_include_usage: ClassVar[bool] = True

    def _common(self, params: GenerationParams) -> dict[str, Any]:
        body: dict[str, Any] = {"model": params.model, "stream": True}
        if params.max_tokens is not None:
            body["max_tokens"] = params.max_tokens
        if params.temperature is not None:
            body["temperature"] = params.temperature
        if params.seed is not None:
            body["seed"] = params.seed
        if params.ignore_eos:
            body["ignore_eos"] = True
            body["min_tokens"] = params.max_tokens
        if self.wants_usage(params):
            body["stream_options"] = {"include_usage": True}
        body.update(params.extra_body)
        return body

    def parse(self, payload: bytes) -> ParsedEvent | None:
        if payload.startswith(b"[DONE]"):
            return ParsedEvent(done=True)
        data = orjson.loads(payload)
        if not isinstance(data, dict):
            raise ValueError("event is not a JSON object")
        event = ParsedEvent()
        error = data.get("error")
        if error:
            event.error = error.get("message", str(error)) if isinstance(error, dict) else str(error)
            return event
        choices = data.get("choices") or ()
        if choices:
            choice = choices[0]
            self._read_choice(choice, event)
            finish = choice.get("finish_reason")
            if finish:
                event.finish_reason = map_finish_reason(finish)
                event.meta = True
        usage = data.get("usage")
        if usage:
            event.prompt_tokens = usage.get("prompt_tokens")
            event.completion_tokens = usage.get("completion_tokens")
            details = usage.get("prompt_tokens_details")  # OpenAI; vLLM with --enable-prompt-tokens-details
            if isinstance(details, dict) and isinstance(details.get("cached_tokens"), int):
                event.cached_prompt_tokens = details["cached_tokens"]
            event.meta = True
        timings = data.get("timings")
        if timings:
            read_llamacpp_timings(timings, event)
            event.meta = True
        return event

    def _read_choice(self, choice: dict[str, Any], event: ParsedEvent) -> None:
        raise NotImplementedError


class OpenAIChat(_OpenAIBase):
    """``POST {base}/chat/completions`` with ``messages``."""

    name: ClassVar[str] = "openai-chat"

    def build(self, prompt: Prompt, params: GenerationParams) -> HttpRequest:
        body = self._common(params)
        body["messages"] = [{"role": m.role, "content": m.content} for m in prompt.messages]
        if prompt.max_tokens is not None and not params.ignore_eos:
            body["max_tokens"] = prompt.max_tokens
        return HttpRequest("/chat/completions", body)

    def _read_choice(self, choice: dict[str, Any], event: ParsedEvent) -> None:
        delta = choice.get("delta") or {}
        event.text = delta.get("content") or ""
        event.reasoning = delta.get("reasoning_content") or delta.get("reasoning") or ""


class OpenAICompletions(_OpenAIBase):
    """``POST {base}/completions`` with a plain ``prompt``."""

    name: ClassVar[str] = "openai-completions"

    def build(self, prompt: Prompt, params: GenerationParams) -> HttpRequest:
        body = self._common(params)
        body["prompt"] = prompt.text
        if prompt.max_tokens is not None and not params.ignore_eos:
            body["max_tokens"] = prompt.max_tokens
        return HttpRequest("/completions", body)

    def _read_choice(self, choice: dict[str, Any], event: ParsedEvent) -> None:
        event.text = choice.get("text") or ""


def error_body(message: str, kind: str = "server_error", code: str | int | None = None,
               param: str | None = None) -> dict[str, Any]:
    """``{"error": {...}}`` as OpenAI sends it."""
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def error_event(message: str, kind: str = "server_error", code: str | int | None = None) -> bytes:
    """An error reported inside a stream that has started (vLLM sends the error object as an event)."""
    return b"data: " + orjson.dumps(error_body(message, kind, code)) + b"\n\n"


class ChunkWriter:
    """Renders the OpenAI streaming chunks of one answer (chat or legacy completions) as vLLM does."""

    __slots__ = ("chat", "created", "id", "model", "object")

    def __init__(self, chat: bool, model: str, id: str | None = None, created: int | None = None) -> None:
        self.chat = chat
        self.model = model
        self.id = id or f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex[:24]}"
        self.created = int(time.time()) if created is None else created
        self.object = "chat.completion.chunk" if chat else "text_completion"

    def chunk(self, choices: list[dict[str, Any]], usage: dict[str, Any] | None = None) -> bytes:
        payload: dict[str, Any] = {"id": self.id, "object": self.object, "created": self.created,
                                   "model": self.model, "choices": choices}
        if usage is not None:
            payload["usage"] = usage
        return b"data: " + orjson.dumps(payload) + b"\n\n"

    def role(self) -> bytes:
        """The role-only first event of a chat stream (nothing for completions)."""
        if not self.chat:
            return b""
        return self.chunk([{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                            "finish_reason": None}])

    def content(self, text: str, reasoning: str = "") -> bytes:
        if self.chat:
            delta: dict[str, Any] = {"content": text}
            if reasoning:
                delta["reasoning_content"] = reasoning
            return self.chunk([{"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}])
        return self.chunk([{"index": 0, "text": text, "logprobs": None, "finish_reason": None}])

    def finish(self, reason: str) -> bytes:
        if self.chat:
            return self.chunk([{"index": 0, "delta": {}, "logprobs": None, "finish_reason": reason}])
        return self.chunk([{"index": 0, "text": "", "logprobs": None, "finish_reason": reason}])

    def usage(self, prompt_tokens: int, completion_tokens: int) -> bytes:
        return self.chunk([], {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                               "total_tokens": prompt_tokens + completion_tokens})

    def whole(self, text: str, reasoning: str, finish_reason: str, prompt_tokens: int,
              completion_tokens: int) -> dict[str, Any]:
        """The body of a non-streamed answer."""
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                 "total_tokens": prompt_tokens + completion_tokens}
        if self.chat:
            message: dict[str, Any] = {"role": "assistant", "content": text}
            if reasoning:
                message["reasoning_content"] = reasoning
            choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": finish_reason}
        else:
            choice = {"index": 0, "text": text, "finish_reason": finish_reason}
        return {"id": self.id, "object": "chat.completion" if self.chat else "text_completion",
                "created": self.created, "model": self.model, "choices": [choice], "usage": usage}


class _OpenAIServer(ServerProtocol):
    chat: ClassVar[bool]

    def _read_common(self, body: dict[str, Any], default_model: str, prompt_tokens: int) -> RequestInfo:
        options = body.get("stream_options") or {}
        max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
        return RequestInfo(
            model=str(body.get("model") or default_model),
            prompt_tokens=prompt_tokens,
            max_tokens=opt_int(max_tokens, "max_tokens"),
            ignore_eos=bool(body.get("ignore_eos")),
            include_usage=bool(isinstance(options, dict) and options.get("include_usage")),
            sent_stream_options="stream_options" in body,
        )

    def _writer(self, info: RequestInfo) -> ChunkWriter:
        if info.writer is None:
            info.writer = ChunkWriter(self.chat, info.model, info.id, info.created)
        return info.writer

    def start(self, info: RequestInfo) -> bytes:
        return self._writer(info).role()

    def tokens(self, info: RequestInfo, ids: list[int], text: str, done_before: int) -> bytes:
        return self._writer(info).content(text)

    def finish(self, info: RequestInfo, finish: str, completion_tokens: int, timing: StreamTiming) -> bytes:
        writer = self._writer(info)
        out = writer.finish(finish)
        if info.include_usage:
            out += writer.usage(info.prompt_tokens, completion_tokens)
        return out + DONE

    def error_event(self, message: str) -> bytes:
        return error_event(message, "server_error", 500)


class OpenAIChatServer(_OpenAIServer):
    path: ClassVar[str] = "/v1/chat/completions"
    chat: ClassVar[bool] = True

    def read(self, body: dict[str, Any], default_model: str, count: Count) -> RequestInfo:
        return self._read_common(body, default_model, prompt_tokens(body.get("messages"), count))


class OpenAICompletionsServer(_OpenAIServer):
    path: ClassVar[str] = "/v1/completions"
    chat: ClassVar[bool] = False

    def read(self, body: dict[str, Any], default_model: str, count: Count) -> RequestInfo:
        prompt = body.get("prompt")
        if not isinstance(prompt, str):
            raise ValueError("'prompt' must be a string")
        return self._read_common(body, default_model, count(prompt))
