"""One answer written as Anthropic's Messages API streams it: the server side, for the simulator and the gateway.

The one home of the Messages API's server-side shapes: the simulator's ``/v1/messages``
(`tokometer.protocols.anthropic_messages.server`) and the gateway's Anthropic clients
(`tokometer.protocols.gateway_clients`) write every event through `AnthropicStreamWriter`, so the two cannot
drift apart. The events, in the order `tokometer.protocols.anthropic_messages.client` reads them: ``message_start`` (the
message with empty ``content`` and ``usage.input_tokens``: the prompt tokens not read from the cache,
with ``cache_read_input_tokens`` where some were), a ``ping`` as the API sends one, then per content
block ``content_block_start``, ``content_block_delta``s and ``content_block_stop``: reasoning in a
``thinking`` block (``thinking_delta``, closed by a ``signature_delta``), the answer in a ``text`` block
(``text_delta``), each tool call in a ``tool_use`` block (``id``, ``name``, ``input: {}``, then
``input_json_delta`` with ``partial_json``); a new kind of content closes the open text or thinking block
and opens the next, with the next ``index``. A ``tool_use`` block stays open to the end of the answer and
takes all of its call's fragments, whatever comes between: an upstream may interleave two calls' deltas
(``delta.tool_calls`` index 0, then 1, then 0 again), and a stopped block cannot be reopened (a second block
of the call would start mid-JSON). Each delta names its block's ``index``, so deltas of open blocks may
interleave; the official ``anthropic`` SDK accumulates by that index (``content[event.index]``, its
partial JSON kept per index). The ``tool_use`` blocks are stopped at the end, in index order, after the
last text or thinking block, before ``message_delta``. (Buffering a call until it is whole would make the stream
well ordered for a client that ignores ``index``, but hold back the call's deltas, and their timing, to the
end, and keep their text.) Then ``message_delta`` (``stop_reason``: ``end_turn``, ``max_tokens`` or
``tool_use``; ``usage`` with ``input_tokens``, ``cache_read_input_tokens`` where known, and the
``output_tokens``) and ``message_stop``. An error inside the stream is an ``error`` event
(``{"type": "error", "error": {"type": "api_error", "message": ...}}``) and ends it; an HTTP error's
body is the same object (`anthropic_error_body`, its ``type`` by status from `error_type`).
"""

from __future__ import annotations

import uuid
from typing import Any

import orjson

from tokometer.protocols.common.chat_tools import MAX_CALLS, ToolCall, ToolCallDelta, arguments_object

__all__ = ["AnthropicStreamWriter", "anthropic_error_body", "anthropic_event", "error_type", "gateway_error_body",
           "gateway_writer", "stop_reason"]

_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 402: "billing_error",
                403: "permission_error", 404: "not_found_error", 413: "request_too_large",
                429: "rate_limit_error", 504: "timeout_error", 529: "overloaded_error"}

_PING = b'event: ping\ndata: {"type":"ping"}\n\n'


def error_type(status: int) -> str:
    """Anthropic's ``error.type`` for an HTTP status (``api_error`` for other server errors)."""
    return _ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")


def anthropic_error_body(error_kind: str, message: str) -> dict[str, Any]:
    """``{"type": "error", "error": {...}}`` as Anthropic sends it, in a body or an ``error`` event."""
    return {"type": "error", "error": {"type": error_kind, "message": message}}


def anthropic_event(payload: dict[str, Any]) -> bytes:
    """One streamed event: ``event: TYPE`` and the JSON ``data`` line."""
    return b"event: " + str(payload["type"]).encode() + b"\ndata: " + orjson.dumps(payload) + b"\n\n"


def stop_reason(finish_reason: str, tools: bool) -> str:
    """Anthropic's ``stop_reason`` for a finish reason (`tokometer.protocols.common.base.map_finish_reason`'s)."""
    if finish_reason == "length":
        return "max_tokens"
    return "tool_use" if tools else "end_turn"


def _usage(prompt_tokens: int, output_tokens: int, cached_tokens: int | None) -> dict[str, Any]:
    """Anthropic counts the prompt as its fresh and cache-read parts."""
    usage: dict[str, Any] = {"input_tokens": prompt_tokens - (cached_tokens or 0), "output_tokens": output_tokens}
    if cached_tokens is not None:
        usage["cache_read_input_tokens"] = cached_tokens
    return usage


