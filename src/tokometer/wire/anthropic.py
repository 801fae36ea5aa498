"""Anthropic's Messages API: ``POST {base}/messages``, streamed as named SSE events.

A request carries ``model``, ``messages`` (user and assistant turns; a system prompt goes in the
top-level ``system``), ``max_tokens`` (required) and ``stream``; the key goes in ``x-api-key`` and the
API version in ``anthropic-version``. Each event is an ``event: NAME`` line and a ``data:`` line whose
JSON ``type`` is NAME again (`tokometer.wire.framing.sse_payload` reads the data line). The stream:

- ``message_start``: the ``message`` with empty ``content`` and ``usage.input_tokens`` (prompt tokens
  not read from the cache; ``cache_read_input_tokens`` and ``cache_creation_input_tokens`` are the
  rest, so the prompt is their sum). Its ``usage.output_tokens`` is a placeholder and is not read;
- per content block: ``content_block_start`` (``text`` or ``thinking``), ``content_block_delta``s
  (``text_delta`` with ``text``, ``thinking_delta`` with ``thinking``; ``signature_delta`` and
  ``input_json_delta`` carry no text), ``content_block_stop``;
- ``message_delta``: ``delta.stop_reason`` (``end_turn``, ``max_tokens``, ``stop_sequence``,
  ``tool_use``) and the cumulative ``usage.output_tokens``;
- ``message_stop``: the end;
- ``ping`` at any point, and ``error`` (``error.type``, ``error.message``: ``overloaded_error``,
  ``api_error``, ...) in place of the rest.

An HTTP error's body is ``{"type": "error", "error": {"type": ..., "message": ...}}``.
``ignore_eos`` is sent only when asked for; the API itself has none (vLLM ignores it here).
"""

from __future__ import annotations

from typing import Any, ClassVar

import orjson

from tokometer.datasets.base import Prompt
from tokometer.messages import content_text, message_text
from tokometer.wire.base import Backend, GenerationParams, HttpRequest, ParsedEvent, answer_length, map_finish_reason
from tokometer.wire.numbers import count, obj, text_field
from tokometer.wire.server_protocol import (
    Count,
    RequestInfo,
    ServerProtocol,
    StreamTiming,
    no_field,
    opt_int,
    stream_field,
)

__all__ = ["ANTHROPIC_VERSION", "DEFAULT_MAX_TOKENS", "AnthropicMessages", "AnthropicMessagesServer",
           "anthropic_error_body", "anthropic_event", "error_type"]

ANTHROPIC_VERSION = "2023-06-01"
"""The ``anthropic-version`` header sent (the API's current version)."""

DEFAULT_MAX_TOKENS = 4096
"""``max_tokens`` when a run asks for no length: the API requires one."""

_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 402: "billing_error",
                403: "permission_error", 404: "not_found_error", 413: "request_too_large",
                429: "rate_limit_error", 504: "timeout_error", 529: "overloaded_error"}


def error_type(status: int) -> str:
    """Anthropic's ``error.type`` for an HTTP status (``api_error`` for other server errors)."""
    return _ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")


def anthropic_error_body(error_kind: str, message: str) -> dict[str, Any]:
    """``{"type": "error", "error": {...}}`` as Anthropic sends it, in a body or an ``error`` event."""
    return {"type": "error", "error": {"type": error_kind, "message": message}}


def anthropic_event(payload: dict[str, Any]) -> bytes:
    """One streamed event: ``event: TYPE`` and the JSON ``data`` line."""
    return b"event: " + str(payload["type"]).encode() + b"\ndata: " + orjson.dumps(payload) + b"\n\n"


