"""Relay one request: route it, stream the answer back as it arrives, account for it.

An OpenAI-speaking upstream's events go to an OpenAI client byte for byte (the
usage-only event is dropped if the client did not ask for usage; the gateway
asks every upstream for it). Otherwise (another upstream protocol, or a client
speaking Anthropic's Messages or OpenAI's Responses API) each event is written
by the client protocol's `StreamWriter` (`tokometer.protocols.gateway_clients`), tool-call
deltas of an OpenAI-chat upstream included. While relaying, the gateway measures with the bench core:
every parsed event goes into the `StreamAssembly` of a `Measurement`
(`tokometer.gateway.outcome`), which fills a `RequestRecord` from the gateway's
point of view, so that TTFT, TPOT, tokens and E2E are `tokometer.metrics.request`'s.
The relay ends with a `RelayOutcome` (record, answer, upstream, status), which it
hands to whoever accounts for it.

The parts: `tokometer.gateway.clientstream` writes to the client (head, gathered
writes, end, JSON answers) and watches the connection; `tokometer.gateway.segments`
decides, when a segment ends, whether the answer ends, continues (route option
``continue_on_length``), resumes on the next upstream (``resume_midstream``) or
gives up; `tokometer.gateway.resume` builds the request that carries it on, and the
segments stream as one answer with one ending and one usage. The relay here takes
in the events and acts on those decisions. Nothing of this costs the events of an
answer that needs neither: the text so far is the `Answer` the relay keeps anyway.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson
from starlette.types import Receive, Scope, Send

from tokometer.gateway.clientstream import ClientStream
from tokometer.gateway.openai_format import MAX_KEPT_CHARS, Answer, whole
from tokometer.gateway.outcome import Measurement, RelayContext, RelayOutcome
from tokometer.gateway.resume import carry_on_body, stream_identity
from tokometer.gateway.router import AllUpstreamsFailed, Opened, Router, all_failed_body
from tokometer.gateway.segments import SegmentPolicy, SegmentState
from tokometer.gateway.upstream import UpstreamError, UpstreamEvent
from tokometer.inbound.jsonbody import BadBody, parse_object
from tokometer.protocols.common.base import ParsedEvent
from tokometer.protocols.common.chat_tools import tool_call_deltas
from tokometer.protocols.common.framing import sse_payload
from tokometer.protocols.gateway_clients import error_body as client_error_body
from tokometer.protocols.gateway_clients import relays_openai_bytes, writer_for
from tokometer.protocols.openai.client import DONE
from tokometer.protocols.openai.errors import error_body, error_event
from tokometer.protocols.tool_events import MARKERS, tool_delta_reader

if TYPE_CHECKING:
    from tokometer.client.assemble import StreamAssembly
    from tokometer.gateway.metrics import GatewayMetrics
    from tokometer.protocols.common.chat_tools import ToolCallDelta
    from tokometer.protocols.common.writer import StreamWriter

__all__ = ["Relay", "RelayContext", "RelayOutcome"]

log = logging.getLogger("tokometer.gateway")


class Relay:
    """The ASGI response of a routed request."""

    def __init__(self, ctx: RelayContext, router: Router, metrics: GatewayMetrics,
                 on_done: Callable[[RelayOutcome], None]) -> None:
        self.router = router
        self.metrics = metrics
        self.on_done = on_done
        self.ctx = ctx
        self.policy = SegmentPolicy.of(ctx.route, ctx.requested_max_tokens, ctx.body)
        self.answer = Answer()
        self.measure = Measurement(ctx)
        self.client: ClientStream | None = None
        self.opened: Opened | None = None
        self.error: str | None = None
        self._assembly: StreamAssembly | None = None  # the measurement's, once an upstream answers
        self._first: Opened | None = None  # the answer's first segment (continuations and resumes follow)
        self._writer: StreamWriter | None = None
        """Writes the client's events when the gateway does not relay an OpenAI upstream's bytes to an OpenAI
        client: a translated upstream, a non-streamed answer, an Anthropic or Responses client, a resume."""
        self._sent_role = False
        self._events = 0
        self._put: Callable[[bytes], None] = _no_client  # the client stream's `put`, once there is one
        self._held: list[bytes] = []
        """An OpenAI upstream's ending (finish, usage, ``[DONE]``): it waits, a continuation may follow."""
        self._resume = self.policy.resume
        # the text is needed for a non-streamed answer, the cache, a resume or a continuation, and only then kept
        self.answer.keep = not ctx.stream or ctx.cache_key is not None or self._resume or ctx.route.continue_on_length
        self._served_by: list[str] = []
        """Upstreams that served a segment cut off by a failure, then the one after (resume only)."""
        self._first_raw: bytes | None = None
        self._tool_markers: tuple[bytes, ...] = ()
        """The serving upstream's tool-call event markers (a Messages or Responses upstream; else none)."""
        self._tool_reader: Callable[[bytes], ToolCallDelta | None] | None = None
        """The first content event the client got, for the id/created/model of chunks the gateway writes."""

    # -- ASGI -------------------------------------------------------------------------------
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        client = self.client = ClientStream(send)
        self._put = client.put
        watcher = asyncio.create_task(client.watch(receive, self._cancel_upstream))
        try:
            await self._run()
        finally:
            watcher.cancel()
            if self.opened is not None:
                # Whatever ended the answer (the client gone, a failure given up on, an error event), an
                # upstream still answering must not go on into the void once its slot is given back.
                await self.opened.call.cancel()
                self.opened.release()
            self.on_done(self.measure.outcome(
                self.answer, self._events, self.opened, self._first, status=client.status, error=self.error,
                gone=client.gone, first_sent_ns=client.first_sent_ns, served_by=self._served_by))

    async def _cancel_upstream(self) -> None:
        if self.opened is not None:
            await self.opened.call.cancel()

    # -- the request ------------------------------------------------------------------------
    async def _run(self) -> None:
        ctx, client = self.ctx, self.client
        assert client is not None
        try:
            self.opened = await self.router.open(ctx.route, ctx.body, ctx.endpoint)
        except AllUpstreamsFailed as exc:
            await self._fail(exc.status, all_failed_body(ctx.route.model, exc))
            return
        except UpstreamError as exc:  # the request's own fault: pass the upstream's answer on
            await self._fail(exc.status or 502, _as_json(exc.body) or error_body(exc.detail, "invalid_request_error"))
            return
        opened = self._first = self.opened
        served = opened.upstream.cfg.model or str(ctx.body.get("model", ""))
        self.answer.model = served
        assembly = self._assembly = self.measure.start(opened.call.backend, opened.call.sent_ns)
        client.content = assembly.content
        if not relays_openai_bytes(ctx.api) or not opened.upstream.openai or not ctx.stream:
            self._writer = self._new_writer(served)
        elif opened.buffered:
            self._first_raw = opened.buffered[-1].raw  # the first content event (or the whole empty answer)
        if ctx.stream:
            await client.head(200, b"text/event-stream", self._headers())
        resumes = 0
        while True:
            failure: UpstreamError | None = None
            try:
                await self._relay(opened)
            except UpstreamError as exc:
                # A connection that breaks after the answer's ending (a proxy dropping the last chunk)
                # lost nothing: the answer ends normally.
                failure = None if exc.category != "cancelled" and assembly.saw_done else exc
                if failure is None:
                    log.warning("upstream %s broke off after the answer's ending (%s: %s): answer complete",
                                opened.upstream.name, exc.category, exc.detail[:120])
            else:
                if self._resume and not assembly.saw_done and not client.gone and self._events:
                    failure = UpstreamError("reset", "the stream ended before its final event")
            if failure is not None and failure.category != "cancelled" and not client.gone:
                self.router.failed(opened.upstream.name, failure)
            if failure is None and not self.policy.may_continue(self.answer.finish_reason):
                break  # the common ending, decided without counting the answer's tokens
            decision = self.policy.decide(SegmentState(
                self.answer.finish_reason, assembly.output_tokens_so_far(), self.measure.segments, resumes,
                self.answer.cut, failure.category if failure is not None else None, client.gone,
                bool(self.error)))
            if failure is not None:
                resumed = None
                if decision.action == "resume":
                    resumes += 1
                    resumed = await self._resume_after(opened, failure)
                elif decision.why is not None:  # a resume was wanted and cannot be
                    self._note_failed(opened)
                    self.error = decision.why
                    self._count_resume(failure, "gave_up")
                if resumed is None:
                    self._give_up(opened, failure)
                    if ctx.stream and not client.gone:
                        message = self.error or failure.detail
                        await client.write(self._writer.error(message) if self._writer else error_event(message))
                    break
                opened = self.opened = resumed
                continue
            if decision.action != "continue":
                break
            body = self._carry_on()
            await opened.discard()
            try:
                opened = self.opened = await self.router.open(ctx.route, body, ctx.endpoint,
                                                              only=opened.upstream.name)
            except (AllUpstreamsFailed, UpstreamError) as exc:
                self.error = f"continuation failed: {exc}"
                break
        await self._finish_stream()

    def _give_up(self, opened: Opened, failure: UpstreamError) -> None:
        """The answer ends with ``failure`` (no resume, or none worked)."""
        record = self.measure.record
        if failure.category != "cancelled":
            record.error, record.error_detail = failure.category, failure.detail
        message = f"upstream {opened.upstream.name} failed mid-answer ({failure.category}): {failure.detail}"
        if self.error:  # a resume was tried and failed
            message = f"{message}; {self.error}"
        self.error = message if failure.category != "cancelled" else f"cancelled: {failure.detail}"

    def _note_failed(self, opened: Opened) -> None:
        if not self._served_by:
            self._served_by.append(opened.upstream.name)

    def _count_resume(self, failure: UpstreamError, result: str) -> None:
        self.metrics.resumes.labels(self.ctx.route.model, failure.category, result).inc()

    async def _resume_after(self, opened: Opened, failure: UpstreamError) -> Opened | None:
        """Carry the answer on from where ``opened`` broke off, on the next upstream that answers (None: none did;
        ``self.error`` says why)."""
        ctx, route = self.ctx, self.ctx.route
        failed = opened.upstream.name
        self._note_failed(opened)
        body = self._carry_on()
        await opened.discard()
        try:
            resumed = await self.router.open(route, body, ctx.endpoint, exclude=frozenset(self._served_by))
        except (AllUpstreamsFailed, UpstreamError) as exc:
            self.error = f"resume failed: {exc}"
            self._count_resume(failure, "gave_up")
            return None
        self._served_by.append(resumed.upstream.name)
        self._count_resume(failure, "resumed")
        assert self._assembly is not None
        log.info("resumed an answer of %r on %s after %s failed mid-answer (%s: %s), %d tokens in",
                 route.model, resumed.upstream.name, failed, failure.category, failure.detail[:120],
                 self._assembly.earlier_output_tokens)
        return resumed

    async def _relay(self, opened: Opened) -> None:
        # Events that are already here when one is relayed go to the client in one write: an upstream
        # read that brought several (the gateway fell behind) costs one send, not one each. Taking in an
        # event is plain code (`_event` only gathers what it writes): per event the relay costs one
        # function call and, when no further event is already here, one send.
        client = self.client
        assert client is not None
        api = opened.upstream.cfg.api
        self._tool_markers, self._tool_reader = MARKERS.get(api, ()), tool_delta_reader(api)
        batch = client.batch = []
        event_of, flush = self._event, client.flush
        try:
            for event in opened.buffered:
                event_of(event)
            opened.buffered = []
            await flush()
            call = opened.call
            async for event in opened.events:
                event_of(event)
                if client.gone:
                    raise UpstreamError("cancelled", "the client went away")
                if batch and not call.more:
                    await flush()
        finally:
            await flush()
            client.batch = None

    def _event(self, event: UpstreamEvent) -> None:
        """Take in one upstream event: the record, the answer so far, and what the client gets (gathered by
        ``_put``, which `_relay` sends)."""
        answer, p = self.answer, event.parsed
        self._events += 1
        if p is None or (not p.has_content and self._tool_markers):
            if self._tool_markers and any(marker in event.raw for marker in self._tool_markers):
                self._upstream_tool_call(event.raw)  # an event the measurement reads nothing in
            if p is None:
                return
        if p.error is not None and self._resume:
            raise UpstreamError("server_error_event", f"error event: {p.error[:200]}")
        assert self._assembly is not None
        self._assembly.add(event.stamp, p)
        if p.has_content:
            answer.add(p.text, p.reasoning)
        if p.finish_reason is not None:
            answer.finish_reason = p.finish_reason
        if p.error is not None:
            self.error = f"server_error_event: {p.error}"
        writer = self._writer
        if (p.tool_calls is not None or not p.has_content) and _TOOL_CALL in event.raw:
            # a tool call: output (it counts for TTFT like text, `tokometer.protocols.common.toolcalls`), the answer
            self.answer.has_tool_calls = True  # (not cached: the cache keeps text)
            if writer is not None:
                self._tool_calls(writer, event.raw)
        if not self.ctx.stream:
            return
        if writer is None:  # an OpenAI upstream and client: relay its bytes
            self._relay_openai(event, p)
        elif p.text or p.reasoning:
            self._put(writer.content(p.text, p.reasoning))

    def _tool_calls(self, writer: StreamWriter, raw: bytes) -> None:
        """An OpenAI chat event's tool-call deltas, kept (for a non-streamed answer) and translated into the
        client's protocol (an OpenAI client of an OpenAI upstream gets the event as it is: `_relay_openai`)."""
        answer, stream = self.answer, self.ctx.stream
        for delta in tool_call_deltas(sse_payload(raw) or b""):
            answer.tool_calls.add(delta)
            if stream:
                self._put(writer.tool_call(delta))

    def _upstream_tool_call(self, raw: bytes) -> None:
        """A Messages or Responses upstream's tool-call event, translated like a chat upstream's."""
        assert self._writer is not None and self._tool_reader is not None
        delta = self._tool_reader(sse_payload(raw) or b"")
        if delta is None:
            return
        self.answer.has_tool_calls = True
        self.answer.tool_calls.add(delta)
        if self.ctx.stream:
            self._put(self._writer.tool_call(delta))

    def _new_writer(self, model: str, ident: str | None = None, created: int | None = None) -> StreamWriter:
        ctx = self.ctx
        return writer_for(ctx.api, ctx.endpoint == "chat", model, ctx.include_usage, ctx.prompt_tokens,
                          ctx.requested_max_tokens, ident, created, opened=self._sent_role)

    def _relay_openai(self, event: UpstreamEvent, p: ParsedEvent) -> None:
        if p.has_content:
            self._put(event.raw)
            self._sent_role = True
            return
        if p.error is not None:
            self._put(event.raw)
            return
        # role-only, finish, usage and [DONE]: the first goes now, the ending waits (continuation may follow);
        # tool-call deltas carry no text but are the answer: every one goes on
        if p.finish_reason is None and not p.done and p.completion_tokens is None:
            if not self._sent_role or _TOOL_CALL in event.raw or _FUNCTION_CALL in event.raw:
                self._sent_role = True
                self._put(event.raw)
            return
        usage_only = p.completion_tokens is not None and p.finish_reason is None and not p.done
        if usage_only and not self.ctx.include_usage:
            return
        self._held.append(event.raw)

    def _carry_on(self) -> dict[str, Any]:
        """End the current segment; the request that carries the answer on (continuation or resume). From here
        on the gateway writes the chunks itself, as the client has seen them so far."""
        assembly, ctx = self._assembly, self.ctx
        assert assembly is not None
        limit = self.policy.carry_on_limit(self.answer.finish_reason)
        self.measure.end_segment()
        left = None if limit is None else limit - assembly.earlier_output_tokens
        self._held.clear()  # the ending of the cut-off segment is not the answer's ending
        self.answer.finish_reason = None
        if self._writer is None:
            ident, created, model = stream_identity(self._first_raw or b"")
            self._writer = self._new_writer(model or self.answer.model, ident, created)
        return carry_on_body(ctx.body, ctx.endpoint, self.answer.text, left)

    async def _finish_stream(self) -> None:
        ctx, answer, client = self.ctx, self.answer, self.client
        assert client is not None
        if not ctx.stream:
            if self.error and not answer.text:
                await self._fail(502, error_body(f"the upstream failed: {self.error}"))
                return
            if answer.cut:
                self.error = (f"the answer is longer than the {MAX_KEPT_CHARS:,} characters the gateway keeps for a "
                              "non-streamed answer")
                await self._fail(502, error_body(f"{self.error}: ask for it with \"stream\": true"))
                return
            assert self._writer is not None
            answer.completion_tokens = self.measure.output_tokens()
            answer.prompt_tokens = answer.prompt_tokens or self.measure.prompt_tokens() or ctx.prompt_tokens
            await client.json(200, whole(self._writer, answer), self._headers())
            return
        if client.gone:
            return
        client.batch = []  # the ending goes in one write with the response's last chunk (`end`)
        write = client.write
        if self._writer is not None:  # translated: write the ending ourselves
            if self.error:
                await write(self._writer.abort(self.error))
            else:
                final = self._assembly.final if self._assembly is not None and self.measure.segments == 1 else None
                await write(self._writer.ending(answer.finish_reason or "stop",
                                                self.measure.prompt_tokens() or ctx.prompt_tokens or 0,
                                                self.measure.output_tokens(),
                                                final.reasoning_tokens if final is not None else None,
                                                final.cached_prompt_tokens if final is not None else None))
        else:
            for raw in self._held:
                await write(raw)
            if not any(raw.startswith(b"data: [DONE]") for raw in self._held):
                await write(DONE)
        await client.end()

    # -- writing ----------------------------------------------------------------------------
    def _headers(self) -> list[tuple[bytes, bytes]]:
        """The response's headers besides its type: the upstream that answers, and the route's own."""
        headers: list[tuple[bytes, bytes]] = []
        if self.opened is not None:
            headers += [(b"x-tokometer-upstream", self.opened.upstream.name.encode()),
                        (b"x-tokometer-model", self.answer.model.encode()),
                        (b"x-tokometer-fallback", b"1" if self.opened.fallback else b"0")]
            if self.opened.hedge is not None:
                headers.append((b"x-tokometer-hedge", self.opened.hedge.encode()))
        headers += [(k.encode(), v.encode()) for k, v in self.ctx.headers.items()]
        return headers

    async def _fail(self, status: int, body: dict[str, Any]) -> None:
        client = self.client
        assert client is not None
        error = body.get("error")  # an upstream's: OpenAI's object, TGI's string, or anything
        self.error = self.error or str((error.get("message") if isinstance(error, dict) else error) or "")[:300]
        if client.sent_head:
            if self._writer is not None and not relays_openai_bytes(self.ctx.api):
                await client.write(self._writer.error(self.error))
            else:
                await client.write(b"data: " + orjson.dumps(body) + b"\n\n")
            await client.end()
            return
        await client.json(status, client_error_body(self.ctx.api, status, body), self._headers())


_TOOL_CALL = b'"tool_calls"'
_FUNCTION_CALL = b'"function_call"'


def _no_client(data: bytes) -> None:
    raise AssertionError("no client stream yet")


def _as_json(text: str) -> dict[str, Any] | None:
    """An upstream's error body as the JSON object to pass on, or None: not one, or nested deeper than the JSON
    depth limit (`parse_object`: orjson reads 1,024 levels but writes only 254, and the answer would fail)."""
    try:
        return parse_object(text.encode())
    except BadBody:
        return None
