"""OpenAI-compatible streaming, both directions: chat completions and (legacy) completions.

Both speak SSE with ``data: {json}`` events and ``data: [DONE]``. With
``stream_options.include_usage`` the server ends with a usage-only event
(``choices: []``). vLLM, SGLang, TGI's Messages API, llama.cpp, Ollama's `/v1`
and TensorRT-LLM's OpenAI server all speak it; some add their own fields, and
llama.cpp adds ``timings``, which are read when present.

Client side: `OpenAIChat` / `OpenAICompletions` build requests and parse events. Server side:
`OpenAIChatServer` / `OpenAICompletionsServer` (the simulator's), rendering through
`tokometer.wire.openai_chunks.ChunkWriter` (re-exported here for the gateway's imports), and
`error_body` is OpenAI's error shape.
"""

from __future__ import annotations

from typing import Any, ClassVar

import orjson

from tokometer.datasets.base import Prompt
from tokometer.wire.base import Backend, GenerationParams, HttpRequest, ParsedEvent, answer_length, map_finish_reason
from tokometer.wire.images import image_part, image_parts, image_size, qwen2_vl_image_tokens
from tokometer.wire.numbers import count, obj, text_field
from tokometer.wire.openai_chunks import ChunkWriter
from tokometer.wire.openai_request import check_request
from tokometer.wire.server_protocol import (
    Count,
    RequestInfo,
    ServerProtocol,
    StreamTiming,
    no_field,
    opt_int,
    prompt_tokens,
    stream_field,
)
from tokometer.wire.timings import read_llamacpp_timings
from tokometer.wire.toolcalls import read_tool_calls

__all__ = ["DONE", "REASONING_FIELDS", "ChunkWriter", "OpenAIChat", "OpenAIChatServer", "OpenAICompletions",
           "OpenAICompletionsServer", "error_body", "error_event", "read_usage", "reasoning_tokens"]

DONE = b"data: [DONE]\n\n"

REASONING_FIELDS = ("reasoning_content", "reasoning")
"""The chat delta fields reasoning text comes in: ``reasoning_content`` (DeepSeek's API, SGLang, llama.cpp
``--reasoning-format deepseek``, vLLM before 0.11) and ``reasoning`` (vLLM from 0.11)."""


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
            event.error = str(error.get("message", error)) if isinstance(error, dict) else str(error)
            return event
        choices = data.get("choices") or ()
        if choices:
            if not isinstance(choices, list):
                raise ValueError("'choices' is not a list")
            choice = obj(choices[0])
            self._read_choice(choice, event)
            finish = choice.get("finish_reason")
            if finish:
                event.finish_reason = map_finish_reason(finish)
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
    """OpenAI's ``usage`` object onto ``event``, every count through `tokometer.wire.numbers.count`."""
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
        return HttpRequest("/completions", body)

    def _read_choice(self, choice: dict[str, Any], event: ParsedEvent) -> None:
        event.text = text_field(choice, "text")


def error_body(message: str, kind: str = "server_error", code: str | int | None = None,
               param: str | None = None) -> dict[str, Any]:
    """``{"error": {...}}`` as OpenAI sends it."""
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def error_event(message: str, kind: str = "server_error", code: str | int | None = None) -> bytes:
    """An error reported inside a stream that has started (vLLM sends the error object as an event)."""
    return b"data: " + orjson.dumps(error_body(message, kind, code)) + b"\n\n"