class AnthropicMessages(Backend):
    """``POST {base}/messages``."""

    name: ClassVar[str] = "anthropic-messages"

    def build(self, prompt: Prompt, params: GenerationParams) -> HttpRequest:
        system = [m.content for m in prompt.messages if m.role == "system"]
        max_tokens = answer_length(prompt, params)
        body: dict[str, Any] = {
            "model": params.model,
            "messages": [{"role": m.role, "content": m.content} for m in prompt.messages if m.role != "system"],
            "max_tokens": DEFAULT_MAX_TOKENS if max_tokens is None else max_tokens,
            "stream": True,
        }
        if system:
            body["system"] = "\n".join(system)
        if params.temperature is not None:
            body["temperature"] = params.temperature
        if params.ignore_eos:
            body["ignore_eos"] = True
        body.update(params.extra_body)
        return HttpRequest("/messages", body)

    def auth_headers(self, api_key: str) -> dict[str, str]:
        return {"x-api-key": api_key}

    def fixed_headers(self) -> dict[str, str]:
        return {"anthropic-version": ANTHROPIC_VERSION}

    def parse(self, payload: bytes) -> ParsedEvent | None:
        data = orjson.loads(payload)
        if not isinstance(data, dict):
            raise ValueError("event is not a JSON object")
        kind = data.get("type")
        if kind == "content_block_delta":
            delta = obj(data.get("delta"))
            return ParsedEvent(text=text_field(delta, "text"), reasoning=text_field(delta, "thinking"))
        if kind == "content_block_start":  # empty as a rule; text in it is content all the same
            block = obj(data.get("content_block"))
            event = ParsedEvent(text=text_field(block, "text"), reasoning=text_field(block, "thinking"))
            return event if event.has_content else None
        if kind == "message_start":
            event = ParsedEvent(meta=True)
            _read_input(obj(obj(data.get("message")).get("usage")), event)
            return event
        if kind == "message_delta":
            event = ParsedEvent(meta=True)
            event.finish_reason = map_finish_reason(obj(data.get("delta")).get("stop_reason"))
            usage = obj(data.get("usage"))
            event.completion_tokens = count(event, "usage.output_tokens", usage.get("output_tokens"))
            if usage.get("input_tokens") is not None:
                _read_input(usage, event)
            return event
        if kind == "message_stop":
            return ParsedEvent(done=True)
        if kind == "error":
            error = obj(data.get("error"))
            message = str(error.get("message") or "error event")
            return ParsedEvent(error=f"{error['type']}: {message}" if error.get("type") else message)
        return None  # ping, content_block_stop, and event types added later


def _read_input(usage: dict[str, Any], event: ParsedEvent) -> None:
    fresh = count(event, "usage.input_tokens", usage.get("input_tokens"))
    read = count(event, "usage.cache_read_input_tokens", usage.get("cache_read_input_tokens"))
    written = count(event, "usage.cache_creation_input_tokens", usage.get("cache_creation_input_tokens"))
    if fresh is not None:
        event.prompt_tokens = fresh + (read or 0) + (written or 0)
    if read is not None:
        event.cached_prompt_tokens = read


def _prompt_tokens(body: dict[str, Any], count: Count) -> int:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ValueError("messages: at least one message is required")
    total = 0
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise ValueError(f"messages.{index}: must be an object with a role and a content")
        if message.get("role") not in ("user", "assistant"):
            raise ValueError(f"messages.{index}.role: must be 'user' or 'assistant'")
        content = message.get("content")
        if not isinstance(content, (str, list)):
            raise ValueError(f"messages.{index}.content: must be a string or an array of content blocks")
        total += count(message_text(message))
    system = body.get("system")
    if system is not None:
        if not isinstance(system, (str, list)):
            raise ValueError("system: must be a string or an array of text blocks")
        total += count(content_text(system))
    return total


