"""One answer written as OpenAI's Responses API streams it: the server side, for the simulator and the gateway.

The one home of the Responses API's server-side shapes: the simulator's ``/v1/responses``
(`tokometer.wire.responses_server`) and the gateway's Responses clients (`tokometer.gateway.clientapi`)
write every event through `ResponsesStreamWriter`. The events, each with a ``sequence_number`` one above
the last: ``response.created`` and ``response.in_progress`` (the response, ``status: in_progress``); per
output item
``response.output_item.added``, its deltas and its ``*.done`` events, then
``response.output_item.done``: reasoning in a ``reasoning`` item (``response.reasoning_text.delta``,
as vLLM sends it), the answer in a ``message`` item (``response.content_part.added``,
``response.output_text.delta``, ``response.output_text.done``, ``response.content_part.done``), each
tool call in a ``function_call`` item (``call_id``, ``name``; ``response.function_call_arguments.delta``
and ``.done``). The end is ``response.completed`` (``response.incomplete`` with
``incomplete_details.reason: max_output_tokens`` for a ``length`` finish) carrying the whole response:
its ``output`` items and ``usage`` (``input_tokens``, ``output_tokens``, ``total_tokens``;
``input_tokens_details.cached_tokens`` and ``output_tokens_details.reasoning_tokens`` where known). An
error inside the stream is an ``error`` event (``code``, ``message``). The ``*.done`` events and the final
response repeat each item's text, so the writer keeps it (as `tokometer.wire.pieces.TextPieces`).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import orjson

from tokometer.wire.chat_tools import ToolCall, ToolCallDelta
from tokometer.wire.pieces import TextPieces

__all__ = ["ResponsesStreamWriter", "responses_event"]


def responses_event(payload: dict[str, Any]) -> bytes:
    """One streamed event as the API writes it: ``event: TYPE`` and the JSON ``data`` line."""
    return b"event: " + str(payload["type"]).encode() + b"\ndata: " + orjson.dumps(payload) + b"\n\n"


class _Item:
    __slots__ = ("call_id", "id", "kind", "name", "parts")

    def __init__(self, kind: str, ident: str, name: str = "", call_id: str = "") -> None:
        self.kind = kind
        self.id = ident
        self.name = name
        self.call_id = call_id
        self.parts = TextPieces()

    def text(self) -> str:
        return self.parts.text()

    def done(self) -> dict[str, Any]:
        """The item as ``response.output_item.done`` and the final response carry it."""
        if self.kind == "reasoning":
            return {"id": self.id, "type": "reasoning", "summary": [], "status": "completed",
                    "content": [{"type": "reasoning_text", "text": self.text()}]}
        if self.kind == "message":
            return {"id": self.id, "type": "message", "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": self.text(), "annotations": []}]}
        return {"id": self.id, "type": "function_call", "call_id": self.call_id, "name": self.name,
                "arguments": self.text(), "status": "completed"}


class ResponsesStreamWriter:
    """Renders one answer's Responses API events (a `tokometer.wire.stream_writer.StreamWriter`)."""

    __slots__ = ("_calls", "_item", "_items", "_seq", "created", "errored", "id", "max_output_tokens", "model",
                 "started")

    def __init__(self, model: str, max_output_tokens: int | None = None, ident: str | None = None,
                 created: int | None = None) -> None:
        self.model = model
        self.id = ident or f"resp_{uuid.uuid4().hex[:24]}"
        self.created = int(time.time()) if created is None else created
        self.max_output_tokens = max_output_tokens
        self.started = False
        self.errored = False
        self._seq = 0
        self._items: list[_Item] = []
        self._item: _Item | None = None  # the open item
        self._calls: dict[int, _Item] = {}  # a chat tool call's index -> its item

    def _event(self, kind: str, **fields: Any) -> bytes:
        out = responses_event({"type": kind, "sequence_number": self._seq, **fields})
        self._seq += 1
        return out

    def _response(self, status: str, usage: dict[str, Any] | None = None) -> dict[str, Any]:
        return {"id": self.id, "object": "response", "created_at": self.created, "status": status,
                "model": self.model, "output": [item.done() for item in self._items] if status != "in_progress"
                else [], "error": None,
                "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
                "max_output_tokens": self.max_output_tokens, "usage": usage}

    def _start(self) -> bytes:
        if self.started:
            return b""
        self.started = True
        response = self._response("in_progress")
        return self._event("response.created", response=response) + \
            self._event("response.in_progress", response=response)

    def _index(self, item: _Item) -> int:
        return self._items.index(item)

    def _close(self) -> bytes:
        item = self._item
        if item is None:
            return b""
        self._item = None
        index = self._index(item)
        out = b""
        if item.kind == "reasoning":
            out = self._event("response.reasoning_text.done", item_id=item.id, output_index=index, content_index=0,
                              text=item.text())
        elif item.kind == "message":
            part = {"type": "output_text", "text": item.text(), "annotations": []}
            out = self._event("response.output_text.done", item_id=item.id, output_index=index, content_index=0,
                              text=item.text(), logprobs=[]) + \
                self._event("response.content_part.done", item_id=item.id, output_index=index, content_index=0,
                            part=part)
        else:
            out = self._event("response.function_call_arguments.done", item_id=item.id, output_index=index,
                              arguments=item.text())
        return out + self._event("response.output_item.done", output_index=index, item=item.done())

    def _open(self, item: _Item) -> bytes:
        out = self._close()
        self._items.append(item)
        self._item = item
        index = len(self._items) - 1
        if item.kind == "reasoning":
            added: dict[str, Any] = {"id": item.id, "type": "reasoning", "summary": [], "content": [],
                                     "status": "in_progress"}
        elif item.kind == "message":
            added = {"id": item.id, "type": "message", "role": "assistant", "content": [], "status": "in_progress"}
        else:
            added = {"id": item.id, "type": "function_call", "call_id": item.call_id, "name": item.name,
                     "arguments": "", "status": "in_progress"}
        out += self._event("response.output_item.added", output_index=index, item=added)
        if item.kind == "message":
            out += self._event("response.content_part.added", item_id=item.id, output_index=index, content_index=0,
                               part={"type": "output_text", "text": "", "annotations": []})
        return out

    def _new_id(self, prefix: str) -> str:
        return f"{prefix}_{uuid.uuid4().hex[:24]}"

    def content(self, text: str, reasoning: str) -> bytes:
        out = [self._start()]
        if reasoning:
            if self._item is None or self._item.kind != "reasoning":
                out.append(self._open(_Item("reasoning", self._new_id("rs"))))
            assert self._item is not None
            self._item.parts.append(reasoning)
            out.append(self._event("response.reasoning_text.delta", item_id=self._item.id,
                                   output_index=len(self._items) - 1, content_index=0, delta=reasoning))
        if text:
            if self._item is None or self._item.kind != "message":
                out.append(self._open(_Item("message", self._new_id("msg"))))
            assert self._item is not None
            self._item.parts.append(text)
            out.append(self._event("response.output_text.delta", item_id=self._item.id,
                                   output_index=len(self._items) - 1, content_index=0, delta=text, logprobs=[]))
        return b"".join(out)

    def tool_call(self, delta: ToolCallDelta) -> bytes:
        out = [self._start()]
        item = self._calls.get(delta.index)
        if item is None or item is not self._item:
            item = _Item("function_call", self._new_id("fc"), delta.name or "", delta.id or self._new_id("call"))
            self._calls[delta.index] = item
            out.append(self._open(item))
        if delta.arguments:
            item.parts.append(delta.arguments)
            out.append(self._event("response.function_call_arguments.delta", item_id=item.id,
                                   output_index=len(self._items) - 1, delta=delta.arguments))
        return b"".join(out)

    def _usage(self, prompt_tokens: int, completion_tokens: int, reasoning_tokens: int | None = None,
               cached_tokens: int | None = None) -> dict[str, Any]:
        usage: dict[str, Any] = {"input_tokens": prompt_tokens, "output_tokens": completion_tokens,
                                 "total_tokens": prompt_tokens + completion_tokens}
        if cached_tokens is not None:  # the details only where the upstream said
            usage["input_tokens_details"] = {"cached_tokens": cached_tokens}
        if reasoning_tokens is not None:
            usage["output_tokens_details"] = {"reasoning_tokens": reasoning_tokens}
        return usage

    def ending(self, finish_reason: str, prompt_tokens: int, completion_tokens: int,
               reasoning_tokens: int | None = None, cached_tokens: int | None = None) -> bytes:
        out = self._start() + self._close()
        incomplete = finish_reason == "length"
        response = self._response("incomplete" if incomplete else "completed",
                                  self._usage(prompt_tokens, completion_tokens, reasoning_tokens, cached_tokens))
        return out + self._event("response.incomplete" if incomplete else "response.completed", response=response)

    def error(self, message: str) -> bytes:
        self.errored = True
        return self._event("error", code="server_error", message=message, param=None)

    def abort(self, message: str) -> bytes:
        return b"" if self.errored else self.error(message)

    def whole(self, text: str, reasoning: str, tool_calls: list[ToolCall], finish_reason: str,
              prompt_tokens: int, completion_tokens: int, reasoning_tokens: int | None = None,
              cached_tokens: int | None = None) -> dict[str, Any]:
        """The body of a non-streamed answer (``reasoning_tokens``, ``cached_tokens``: where the server knows)."""
        if reasoning:
            self._items.append(_Item("reasoning", self._new_id("rs")))
            self._items[-1].parts.append(reasoning)
        if text or not tool_calls:
            self._items.append(_Item("message", self._new_id("msg")))
            self._items[-1].parts.append(text)
        for call in tool_calls:
            self._items.append(_Item("function_call", self._new_id("fc"), call.name, call.id))
            self._items[-1].parts.append(call.arguments)
        return self._response("incomplete" if finish_reason == "length" else "completed",
                              self._usage(prompt_tokens, completion_tokens, reasoning_tokens, cached_tokens))
