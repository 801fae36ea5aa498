"""OpenAI-compatible streaming: chat completions and (legacy) completions.

Both speak SSE with ``data: {json}`` events and ``data: [DONE]``. With
``stream_options.include_usage`` the server ends with a usage-only event
(``choices: []``). vLLM, SGLang, TGI's Messages API, llama.cpp, Ollama's `/v1`
and TensorRT-LLM's OpenAI server all speak it; some add their own fields, and
llama.cpp adds ``timings``, which are read when present.
"""

from __future__ import annotations

from typing import Any, ClassVar

import orjson

from tokometer.backends.base import Backend, GenerationParams, HttpRequest, ParsedEvent, map_finish_reason
from tokometer.backends.timings import read_llamacpp_timings
from tokometer.datasets.base import Prompt

__all__ = ["OpenAIChat", "OpenAICompletions"]


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
