"""Relay one request: route it, stream the answer back as it arrives, account for it.

`Relay` is the loop of one answer: open the first upstream request, take in each event, and
between segments let `tokometer.gateway.carryon` decide what comes next. While relaying, the
gateway measures with the bench core: every parsed event goes into the `StreamAssembly` of a
`Measurement` (`tokometer.gateway.outcome`), which fills a `RequestRecord` from the gateway's
point of view, so that TTFT, TPOT, tokens and E2E are `tokometer.metrics.request`'s. The relay
ends with a `RelayOutcome` (record, answer, upstream, status), which it hands to whoever accounts
for it.

The parts: `tokometer.gateway.reply` decides what the client gets of each event (an OpenAI
upstream's bytes passed on to an OpenAI client, or the events written in the client's protocol,
tool calls included); `tokometer.gateway.clientstream` writes to the client (head, gathered writes,
end, JSON answers) and watches the connection; `tokometer.gateway.carryon` says, when a segment
ends, whether it failed (and tells the router), and ends the answer, continues it (route option
``continue_on_length``), resumes it on the next upstream (``resume_midstream``) or gives up, with
the segment policy of `tokometer.gateway.segments` and the request of `tokometer.gateway.resume`;
the segments stream as one answer with one ending and one usage. Nothing of this costs the events
of an answer that needs neither: the text so far is the `Answer` the relay keeps anyway.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import orjson
from starlette.types import Receive, Scope, Send

from tokometer.gateway.carryon import CarryOn
from tokometer.gateway.clientstream import ClientStream
from tokometer.gateway.openai_format import MAX_KEPT_CHARS, Answer, whole
from tokometer.gateway.outcome import Measurement, RelayContext, RelayOutcome
from tokometer.gateway.reply import Reply
from tokometer.gateway.router import AllUpstreamsFailed, Opened, Router, all_failed_body
from tokometer.gateway.segments import SegmentPolicy
from tokometer.gateway.upstream import UpstreamError, UpstreamEvent
from tokometer.inbound.jsonbody import BadBody, parse_object
from tokometer.protocols.gateway_clients import error_body as client_error_body
from tokometer.protocols.gateway_clients import relays_openai_bytes
from tokometer.protocols.openai.chunks import carries_tool_calls
from tokometer.protocols.openai.client import DONE
from tokometer.protocols.openai.errors import error_body
from tokometer.util.shown import clipped

if TYPE_CHECKING:
    from tokometer.client.assemble import StreamAssembly
    from tokometer.gateway.prometheus import GatewayMetrics

__all__ = ["Relay", "RelayContext", "RelayOutcome"]


class Relay:
    """The ASGI response of a routed request: the loop of one answer."""

    def __init__(self, ctx: RelayContext, router: Router, metrics: GatewayMetrics,
                 on_done: Callable[[RelayOutcome], None]) -> None:
        self.router = router
        self.on_done = on_done
        self.ctx = ctx
        policy = SegmentPolicy.of(ctx.route, ctx.requested_max_tokens, ctx.body)
        self.answer = Answer()
        self.measure = Measurement(ctx)
        self.reply = Reply(ctx, self.answer)
        self.carry = CarryOn(ctx, router, metrics, policy, self.measure, self.answer, self.reply)
        self.client: ClientStream | None = None
        self.opened: Opened | None = None
        self.error: str | None = None
        self._assembly: StreamAssembly | None = None  # the measurement's, once an upstream answers
        self._first: Opened | None = None  # the answer's first segment (continuations and resumes follow)
        self._events = 0
        self._done_ns = 0  # a non-streamed answer: when its last upstream event arrived (the overhead's end)
        self._resume = policy.resume
        # the text is needed for a non-streamed answer, the cache, a resume or a continuation, and only then kept
        self.answer.keep = not ctx.stream or ctx.cache_key is not None or self._resume or ctx.route.continue_on_length

    # -- ASGI -------------------------------------------------------------------------------
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        client = self.client = ClientStream(send)
        self.reply.put = client.put
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
                gone=client.gone, first_sent_ns=client.first_sent_ns, served_by=self.carry.served_by,
                upstream_done_ns=self._done_ns))

    async def _cancel_upstream(self) -> None:
        if self.opened is not None:
            await self.opened.call.cancel()

    # -- the answer -------------------------------------------------------------------------
    async def _run(self) -> None:
        """Relay the answer's segments (one, unless it is continued or resumed: `tokometer.gateway.carryon`)."""
        opened = await self._open()
        if opened is None:
            return  # no upstream answered: the client has the error
        client, carry = self.client, self.carry
        assert client is not None
        while True:
            broke: UpstreamError | None = None
            try:
                await self._relay(opened)
            except UpstreamError as exc:
                broke = exc
            failure = carry.failure(opened, broke, self._events, client.gone)
            if failure is None and not carry.may_continue():
                break  # the common ending, decided without counting the answer's tokens
            following, self.error = await carry.next(opened, failure, client.gone, self.error)
            if following is None:
                if failure is not None and self.ctx.stream and not client.gone:
                    await client.write(self.reply.error_event(self.error or failure.detail))
                break
            opened = self.opened = following
        await self._finish_stream()

    async def _open(self) -> Opened | None:
        """The first upstream request, and the response's head (None: no upstream answered; the client has the
        error)."""
        ctx, client = self.ctx, self.client
        assert client is not None
        try:
            opened = self.opened = await self.router.open(ctx.route, ctx.body, ctx.endpoint)
        except AllUpstreamsFailed as exc:
            wait = exc.retry_after_s
            await self._fail(exc.status, all_failed_body(ctx.route.model, exc),
                             None if wait is None else [(b"retry-after", str(math.ceil(wait)).encode())])
            return None
        except UpstreamError as exc:  # the request's own fault: pass the upstream's answer on
            await self._fail(exc.status or 502, _as_json(exc.body) or error_body(exc.detail, "invalid_request_error"))
            return None
        self._first = opened
        served = opened.upstream.cfg.model or str(ctx.body.get("model", ""))
        self.answer.model = served
        assembly = self._assembly = self.measure.start(opened.call.backend, opened.call.sent_ns)
        client.content = assembly.content
        self.reply.start(opened, served)
        if ctx.stream:
            await client.head(200, b"text/event-stream", self._headers())
        return opened

    async def _relay(self, opened: Opened) -> None:
        # The events that are here when the relay wakes go to the client in one write: an upstream read
        # that brought several (or several reads while the gateway was behind) costs one send, not one each.
        # Taking in an event is plain code (`_event` only gathers what it writes): per event the relay costs
        # one function call, and per wake-up one send.
        client = self.client
        assert client is not None
        self.reply.serving(opened.upstream.cfg.api)
        client.batch = []
        event_of, flush = self._event, client.flush
        call = opened.call
        events: Iterable[UpstreamEvent] | None = opened.buffered  # (up to the first token: the router's)
        opened.buffered = []
        try:
            while events is not None:
                for event in events:
                    event_of(event)
                if client.gone:
                    raise UpstreamError("cancelled", "the client went away")
                if not call.ready:  # (the rest of the router's read is: it goes in the same send)
                    await flush()
                events = await call.take()
        finally:
            await flush()
            client.batch = None

    def _event(self, event: UpstreamEvent) -> None:
        """Take in one upstream event: the record, the answer so far, and what the client gets (gathered by
        the reply's ``put``, which `_relay` sends)."""
        answer, p, reply = self.answer, event.parsed, self.reply
        self._events += 1
        if p is None or (not p.has_content and reply.tool_markers):
            if reply.tool_markers and any(marker in event.raw for marker in reply.tool_markers):
                reply.upstream_tool_call(event.raw)  # an event the measurement reads nothing in
            if p is None:
                return
        if p.error is not None and self._resume:
            raise UpstreamError("server_error_event", f"error event: {clipped(p.error)}")
        assert self._assembly is not None
        self._assembly.add(event.stamp, p)
        if p.has_content:
            answer.add(p.text, p.reasoning)
        if p.finish_reason is not None:
            answer.finish_reason = p.finish_reason
        if p.error is not None:
            self.error = f"server_error_event: {p.error}"
        writer = reply.writer
        if (p.tool_calls is not None or not p.has_content) and carries_tool_calls(event.raw):
            # a tool call: output (it counts for TTFT like text, `tokometer.protocols.common.toolcalls`), the answer
            answer.has_tool_calls = True  # (not cached: the cache keeps text)
            if writer is not None:
                reply.tool_calls(writer, event.raw)
        if not self.ctx.stream:
            self._done_ns = event.stamp
            return
        if writer is None:  # an OpenAI upstream and client: relay its bytes
            reply.pass_on(event, p)
        elif p.text or p.reasoning:
            reply.put(writer.content(p.text, p.reasoning))

    async def _finish_stream(self) -> None:
        ctx, answer, client, writer = self.ctx, self.answer, self.client, self.reply.writer
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
            assert writer is not None
            answer.completion_tokens = self.measure.output_tokens()
            answer.prompt_tokens = answer.prompt_tokens or self.measure.prompt_tokens() or ctx.prompt_tokens
            await client.json(200, whole(writer, answer), self._headers())
            return
        if client.gone:
            return
        client.batch = []  # the ending goes in one write with the response's last chunk (`end`)
        write = client.write
        if writer is not None:  # translated: write the ending ourselves
            if self.error:
                await write(writer.abort(self.error))
            else:
                final = self._assembly.final if self._assembly is not None and self.measure.segments == 1 else None
                await write(writer.ending(answer.finish_reason or "stop",
                                          self.measure.prompt_tokens() or ctx.prompt_tokens or 0,
                                          self.measure.output_tokens(),
                                          final.reasoning_tokens if final is not None else None,
                                          final.cached_prompt_tokens if final is not None else None))
        else:
            held = self.reply.held
            for raw in held:
                await write(raw)
            if not any(raw.startswith(b"data: [DONE]") for raw in held):
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

    async def _fail(self, status: int, body: dict[str, Any], headers: list[tuple[bytes, bytes]] | None = None) -> None:
        client = self.client
        assert client is not None
        error = body.get("error")  # an upstream's: OpenAI's object, TGI's string, or anything
        self.error = self.error or str((error.get("message") if isinstance(error, dict) else error) or "")[:300]
        if client.sent_head:
            if self.reply.writer is not None and not relays_openai_bytes(self.ctx.api):
                await client.write(self.reply.writer.error(self.error))
            else:
                await client.write(b"data: " + orjson.dumps(body) + b"\n\n")
            await client.end()
            return
        await client.json(status, client_error_body(self.ctx.api, status, body), self._headers() + (headers or []))


def _as_json(text: str) -> dict[str, Any] | None:
    """An upstream's error body as the JSON object to pass on, or None: not one, or nested deeper than the JSON
    depth limit (`parse_object`: orjson reads 1,024 levels but writes only 254, and the answer would fail)."""
    try:
        return parse_object(text.encode())
    except BadBody:
        return None