class AnthropicMessagesServer(ServerProtocol):
    """The server side (the simulator): the event sequence Anthropic documents, a ``ping`` after
    ``message_start`` as the API sends one; reasoning in a ``thinking`` block before the ``text`` block."""

    path: ClassVar[str] = "/v1/messages"
    carries_reasoning: ClassVar[bool] = True
    stream_default: ClassVar[bool | None] = False

    def read(self, body: dict[str, Any], default_model: str, count: Count) -> RequestInfo:
        model = body.get("model")
        if model is not None and not isinstance(model, str):
            raise ValueError("model: must be a string")
        if body.get("max_tokens") is None:
            raise ValueError("max_tokens: Field required")
        ignore_eos = body.get("ignore_eos")
        if ignore_eos is not None and not isinstance(ignore_eos, bool):
            raise ValueError("ignore_eos: must be a boolean (true or false)")
        return RequestInfo(model=model or default_model, prompt_tokens=_prompt_tokens(body, count),
                           max_tokens=opt_int(body.get("max_tokens"), "max_tokens"), ignore_eos=bool(ignore_eos),
                           stream=stream_field(body, False))

    def _id(self, info: RequestInfo) -> str:
        return "msg_" + info.id.replace("-", "_")

    def _usage(self, info: RequestInfo, output_tokens: int) -> dict[str, Any]:
        cached = info.cached_tokens or 0
        usage: dict[str, Any] = {"input_tokens": info.prompt_tokens - cached, "output_tokens": output_tokens}
        if info.cached_tokens is not None:
            usage["cache_read_input_tokens"] = cached
        return usage

    def _start(self, info: RequestInfo) -> bytes:
        message: dict[str, Any] = {"id": self._id(info), "type": "message", "role": "assistant",
                                   "model": info.model, "content": [], "stop_reason": None,
                                   "stop_sequence": None, "usage": self._usage(info, 1)}
        return anthropic_event({"type": "message_start", "message": message}) + anthropic_event({"type": "ping"})

    def _text_index(self, info: RequestInfo) -> int:
        return 1 if info.reasoning_tokens else 0

    def _block_start(self, index: int, thinking: bool) -> bytes:
        block = {"type": "thinking", "thinking": "", "signature": ""} if thinking else {"type": "text", "text": ""}
        return anthropic_event({"type": "content_block_start", "index": index, "content_block": block})

    def _block_stop(self, index: int, thinking: bool) -> bytes:
        out = b""
        if thinking:  # a thinking block ends with its signature
            out = anthropic_event({"type": "content_block_delta", "index": index,
                                   "delta": {"type": "signature_delta", "signature": "c2ltdWxhdGVk"}})
        return out + anthropic_event({"type": "content_block_stop", "index": index})

    def tokens(self, info: RequestInfo, ids: list[int], text: str, done_before: int, reasoning: str = "") -> bytes:
        no_field(self, reasoning)
        out = [self._start(info)] if done_before == 0 else []
        if reasoning:
            if done_before == 0:
                out.append(self._block_start(0, True))
            out.append(anthropic_event({"type": "content_block_delta", "index": 0,
                                        "delta": {"type": "thinking_delta", "thinking": reasoning}}))
        if text:
            index = self._text_index(info)
            if done_before <= (info.reasoning_tokens or 0):  # the answer's first token is in this event
                if index:
                    out.append(self._block_stop(0, True))
                out.append(self._block_start(index, False))
            out.append(anthropic_event({"type": "content_block_delta", "index": index,
                                        "delta": {"type": "text_delta", "text": text}}))
        return b"".join(out)

    def finish(self, info: RequestInfo, finish: str, completion_tokens: int, timing: StreamTiming) -> bytes:
        if completion_tokens == 0:
            out = self._start(info)
        elif info.reasoning_tokens and info.reasoning_tokens >= completion_tokens:
            out = self._block_stop(0, True)  # the answer was all thinking
        else:
            out = self._block_stop(self._text_index(info), False)
        delta = {"stop_reason": "max_tokens" if finish == "length" else "end_turn", "stop_sequence": None}
        out += anthropic_event({"type": "message_delta", "delta": delta,
                                "usage": {"output_tokens": completion_tokens}})
        return out + anthropic_event({"type": "message_stop"})

    def whole(self, info: RequestInfo, text: str, reasoning: str, ids: list[int], finish: str,
              completion_tokens: int, timing: StreamTiming) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        if reasoning:
            content.append({"type": "thinking", "thinking": reasoning, "signature": "c2ltdWxhdGVk"})
        content.append({"type": "text", "text": text})
        return {"id": self._id(info), "type": "message", "role": "assistant", "model": info.model,
                "content": content, "stop_reason": "max_tokens" if finish == "length" else "end_turn",
                "stop_sequence": None, "usage": self._usage(info, completion_tokens)}

    def error_event(self, message: str) -> bytes:
        return anthropic_event(anthropic_error_body("api_error", message))

    def malformed(self) -> bytes:
        return b'event: content_block_delta\ndata: {"type": "content_block_delta", "delta": {"text": "bro\n\n'

    def error_body(self, status: int, message: str, kind: str) -> dict[str, Any]:
        return anthropic_error_body(error_type(status), message)
