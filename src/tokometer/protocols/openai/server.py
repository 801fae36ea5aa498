"""OpenAI chat and completions, server side: the simulator's `OpenAIChatServer` / `OpenAICompletionsServer`.

They read and check a request and render every chunk through `tokometer.protocols.openai.chunks.ChunkWriter`,
the writer the gateway's OpenAI clients get too.
"""

from __future__ import annotations

from typing import Any, ClassVar

from tokometer.protocols.common.images import image_parts, image_size, qwen2_vl_image_tokens
from tokometer.protocols.common.numbers import obj
from tokometer.protocols.common.server import (
    Count,
    ProtocolServer,
    RequestInfo,
    StreamTiming,
    no_field,
    opt_int,
    prompt_tokens,
    stream_field,
)
from tokometer.protocols.common.simtools import pick_tool
from tokometer.protocols.common.spec_meta import spec_meta_event
from tokometer.protocols.openai.chunks import ChunkWriter
from tokometer.protocols.openai.client import DONE
from tokometer.protocols.openai.errors import error_event
from tokometer.protocols.openai.request import check_request

__all__ = ["OpenAIChatServer", "OpenAICompletionsServer"]

class _OpenAIServer(ProtocolServer):
    chat: ClassVar[bool]
    carries_reasoning: ClassVar[bool] = False
    stream_default: ClassVar[bool | None] = False  # OpenAI's API reference: stream defaults to false
    models_path: ClassVar[str | None] = "/v1/models"

    def models(self, model: str, max_context: int, owner: str) -> dict[str, Any]:
        """``{"object": "list", "data": [...]}``, the entry with vLLM's ``max_model_len``."""
        return {"object": "list", "data": [{"id": model, "object": "model", "created": 0, "owned_by": owner,
                                            "max_model_len": max_context}]}

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
        if info.spec_counts is not None:
            out += spec_meta_event(*info.spec_counts)
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
    """The prompt tokens of a chat's images by Qwen2-VL's rule (`tokometer.protocols.common.images`); None: no images.
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
    """The tool the simulator calls (`tokometer.protocols.common.simtools`) for chat's ``tools``
    (``{"type": "function", "function": {"name": ...}}``) and ``tool_choice`` (none, auto, required or
    ``{"type": "function", "function": {"name": ...}}``). ValueError for tools that are not so."""
    if tools is None:
        return None
    if not isinstance(tools, list) or not all(
            isinstance(t, dict) and isinstance(t.get("function"), dict)
            and isinstance(t["function"].get("name"), str) for t in tools):
        raise ValueError("'tools' must be an array of {\"type\": \"function\", \"function\": {\"name\": ...}} objects")
    names = [t["function"]["name"] for t in tools]
    if isinstance(choice, dict):
        named = obj(choice.get("function")).get("name")
        if not isinstance(named, str):
            raise ValueError("'tool_choice' names a function that is not in 'tools'")
        return pick_tool(names, "required", named)
    if choice not in (None, "none", "auto", "required"):
        raise ValueError("'tool_choice' must be none, auto, required or {\"type\": \"function\", ...}")
    return pick_tool(names, "none" if choice == "none" else "auto")


class OpenAICompletionsServer(_OpenAIServer):
    path: ClassVar[str] = "/v1/completions"
    chat: ClassVar[bool] = False

    def read(self, body: dict[str, Any], default_model: str, count: Count) -> RequestInfo:
        check_request(body, chat=False)
        prompt = body.get("prompt")
        if not isinstance(prompt, str):
            raise ValueError("'prompt' must be a string")
        return self._read_common(body, default_model, count(prompt))