class _OpenAIServer(ServerProtocol):
    chat: ClassVar[bool]
    carries_reasoning: ClassVar[bool] = False
    stream_default: ClassVar[bool | None] = False  # OpenAI's API reference: stream defaults to false

    def _read_common(self, body: dict[str, Any], default_model: str, prompt_tokens: int) -> RequestInfo:
        options = body.get("stream_options") or {}
        max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
        return RequestInfo(
            model=str(body.get("model") or default_model),
            prompt_tokens=prompt_tokens,
            max_tokens=opt_int(max_tokens, "max_tokens"),
            ignore_eos=bool(body.get("ignore_eos")),
            stream=stream_field(body, False),
            include_usage=bool(isinstance(options, dict) and options.get("include_usage")),
            sent_stream_options="stream_options" in body,
        )

    def _writer(self, info: RequestInfo) -> ChunkWriter:
        writer = info.writer
        if not isinstance(writer, ChunkWriter):
            writer = info.writer = ChunkWriter(self.chat, info.model, info.id, info.created, info.reasoning_field)
        return writer

    def start(self, info: RequestInfo) -> bytes:
        return self._writer(info).role()

    def tokens(self, info: RequestInfo, ids: list[int], text: str, done_before: int, reasoning: str = "") -> bytes:
        return self._tokens(info, text, reasoning, last=False)

    def _tokens(self, info: RequestInfo, text: str, reasoning: str, last: bool) -> bytes:
        no_field(self, reasoning)
        writer = self._writer(info)
        writer.reasoning_field = info.reasoning_field  # the writer may predate the first reasoning (role event)
        if info.tool_name is None or reasoning or not (text or info.tool_started):
            return writer.content(text, reasoning)
        first, info.tool_started = not info.tool_started, True
        return writer.tool_call(info.tool_name, text, first, last)

    def last_tokens(self, info: RequestInfo, ids: list[int], text: str, done_before: int, finish: str,
                    timing: StreamTiming, reasoning: str = "") -> bytes:
        return (self._tokens(info, text, reasoning, last=finish != "length")
                + self.finish(info, finish, done_before + len(ids), timing))

    def finish(self, info: RequestInfo, finish: str, completion_tokens: int, timing: StreamTiming) -> bytes:
        writer = self._writer(info)
        out = writer.finish(_finish_reason(info, finish))
        if info.include_usage:
            reasoning = None if info.reasoning_tokens is None else min(info.reasoning_tokens, completion_tokens)
            out += writer.usage(info.prompt_tokens, completion_tokens, reasoning, info.cached_tokens,
                                info.image_tokens)
        return out + DONE

    def whole(self, info: RequestInfo, text: str, reasoning: str, ids: list[int], finish: str,
              completion_tokens: int, timing: StreamTiming) -> dict[str, Any]:
        writer = self._writer(info)
        writer.reasoning_field = info.reasoning_field
        body = writer.whole(text, reasoning, _finish_reason(info, finish), info.prompt_tokens, completion_tokens,
                            info.tool_name)
        if info.image_tokens is not None:
            body["usage"]["prompt_tokens_details"] = {"image_tokens": info.image_tokens}
        return body

    def error_event(self, info: RequestInfo, message: str) -> bytes:
        return error_event(message, "server_error", 500)


class OpenAIChatServer(_OpenAIServer):
    path: ClassVar[str] = "/v1/chat/completions"
    chat: ClassVar[bool] = True
    carries_reasoning: ClassVar[bool] = True

    def read(self, body: dict[str, Any], default_model: str, count: Count) -> RequestInfo:
        check_request(body, chat=True)
        messages = body.get("messages")
        images = _image_tokens(messages)
        info = self._read_common(body, default_model, prompt_tokens(messages, count) + (images or 0))
        info.image_tokens = images
        info.tool_name = _tool_to_call(body.get("tools"), body.get("tool_choice"))
        return info


def _finish_reason(info: RequestInfo, finish: str) -> str:
    return "tool_calls" if info.tool_name is not None and finish == "stop" else finish


def _image_tokens(messages: Any) -> int | None:
    """The prompt tokens of a chat's images by Qwen2-VL's rule (`tokometer.wire.images`); None: no images.
    ValueError for an image whose size cannot be read from the request (the simulator fetches nothing)."""
    total: int | None = None
    for message in messages if isinstance(messages, list) else ():
        for url in image_parts(message.get("content") if isinstance(message, dict) else None):
            size = image_size(url)
            if size is None:
                raise ValueError("image_url: the simulator takes PNG or JPEG images as data: URLs (base64) only")
            total = (total or 0) + qwen2_vl_image_tokens(*size)
    return total


def _tool_to_call(tools: Any, choice: Any) -> str | None:
    """The simulator's answer to a request with ``tools``: a call of the named function (``tool_choice``
    ``{"type": "function", "function": {"name": ...}}``), else of the first tool, unless ``tool_choice`` is
    ``none``; no tools, no call. ValueError for tools that are not function definitions with a name."""
    if tools is None:
        return None
    if not isinstance(tools, list) or not all(
            isinstance(t, dict) and isinstance(t.get("function"), dict)
            and isinstance(t["function"].get("name"), str) for t in tools):
        raise ValueError("'tools' must be an array of {\"type\": \"function\", \"function\": {\"name\": ...}} objects")
    if not tools or choice == "none":
        return None
    if isinstance(choice, dict):
        named = obj(choice.get("function")).get("name")
        if not isinstance(named, str) or named not in {t["function"]["name"] for t in tools}:
            raise ValueError("'tool_choice' names a function that is not in 'tools'")
        return named
    if choice not in (None, "auto", "required"):
        raise ValueError("'tool_choice' must be none, auto, required or {\"type\": \"function\", ...}")
    name: str = tools[0]["function"]["name"]
    return name


class OpenAICompletionsServer(_OpenAIServer):
    path: ClassVar[str] = "/v1/completions"
    chat: ClassVar[bool] = False

    def read(self, body: dict[str, Any], default_model: str, count: Count) -> RequestInfo:
        check_request(body, chat=False)
        prompt = body.get("prompt")
        if not isinstance(prompt, str):
            raise ValueError("'prompt' must be a string")
        return self._read_common(body, default_model, count(prompt))