class AnthropicStreamWriter:
    """Renders one answer's Messages API events (a `tokometer.protocols.common.writer.StreamWriter`).

    ``prompt_tokens`` and ``cached_tokens`` go in ``message_start``'s usage (the gateway's own count, and no
    cache count: the upstream's come at the end; the simulator's are the truth); ``signature`` closes a
    thinking block (the gateway has none to give).

    It keeps no text (the events carry it once): only the block index of each tool call, for at most `MAX_CALLS`
    calls (an upstream's further call indexes are dropped). A new kind of content always opens a new block,
    whatever their number: each costs one event. Each call is one ``tool_use`` block, open until `ending`."""

    __slots__ = ("_block", "_blocks", "_index", "_tool_blocks", "cached_tokens", "errored", "id", "model",
                 "prompt_tokens", "signature", "started", "tools")

    def __init__(self, model: str, prompt_tokens: int | None = None, ident: str | None = None,
                 cached_tokens: int | None = None, signature: str = "") -> None:
        self.model = model
        self.id = ident or f"msg_{uuid.uuid4().hex[:24]}"
        self.prompt_tokens = prompt_tokens
        self.cached_tokens = cached_tokens
        self.signature = signature
        self.started = False
        self.errored = False
        self.tools = False
        self._block: str | None = None  # the open text or thinking block's type
        self._index = -1  # its index
        self._blocks = 0  # the blocks started
        self._tool_blocks: dict[int, int] = {}  # a chat tool call's index -> its block's (open until the end)

    def _start(self) -> bytes:
        if self.started:
            return b""
        self.started = True
        message: dict[str, Any] = {
            "id": self.id, "type": "message", "role": "assistant", "model": self.model, "content": [],
            "stop_reason": None, "stop_sequence": None,
            "usage": _usage(self.prompt_tokens or 0, 1, self.cached_tokens)}  # output_tokens: a placeholder
        return anthropic_event({"type": "message_start", "message": message}) + _PING

    def _close(self) -> bytes:
        if self._block is None:
            return b""
        out = b""
        if self._block == "thinking":  # a thinking block ends with its signature
            out = anthropic_event({"type": "content_block_delta", "index": self._index,
                                   "delta": {"type": "signature_delta", "signature": self.signature}})
        self._block = None
        return out + anthropic_event({"type": "content_block_stop", "index": self._index})

    def _open(self, kind: str, block: dict[str, Any]) -> tuple[int, bytes]:
        """A new block (its index, and the events): the open text or thinking block closed first."""
        out = self._close()
        index = self._blocks
        self._blocks += 1
        if kind != "tool_use":
            self._block, self._index = kind, index
        return index, out + anthropic_event({"type": "content_block_start", "index": index, "content_block": block})

    def _delta(self, delta: dict[str, Any], index: int | None = None) -> bytes:
        return anthropic_event({"type": "content_block_delta", "index": self._index if index is None else index,
                                "delta": delta})

    def content(self, text: str, reasoning: str) -> bytes:
        out = [self._start()]
        if reasoning:
            if self._block != "thinking":
                out.append(self._open("thinking", {"type": "thinking", "thinking": "", "signature": ""})[1])
            out.append(self._delta({"type": "thinking_delta", "thinking": reasoning}))
        if text:
            if self._block != "text":
                out.append(self._open("text", {"type": "text", "text": ""})[1])
            out.append(self._delta({"type": "text_delta", "text": text}))
        return b"".join(out)

    def tool_call(self, delta: ToolCallDelta) -> bytes:
        block = self._tool_blocks.get(delta.index)
        if block is None and len(self._tool_blocks) >= MAX_CALLS:
            return b""  # a call past `MAX_CALLS`: dropped, as `ToolCalls` drops it for a non-streamed answer
        self.tools = True
        out = [self._start()]
        if block is None:  # a new call: its block, open until the end
            ident = delta.id or f"toolu_{uuid.uuid4().hex[:24]}"
            block, opened = self._open("tool_use", {"type": "tool_use", "id": ident, "name": delta.name or "",
                                                    "input": {}})
            self._tool_blocks[delta.index] = block
            out.append(opened)
        if delta.arguments:
            out.append(self._delta({"type": "input_json_delta", "partial_json": delta.arguments}, block))
        return b"".join(out)

    def ending(self, finish_reason: str, prompt_tokens: int, completion_tokens: int,
               reasoning_tokens: int | None = None, cached_tokens: int | None = None) -> bytes:
        out = self._start() + self._close() + b"".join(
            anthropic_event({"type": "content_block_stop", "index": block}) for block in self._tool_blocks.values())
        self._tool_blocks.clear()
        delta = {"stop_reason": stop_reason(finish_reason, self.tools), "stop_sequence": None}
        out += anthropic_event({"type": "message_delta", "delta": delta,
                                "usage": _usage(prompt_tokens, completion_tokens, cached_tokens)})
        return out + anthropic_event({"type": "message_stop"})

    def error(self, message: str) -> bytes:
        self.errored = True
        return anthropic_event(anthropic_error_body("api_error", message))

    def abort(self, message: str) -> bytes:
        return b"" if self.errored else self.error(message)

    def whole(self, text: str, reasoning: str, tool_calls: list[ToolCall], finish_reason: str,
              prompt_tokens: int, completion_tokens: int, cached_tokens: int | None = None) -> dict[str, Any]:
        """The body of a non-streamed answer (``cached_tokens``: where the server knows them)."""
        content: list[dict[str, Any]] = []
        if reasoning:
            content.append({"type": "thinking", "thinking": reasoning, "signature": self.signature})
        if text or not tool_calls:
            content.append({"type": "text", "text": text})
        content += [{"type": "tool_use", "id": call.id, "name": call.name, "input": arguments_object(call.arguments)}
                    for call in tool_calls]
        return {"id": self.id, "type": "message", "role": "assistant", "model": self.model, "content": content,
                "stop_reason": stop_reason(finish_reason, bool(tool_calls)), "stop_sequence": None,
                "usage": _usage(prompt_tokens, completion_tokens, cached_tokens)}


def gateway_writer(*, chat: bool, model: str, include_usage: bool, prompt_tokens: int | None,
                   max_tokens: int | None, ident: str | None, created: int | None,
                   opened: bool) -> AnthropicStreamWriter:
    """The writer of one answer to the gateway's Anthropic client
    (`tokometer.protocols.common.protocol.WriterFactory`)."""
    return AnthropicStreamWriter(model, prompt_tokens)


def gateway_error_body(status: int, openai_body: dict[str, Any]) -> dict[str, Any]:
    """An error the gateway answers (built in OpenAI's shape) in Anthropic's shape."""
    error = openai_body.get("error")
    message = error.get("message") if isinstance(error, dict) else None
    return anthropic_error_body(error_type(status), str(message or error or "error"))
