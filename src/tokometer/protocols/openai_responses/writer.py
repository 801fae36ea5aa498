"""One answer written as OpenAI's Responses API streams it: the server side, for the simulator and the gateway.

The one home of the Responses API's server-side shapes: the simulator's ``/v1/responses``
(`tokometer.protocols.openai_responses.server`) and the gateway's Responses clients
(`tokometer.protocols.gateway_clients`) write every event through `ResponsesStreamWriter`. The events, each
with a ``sequence_number`` one above the last: ``response.created`` and ``response.in_progress`` (the
response, ``status: in_progress``); per output item ``response.output_item.added``, its deltas and its
``*.done`` events, then ``response.output_item.done``: reasoning in a ``reasoning`` item
(``response.reasoning_text.delta``, as vLLM sends it), the answer in a ``message`` item
(``response.content_part.added``, ``response.output_text.delta``, ``response.output_text.done``,
``response.content_part.done``), each tool call in a ``function_call`` item (``call_id``, ``name``;
``response.function_call_arguments.delta`` and ``.done``). The end is ``response.completed``
(``response.incomplete`` with ``incomplete_details.reason: max_output_tokens`` for a ``length`` finish)
carrying the whole response: its ``output`` items and ``usage`` (``input_tokens``, ``output_tokens``,
``total_tokens``; ``input_tokens_details.cached_tokens`` and ``output_tokens_details.reasoning_tokens`` where
known). An error inside the stream is an ``error`` event (``code``, ``message``). The ``*.done`` events and
the final response repeat each item's text, so the writer keeps it (as
`tokometer.protocols.common.pieces.TextPieces`), up to `MAX_KEPT_CHARS` in all: past it the deltas still go on
whole, and the closing events carry the text kept, the item marked ``status: incomplete``. At most `MAX_ITEMS`
items open one after another, and tool calls of at most `MAX_CALLS` indexes (`ResponsesStreamWriter`), so that
no upstream can make the ending unbounded.

Each upstream tool call (by its chat ``index``) is one ``function_call`` item, open to the end of the answer:
an upstream may interleave two calls' deltas (index 0, then 1, then 0 again), and a closed item cannot take
more arguments (a second item of the call would leave both incomplete). So the ``function_call`` items are
closed at the end, in ``output_index`` order, and their deltas may interleave with those of the items that
follow them; each carries its item's ``output_index`` and ``item_id``, by which the official ``openai`` SDK
accumulates. A reasoning or message item is still closed when the next item opens (below `MAX_ITEMS`).
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import orjson

from tokometer.protocols.common.chat_tools import MAX_CALLS, ToolCall, ToolCallDelta
from tokometer.protocols.common.pieces import MAX_KEPT_CHARS, TextPieces

__all__ = ["MAX_ITEMS", "ResponsesStreamWriter", "gateway_writer", "responses_event"]

MAX_ITEMS = 256
"""Output items one stream opens one after another. Past it (an upstream alternating reasoning and text, or
tool-call indexes, every chunk) no item is closed before the end: the last item of each kind (reasoning, the
message, each tool call) stays open and takes all later deltas of its kind, so that a stream has at most
``MAX_ITEMS + 2 + MAX_CALLS`` items. Deltas of different open items then interleave, each with its item's
``output_index`` (the official ``openai`` SDK keys its accumulation by it). (A tool call's item is open to
the end, below the limit too: one item per call.)"""


def responses_event(payload: dict[str, Any]) -> bytes:
    """One streamed event as the API writes it: ``event: TYPE`` and the JSON ``data`` line."""
    return b"event: " + str(payload["type"]).encode() + b"\ndata: " + orjson.dumps(payload) + b"\n\n"


class _Item:
    __slots__ = ("call_id", "cut", "id", "index", "kind", "name", "parts")

    def __init__(self, kind: str, ident: str, index: int, name: str = "", call_id: str = "") -> None:
        self.kind = kind
        self.id = ident
        self.index = index  # its output_index
        self.name = name
        self.call_id = call_id
        self.parts = TextPieces()
        self.cut = False  # some of its text was not kept (`MAX_KEPT_CHARS`)

    def text(self) -> str:
        return self.parts.text()

    def done(self) -> dict[str, Any]:
        """The item as ``response.output_item.done`` and the final response carry it: ``status: incomplete``
        where its text is not all kept."""
        status = "incomplete" if self.cut else "completed"
        if self.kind == "reasoning":
            return {"id": self.id, "type": "reasoning", "summary": [], "status": status,
                    "content": [{"type": "reasoning_text", "text": self.text()}]}
        if self.kind == "message":
            return {"id": self.id, "type": "message", "role": "assistant", "status": status,
                    "content": [{"type": "output_text", "text": self.text(), "annotations": []}]}
        return {"id": self.id, "type": "function_call", "call_id": self.call_id, "name": self.name,
                "arguments": self.text(), "status": status}


class ResponsesStreamWriter:
    """Renders one answer's Responses API events (a `tokometer.protocols.common.writer.StreamWriter`).

    Bounded against an upstream that lies: the items' text kept to repeat in the closing events is at most
    `MAX_KEPT_CHARS` in all (past it the deltas still go on whole, and an item not kept whole is ``status:
    incomplete`` in its ``.done`` events and the final response, which carry the kept text); at most
    `MAX_ITEMS` items open one after another (then the last of each kind takes its kind's deltas); tool calls
    of at most `MAX_CALLS` indexes (further indexes are dropped, as `tokometer.protocols.common.chat_tools.ToolCalls`
    drops them for a non-streamed answer), each one item, open until `ending`."""

    __slots__ = ("_call_ids", "_calls", "_items", "_open", "_room", "_seq", "created", "errored", "id",
                 "max_output_tokens", "model", "started")

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
        self._open: dict[str | int, _Item] = {}  # the open items: "reasoning", "message", or a call's index
        self._calls: set[int] = set()  # the chat tool-call indexes seen (at most MAX_CALLS)
        self._call_ids: set[str] = set()  # the call_ids given (the SDK refuses two items of one)
        self._room = MAX_KEPT_CHARS  # text still to be kept

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

    def _keep(self, item: _Item, piece: str) -> None:
        """Keep ``piece`` of ``item``'s text, as far as `MAX_KEPT_CHARS` allows."""
        kept = piece[:self._room] if len(piece) > self._room else piece
        if len(kept) < len(piece):
            item.cut = True
        if kept:
            item.parts.append(kept)
            self._room -= len(kept)

    def _close(self, item: _Item) -> bytes:
        index, text = item.index, item.text()
        if item.kind == "reasoning":
            out = self._event("response.reasoning_text.done", item_id=item.id, output_index=index, content_index=0,
                              text=text)
        elif item.kind == "message":
            part = {"type": "output_text", "text": text, "annotations": []}
            out = self._event("response.output_text.done", item_id=item.id, output_index=index, content_index=0,
                              text=text, logprobs=[]) + \
                self._event("response.content_part.done", item_id=item.id, output_index=index, content_index=0,
                            part=part)
        else:
            out = self._event("response.function_call_arguments.done", item_id=item.id, output_index=index,
                              arguments=text)
        return out + self._event("response.output_item.done", output_index=index, item=item.done())

    def _close_all(self) -> bytes:
        items = sorted(self._open.values(), key=lambda item: item.index)
        self._open.clear()
        return b"".join(self._close(item) for item in items)

    def _close_content(self) -> bytes:
        """The open reasoning and message items closed (the tool calls' items stay open to the end)."""
        items = sorted((self._open.pop(key) for key in ("reasoning", "message") if key in self._open),
                       key=lambda item: item.index)
        return b"".join(self._close(item) for item in items)

    def _item(self, key: str | int, kind: str, name: str = "", call_id: str = "") -> tuple[_Item, bytes]:
        """The open item of ``key``, else a new one: the open reasoning or message item closed first while
        under `MAX_ITEMS` (so that until then at most one of them is open), none closed past it. A tool
        call's item is never closed before the end."""
        item = self._open.get(key)
        if item is not None:
            return item, b""
        out = self._close_content() if len(self._items) < MAX_ITEMS else b""
        prefix = {"reasoning": "rs", "message": "msg"}.get(kind, "fc")
        item = _Item(kind, self._new_id(prefix), len(self._items), name, call_id)
        self._items.append(item)
        self._open[key] = item
        index = item.index
        if kind == "reasoning":
            added: dict[str, Any] = {"id": item.id, "type": "reasoning", "summary": [], "content": [],
                                     "status": "in_progress"}
        elif kind == "message":
            added = {"id": item.id, "type": "message", "role": "assistant", "content": [], "status": "in_progress"}
        else:
            added = {"id": item.id, "type": "function_call", "call_id": item.call_id, "name": item.name,
                     "arguments": "", "status": "in_progress"}
        out += self._event("response.output_item.added", output_index=index, item=added)
        if kind == "message":
            out += self._event("response.content_part.added", item_id=item.id, output_index=index, content_index=0,
                               part={"type": "output_text", "text": "", "annotations": []})
        return item, out

    def _new_id(self, prefix: str) -> str:
        return f"{prefix}_{uuid.uuid4().hex[:24]}"

    def content(self, text: str, reasoning: str) -> bytes:
        out = [self._start()]
        if reasoning:
            item, opened = self._item("reasoning", "reasoning")
            self._keep(item, reasoning)
            out += [opened, self._event("response.reasoning_text.delta", item_id=item.id, output_index=item.index,
                                        content_index=0, delta=reasoning)]
        if text:
            item, opened = self._item("message", "message")
            self._keep(item, text)
            out += [opened, self._event("response.output_text.delta", item_id=item.id, output_index=item.index,
                                        content_index=0, delta=text, logprobs=[])]
        return b"".join(out)

    def tool_call(self, delta: ToolCallDelta) -> bytes:
        if delta.index not in self._calls:
            if len(self._calls) >= MAX_CALLS:
                return b""  # dropped, as `ToolCalls` drops it
            self._calls.add(delta.index)
        out = [self._start()]
        call_id = delta.id if delta.id is not None and delta.id not in self._call_ids else self._new_id("call")
        item, opened = self._item(delta.index, "function_call", delta.name or "", call_id)
        if opened:
            self._call_ids.add(item.call_id)
        out.append(opened)
        if delta.arguments:
            self._keep(item, delta.arguments)
            out.append(self._event("response.function_call_arguments.delta", item_id=item.id,
                                   output_index=item.index, delta=delta.arguments))
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
        out = self._start() + self._close_all()
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
        # (the answer's text and calls come bounded: `tokometer.gateway.openai_format.Answer`, `ToolCalls`)
        if reasoning:
            self._items.append(_Item("reasoning", self._new_id("rs"), len(self._items)))
            self._items[-1].parts.append(reasoning)
        if text or not tool_calls:
            self._items.append(_Item("message", self._new_id("msg"), len(self._items)))
            self._items[-1].parts.append(text)
        for call in tool_calls:
            self._items.append(_Item("function_call", self._new_id("fc"), len(self._items), call.name, call.id))
            self._items[-1].parts.append(call.arguments)
        return self._response("incomplete" if finish_reason == "length" else "completed",
                              self._usage(prompt_tokens, completion_tokens, reasoning_tokens, cached_tokens))


def gateway_writer(*, chat: bool, model: str, include_usage: bool, prompt_tokens: int | None,
                   max_tokens: int | None, ident: str | None, created: int | None,
                   opened: bool) -> ResponsesStreamWriter:
    """The writer of one answer to the gateway's Responses client
    (`tokometer.protocols.common.protocol.WriterFactory`)."""
    return ResponsesStreamWriter(model, max_tokens)
