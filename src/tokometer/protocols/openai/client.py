"""OpenAI-compatible streaming, client side: chat completions and (legacy) completions.

Both speak SSE with ``data: {json}`` events and ``data: [DONE]``. With
``stream_options.include_usage`` the server ends with a usage-only event
(``choices: []``). vLLM, SGLang, TGI's Messages API, llama.cpp, Ollama's `/v1`
and TensorRT-LLM's OpenAI server all speak it; some add their own fields, and
llama.cpp adds ``timings``, which are read when present.

`OpenAIChat` / `OpenAICompletions` build requests and parse events.
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
from tokometer.protocols.common.images import image_part
from tokometer.protocols.common.numbers import count, error_message, obj, text_field
from tokometer.protocols.common.spec_meta import read_spec_meta
from tokometer.protocols.common.toolcalls import read_tool_calls
from tokometer.protocols.llamacpp.timings import read_llamacpp_timings

__all__ = ["DONE", "REASONING_FIELDS", "OpenAIChat", "OpenAICompletions", "read_usage", "reasoning_tokens"]

DONE = b"data: [DONE]\n\n"

REASONING_FIELDS = ("reasoning_content", "reasoning")
"""The chat delta fields reasoning text comes in: ``reasoning_content`` (DeepSeek's API, SGLang, llama.cpp
``--reasoning-format deepseek``, vLLM before 0.11) and ``reasoning`` (vLLM from 0.11)."""


class _OpenAIBase(ProtocolClient):
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
        if (error := error_message(data.get("error"))) is not None:
            event.error = error
            return event
        choices = data.get("choices") or ()
        choice = None
        if choices:
            if not isinstance(choices, list):
                raise ValueError("'choices' is not a list")
            choice = obj(choices[0])
            self._read_choice(choice, event)
            finish = choice.get("finish_reason")
            if finish:
                event.finish_reason = map_finish_reason(finish)
                event.meta = True
        if read_spec_meta(data, choice, event):  # SGLang's meta_info, where an answer carries one
            event.meta = True
        usage = data.get("usage")
        if usage:
            read_usage(obj(usage), event)
            event.meta = True
        timings = data.get("timings")
        if timings:
            read_llamacpp_timings(obj(timings), event)
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
        if prompt.images:
            last = body["messages"][-1]
            last["content"] = [{"type": "text", "text": last["content"]}, *map(image_part, prompt.images)]
        if params.tools:
            body["tools"] = list(params.tools)
            if params.tool_choice is not None:
                body["tool_choice"] = params.tool_choice
        if (max_tokens := answer_length(prompt, params)) is not None:
            body["max_tokens"] = max_tokens
            if params.ignore_eos:  # the prompt's own length (a tenant's, a trace's): vLLM wants min <= max
                body["min_tokens"] = max_tokens
        return HttpRequest("/chat/completions", body)

    def _read_choice(self, choice: dict[str, Any], event: ParsedEvent) -> None:
        delta = obj(choice.get("delta"))
        event.text = text_field(delta, "content")
        # REASONING_FIELDS, spelled out: this runs for every event of every stream
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        event.reasoning = reasoning if isinstance(reasoning, str) else ""
        calls = delta.get("tool_calls")
        if calls:
            event.tool_calls = tools = read_tool_calls(calls)
            if tools is not None and tools.rejected:
                event.rejected = f"{event.rejected}; {tools.rejected}" if event.rejected else tools.rejected


def read_usage(usage: dict[str, Any], event: ParsedEvent) -> None:
    """OpenAI's ``usage`` object onto ``event``, every count through `tokometer.protocols.common.numbers.count`."""
    event.prompt_tokens = count(event, "usage.prompt_tokens", usage.get("prompt_tokens"))
    event.completion_tokens = count(event, "usage.completion_tokens", usage.get("completion_tokens"))
    details = obj(usage.get("prompt_tokens_details"))  # OpenAI; vLLM with --enable-prompt-tokens-details
    cached = count(event, "usage.prompt_tokens_details.cached_tokens", details.get("cached_tokens"))
    if cached is not None:
        event.cached_prompt_tokens = cached
    images = count(event, "usage.prompt_tokens_details.image_tokens", details.get("image_tokens"))
    if images is None:  # vLLM after 0.32 (--enable-prompt-tokens-details): tokens per modality
        images = count(event, "usage.prompt_tokens_details.multimodal_tokens.image",
                       obj(details.get("multimodal_tokens")).get("image"))
    if images is not None:
        event.image_tokens = images
    event.reasoning_tokens = reasoning_tokens(usage, event)


def reasoning_tokens(usage: dict[str, Any], event: ParsedEvent | None = None) -> int | None:
    """``usage.completion_tokens_details.reasoning_tokens``: the output tokens that were reasoning (OpenAI,
    DeepSeek, vLLM where it counts them); a value that is not a count is ``None`` (noted on ``event``)."""
    details = usage.get("completion_tokens_details")
    value = details.get("reasoning_tokens") if isinstance(details, dict) else None
    return count(event if event is not None else ParsedEvent(), "usage.completion_tokens_details.reasoning_tokens",
                 value)


class OpenAICompletions(_OpenAIBase):
    """``POST {base}/completions`` with a plain ``prompt``."""

    name: ClassVar[str] = "openai-completions"

    def build(self, prompt: Prompt, params: GenerationParams) -> HttpRequest:
        body = self._common(params)
        body["prompt"] = prompt.text
        if (max_tokens := answer_length(prompt, params)) is not None:
            body["max_tokens"] = max_tokens
            if params.ignore_eos:  # the prompt's own length (a tenant's, a trace's): vLLM wants min <= max
                body["min_tokens"] = max_tokens
        return HttpRequest("/completions", body)

    def _read_choice(self, choice: dict[str, Any], event: ParsedEvent) -> None:
        event.text = text_field(choice, "text")
