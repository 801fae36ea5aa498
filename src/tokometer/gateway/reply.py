"""What the client gets of an answer's events: an upstream's bytes passed on, or events written anew.

An OpenAI-speaking upstream's events go to an OpenAI client byte for byte (`Reply.pass_on`): content
at once, the role-only first event and every tool-call delta too, the usage-only event dropped if the
client did not ask for usage, and the ending (finish, usage, ``[DONE]``) held back (`Reply.held`),
since a continuation may follow. Otherwise (another upstream protocol, a non-streamed answer, a
client speaking Anthropic's Messages or OpenAI's Responses API, or an answer carried on by a second
upstream request) the client protocol's `StreamWriter` (`Reply.writer`,
`tokometer.protocols.gateway_clients`) writes each event, tool calls included: an OpenAI chat upstream's
(`Reply.tool_calls`) and a Messages or Responses upstream's (`Reply.upstream_tool_call`).

`Reply.put` gathers what the client gets into the client stream's next send
(`tokometer.gateway.clientstream`); the relay (`tokometer.gateway.relay`) feeds the events in.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from tokometer.gateway.resume import stream_identity
from tokometer.protocols.common.chat_tools import tool_call_deltas
from tokometer.protocols.common.framing import sse_payload
from tokometer.protocols.gateway_clients import relays_openai_bytes, writer_for
from tokometer.protocols.openai.chunks import carries_call
from tokometer.protocols.openai.errors import error_event
from tokometer.protocols.tool_events import MARKERS, tool_delta_reader

if TYPE_CHECKING:
    from tokometer.gateway.openai_format import Answer
    from tokometer.gateway.outcome import RelayContext
    from tokometer.gateway.router import Opened
    from tokometer.gateway.upstream import UpstreamEvent
    from tokometer.protocols.common.base import ParsedEvent
    from tokometer.protocols.common.chat_tools import ToolCallDelta
    from tokometer.protocols.common.writer import StreamWriter

__all__ = ["Reply"]


class Reply:
    """The client's side of one answer's events: passed on as they came, or written by a `StreamWriter`."""

    __slots__ = ("_first_raw", "_sent_role", "answer", "ctx", "held", "put", "tool_markers", "tool_reader", "writer")

    def __init__(self, ctx: RelayContext, answer: Answer) -> None:
        self.ctx = ctx
        self.answer = answer
        self.writer: StreamWriter | None = None
        """Writes the client's events when the gateway does not relay an OpenAI upstream's bytes to an OpenAI
        client: a translated upstream, a non-streamed answer, an Anthropic or Responses client, a resume."""
        self.put: Callable[[bytes], None] = _no_client
        """The client stream's `put`, once there is one."""
        self.held: list[bytes] = []
        """An OpenAI upstream's ending (finish, usage, ``[DONE]``): it waits, a continuation may follow."""
        self.tool_markers: tuple[bytes, ...] = ()
        """The serving upstream's tool-call event markers (a Messages or Responses upstream; else none)."""
        self.tool_reader: Callable[[bytes], ToolCallDelta | None] | None = None
        self._sent_role = False
        self._first_raw: bytes | None = None
        """The first content event the client got, for the id/created/model of chunks the gateway writes."""

    def start(self, opened: Opened, served: str) -> None:
        """The first upstream answers (as model ``served``): pass its bytes on, or write the client's events."""
        ctx = self.ctx
        if not relays_openai_bytes(ctx.api) or not opened.upstream.openai or not ctx.stream:
            self.writer = self.new_writer(served)
        elif opened.buffered:
            self._first_raw = opened.buffered[-1].raw  # the first content event (or the whole empty answer)

    def serving(self, api: str) -> None:
        """An upstream speaking ``api`` serves the next segment: its tool-call events are read this way."""
        self.tool_markers, self.tool_reader = MARKERS.get(api, ()), tool_delta_reader(api)

    def pass_on(self, event: UpstreamEvent, p: ParsedEvent) -> None:
        """An OpenAI upstream's event to an OpenAI client, as it came (its ending held back)."""
        if p.has_content:
            self.put(event.raw)
            self._sent_role = True
            return
        if p.error is not None:
            self.put(event.raw)
            return
        # role-only, finish, usage and [DONE]: the first goes now, the ending waits (continuation may follow);
        # tool-call deltas carry no text but are the answer: every one goes on
        if p.finish_reason is None and not p.done and p.completion_tokens is None:
            if not self._sent_role or carries_call(event.raw):
                self._sent_role = True
                self.put(event.raw)
            return
        usage_only = p.completion_tokens is not None and p.finish_reason is None and not p.done
        if usage_only and not self.ctx.include_usage:
            return
        self.held.append(event.raw)

    def tool_calls(self, writer: StreamWriter, raw: bytes) -> None:
        """An OpenAI chat event's tool-call deltas, kept (for a non-streamed answer) and translated into the
        client's protocol (an OpenAI client of an OpenAI upstream gets the event as it is: `pass_on`)."""
        answer, stream = self.answer, self.ctx.stream
        for delta in tool_call_deltas(sse_payload(raw) or b""):
            answer.tool_calls.add(delta)
            if stream:
                self.put(writer.tool_call(delta))

    def upstream_tool_call(self, raw: bytes) -> None:
        """A Messages or Responses upstream's tool-call event, translated like a chat upstream's."""
        assert self.writer is not None and self.tool_reader is not None
        delta = self.tool_reader(sse_payload(raw) or b"")
        if delta is None:
            return
        self.answer.has_tool_calls = True
        self.answer.tool_calls.add(delta)
        if self.ctx.stream:
            self.put(self.writer.tool_call(delta))

    def new_writer(self, model: str, ident: str | None = None, created: int | None = None) -> StreamWriter:
        ctx = self.ctx
        return writer_for(ctx.api, ctx.endpoint == "chat", model, ctx.include_usage, ctx.prompt_tokens,
                          ctx.requested_max_tokens, ident, created, opened=self._sent_role)

    def restart(self) -> None:
        """A segment ends and another carries the answer on: its ending is not the answer's, and from here on
        the gateway writes the chunks itself, as the client has seen them so far."""
        self.held.clear()
        if self.writer is None:
            ident, created, model = stream_identity(self._first_raw or b"")
            self.writer = self.new_writer(model or self.answer.model, ident, created)

    def error_event(self, message: str) -> bytes:
        """The event that ends a streamed answer with an error, in the client's protocol."""
        return self.writer.error(message) if self.writer else error_event(message)


def _no_client(data: bytes) -> None:
    raise AssertionError("no client stream yet")
