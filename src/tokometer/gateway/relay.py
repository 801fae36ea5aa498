"""Relay one request: route it, stream the answer back as it arrives, account for it.

An OpenAI-speaking upstream's events go to the client byte for byte (the
usage-only event is dropped if the client did not ask for usage; the gateway
asks every upstream for it). Other protocols are translated event by event
into OpenAI chunks. While relaying, the gateway measures with the bench core:
every parsed event goes into a `StreamAssembly`, which fills a `RequestRecord`
from the gateway's point of view (sent = when the gateway received the request),
so that TTFT, TPOT, tokens and E2E are `tokometer.metrics.request`'s, defined
once for bench and gateway alike. The relay ends with a `RelayOutcome` (record,
answer, upstream, status), which it hands to whoever accounts for it.

Continuation (route option ``continue_on_length``) and mid-stream resume
(``resume_midstream``): when the upstream stops at ``finish_reason="length"``
before the client's ``max_tokens``, or fails after content reached the client,
the answer so far is sent back (the same upstream continues; after a failure the
next available one does) and the segments stream as one answer with one ending
and one usage (`tokometer.gateway.resume`). Nothing of this costs the events of an
answer that needs neither: the text so far is the `Answer` the relay keeps anyway.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson
from starlette.types import Message, Receive, Scope, Send

from tokometer.backends.assemble import StreamAssembly
from tokometer.gateway.openai_format import MAX_KEPT_CHARS, Answer, whole
from tokometer.gateway.resume import carry_on_body, client_max_tokens, resume_enabled, stream_identity
from tokometer.gateway.router import AllUpstreamsFailed, Opened, Router, all_failed_body
from tokometer.gateway.upstream import Endpoint, Upstream, UpstreamError, UpstreamEvent
from tokometer.records import RequestRecord, classify_http_error
from tokometer.wire.base import ParsedEvent
from tokometer.wire.openai import DONE, ChunkWriter, error_body, error_event

if TYPE_CHECKING:
    from tokometer.gateway.config import RouteConfig

__all__ = ["Relay", "RelayContext", "RelayOutcome"]

log = logging.getLogger("tokometer.gateway")


@dataclass(slots=True)
class RelayContext:
    """Everything decided before routing."""

    route: RouteConfig
    endpoint: Endpoint
    body: dict[str, Any]
    stream: bool
    include_usage: bool
    key: str | None
    cache_key: str | None
    prompt_tokens: int | None
    requested_max_tokens: int | None
    received_ns: int
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RelayOutcome:
    """What a relayed request came to, for accounting (metrics, log, budget, cache, health)."""

    ctx: RelayContext
    record: RequestRecord
    """The gateway's view: ``sent_ns`` is when it received the request; content stamps are arrivals from
    the upstream; ``end_ns`` when the answer ended. Metrics come from `tokometer.metrics.request`."""
    upstream_sent_ns: int
    """When the (first) upstream request was sent (0: none was)."""
    answer: Answer
    upstream: Upstream | None
    fallback: bool
    retries: int
    status: int
    error: str | None
    first_sent_ns: int | None
    """When the first content reached the client's connection."""
    gone: bool
    hedge: str | None = None
    """A hedge was sent: the leg that won ("primary" or "hedge")."""
    served_by: tuple[str, ...] = ()
    """With resumes: every upstream that served part of the answer, in order (empty: one did)."""


class Relay:
    """The ASGI response of a routed request."""

    def __init__(self, ctx: RelayContext, router: Router, on_done: Callable[[RelayOutcome], None]) -> None:
        self.router = router
        self.on_done = on_done
        self.ctx = ctx
        self.answer = Answer()
        self.record = RequestRecord(index=0, due_ns=ctx.received_ns, sent_ns=ctx.received_ns,
                                    requested_output_tokens=ctx.requested_max_tokens)
        self.opened: Opened | None = None
        self.gone = False
        self.sent_head = False
        self.status = 200
        self.error: str | None = None
        self.first_sent_ns: int | None = None
        self._assembly: StreamAssembly | None = None
        self._upstream_sent_ns = 0
        self._send: Send | None = None
        self._held: list[bytes] = []
        self._batch: list[bytes] | None = None  # while relaying: writes gathered for one send
        self._first: Opened | None = None  # the answer's first segment (continuations and resumes follow)
        self._writer: ChunkWriter | None = None
        self._sent_role = False
        self._events = 0
        self._resume = resume_enabled(ctx.route)
        # the text is needed for a non-streamed answer, the cache, a resume or a continuation, and only then kept
        self.answer.keep = not ctx.stream or ctx.cache_key is not None or self._resume or ctx.route.continue_on_length
        self._served_by: list[str] = []
        """Upstreams that served a segment cut off by a failure, then the one after (resume only)."""
        self._first_raw: bytes | None = None
        """The first content event the client got, for the id/created/model of chunks the gateway writes."""
        self._first_prompt: int | None = None
        """Prompt tokens the first segment's upstream reported (a later segment's prompt holds the text so far)."""
        self._segments = 1

    # -- ASGI -------------------------------------------------------------------------------
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self._send = send
        watcher = asyncio.create_task(self._watch(receive))
        try:
            await self._run()
        finally:
            watcher.cancel()
            if self.opened is not None:
                # Whatever ended the answer (the client gone, a failure given up on, an error event), an
                # upstream still answering must not go on into the void once its slot is given back.
                await self.opened.call.cancel()
                self.opened.release()
            self.on_done(self._outcome())

    def _outcome(self) -> RelayOutcome:
        record, opened = self.record, self.opened
        record.end_ns = time.perf_counter_ns()
        if self._assembly is not None:
            record.status = 200
            self._assembly.n_chunks = record.chunk_count = self._events
            self._assembly.finish(None)
            self.answer.completion_tokens = record.output_tokens
            if self.answer.prompt_tokens is None:
                self.answer.prompt_tokens = self._prompt_tokens()
        if record.error is None and (self.error is not None or self.gone):
            if self.gone:
                record.error = "cancelled"
            elif self.status != 200:
                record.error = classify_http_error(self.status, self.error or "")
            else:
                record.error = "server_error_event"
            record.error_detail = self.error or "the client went away"
        if self.answer.prompt_tokens is None:
            self.answer.prompt_tokens = self.ctx.prompt_tokens
        first = self._first or opened  # how the answer began: fallback, retries, hedge are the first segment's
        return RelayOutcome(self.ctx, record, self._upstream_sent_ns, self.answer,
                            opened.upstream if opened is not None else None, bool(first and first.fallback),
                            first.retries if first is not None else 0, 499 if self.gone else self.status,
                            self.error, self.first_sent_ns, self.gone, first.hedge if first is not None else None,
                            tuple(self._served_by) if len(self._served_by) > 1 else ())

    async def _watch(self, receive: Receive) -> None:
        while True:
            message: Message = await receive()
            if message["type"] == "http.disconnect":
                self.gone = True
                if self.opened is not None:
                    await self.opened.call.cancel()
                return

    # -- the request ------------------------------------------------------------------------
    async def _run(self) -> None:
        ctx = self.ctx
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
        self._upstream_sent_ns = opened.call.sent_ns
        self._assembly = StreamAssembly(self.record, opened.call.backend)
        if not opened.upstream.openai or not ctx.stream:
            self._writer = ChunkWriter(ctx.endpoint == "chat", served)
        elif opened.buffered:
            self._first_raw = opened.buffered[-1].raw  # the first content event (or the whole empty answer)
        if ctx.stream:
            await self._head(200, b"text/event-stream")
        resumes = 0
        while True:
            failure: UpstreamError | None = None
            try:
                await self._relay(opened)
            except UpstreamError as exc:
                # A connection that breaks after the answer's ending (a proxy dropping the last chunk)
                # lost nothing: the answer ends normally.
                failure = None if exc.category != "cancelled" and self._assembly.saw_done else exc
                if failure is None:
                    log.warning("upstream %s broke off after the answer's ending (%s: %s): answer complete",
                                opened.upstream.name, exc.category, exc.detail[:120])
            else:
                if self._resume and not self._assembly.saw_done and not self.gone and self._events:
                    failure = UpstreamError("reset", "the stream ended before its final event")
            if failure is not None:
                resumed = None
                if failure.category != "cancelled" and not self.gone:
                    self.router.failed(opened.upstream.name, failure)
                    if self._resume and resumes < ctx.route.max_resumes:
                        resumes += 1
                        resumed = await self._resume_after(opened, failure)
                if resumed is None:
                    self._give_up(opened, failure)
                    if ctx.stream and not self.gone:
                        await self._write(error_event(self.error or failure.detail))
                    break
                opened = self.opened = resumed
                continue
            if not self._continue_wanted():
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
        if failure.category != "cancelled":
            self.record.error, self.record.error_detail = failure.category, failure.detail
        message = f"upstream {opened.upstream.name} failed mid-answer ({failure.category}): {failure.detail}"
        if self.error:  # a resume was tried and failed
            message = f"{message}; {self.error}"
        self.error = message if failure.category != "cancelled" else f"cancelled: {failure.detail}"

    async def _resume_after(self, opened: Opened, failure: UpstreamError) -> Opened | None:
        """Carry the answer on from where ``opened`` broke off, on the next upstream that answers (None: none did;
        ``self.error`` says why)."""
        ctx, route = self.ctx, self.ctx.route
        failed = opened.upstream.name
        if not self._served_by:
            self._served_by.append(failed)
        limit = client_max_tokens(ctx.body)
        assert self._assembly is not None
        if self.answer.cut:
            self.error = f"too long to resume: the gateway keeps the first {MAX_KEPT_CHARS:,} characters of an answer"
            self.router.metrics.resumes.labels(route.model, failure.category, "gave_up").inc()
            return None
        if limit is not None and self._assembly.output_tokens_so_far() >= limit:
            self.error = "nothing left to resume: the answer has all its max_tokens"
            self.router.metrics.resumes.labels(route.model, failure.category, "gave_up").inc()
            return None
        body = self._carry_on()
        await opened.discard()
        try:
            resumed = await self.router.open(route, body, ctx.endpoint, exclude=frozenset(self._served_by))
        except (AllUpstreamsFailed, UpstreamError) as exc:
            self.error = f"resume failed: {exc}"
            self.router.metrics.resumes.labels(route.model, failure.category, "gave_up").inc()
            return None
        self._served_by.append(resumed.upstream.name)
        self.router.metrics.resumes.labels(route.model, failure.category, "resumed").inc()
        log.info("resumed an answer of %r on %s after %s failed mid-answer (%s: %s), %d tokens in",
                 route.model, resumed.upstream.name, failed, failure.category, failure.detail[:120],
                 self._assembly.earlier_output_tokens)
        return resumed

    async def _relay(self, opened: Opened) -> None:
        # Events that are already here when one is relayed go to the client in one write: an upstream
        # read that brought several (the gateway fell behind) costs one send, not one each. Taking in an
        # event is plain code (`_event` only gathers what it writes): per event the relay costs one
        # function call and, when no further event is already here, one send.
        batch = self._batch = []
        event_of = self._event
        try:
            for event in opened.buffered:
                event_of(event)
            opened.buffered = []
            await self._flush()
            call = opened.call
            async for event in opened.events:
                event_of(event)
                if self.gone:
                    raise UpstreamError("cancelled", "the client went away")
                if batch and not call.more:
                    await self._flush()
        finally:
            await self._flush()
            self._batch = None

    def _event(self, event: UpstreamEvent) -> None:
        """Take in one upstream event: the record, the answer so far, and what the client gets (gathered in
        ``_batch``, which `_relay` sends)."""
        answer, p = self.answer, event.parsed
        self._events += 1
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
        if not self.ctx.stream:
            return
        if self._writer is None:  # an OpenAI upstream: relay its bytes
            self._relay_openai(event, p)
        elif p.has_content:
            if not self._sent_role:
                self._sent_role = True
                self._put(self._writer.role())
            self._put(self._writer.content(p.text, p.reasoning))

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

    def _put(self, data: bytes) -> None:
        """Gather ``data`` for the client's next send (while `_relay` runs)."""
        if data and not self.gone:
            assert self._batch is not None
            self._batch.append(data)

    def _continue_wanted(self) -> bool:
        route, answer = self.ctx.route, self.answer
        if not route.continue_on_length or answer.finish_reason != "length" or self.gone or self.error or answer.cut:
            return False
        wanted = self.ctx.requested_max_tokens
        assert self._assembly is not None
        return wanted is not None and self._assembly.output_tokens_so_far() < wanted and \
            self._segments < route.max_segments

    def _carry_on(self) -> dict[str, Any]:
        """End the current segment; the request that carries the answer on (continuation or resume). From here
        on the gateway writes the chunks itself, as the client has seen them so far."""
        assembly, ctx = self._assembly, self.ctx
        assert assembly is not None
        if self._segments == 1:
            final = assembly.final
            self._first_prompt = final.prompt_tokens if final.prompt_tokens is not None else final.prompt_tokens_native
        self._segments += 1
        assembly.end_segment()
        limit = ctx.requested_max_tokens if ctx.route.continue_on_length and self.answer.finish_reason == "length" \
            else client_max_tokens(ctx.body)
        left = None if limit is None else limit - assembly.earlier_output_tokens
        self._held.clear()  # the ending of the cut-off segment is not the answer's ending
        self.answer.finish_reason = None
        if self._writer is None:
            ident, created, model = stream_identity(self._first_raw or b"")
            self._writer = ChunkWriter(ctx.endpoint == "chat", model or self.answer.model, ident, created)
        return carry_on_body(ctx.body, ctx.endpoint, self.answer.text, left)

    def _prompt_tokens(self) -> int | None:
        """The prompt's tokens as an upstream counted them: the first segment's; else (it broke before saying)
        the last segment's less the answer it was given to carry on; None: no upstream said."""
        assert self._assembly is not None
        if self._first_prompt is not None:
            return self._first_prompt
        final = self._assembly.final
        reported = final.prompt_tokens if final.prompt_tokens is not None else final.prompt_tokens_native
        if reported is None or self._segments == 1:
            return reported
        return max(0, reported - self._assembly.earlier_output_tokens)

    async def _finish_stream(self) -> None:
        ctx, answer = self.ctx, self.answer
        if not ctx.stream:
            if self.error and not answer.text:
                await self._fail(502, error_body(f"the upstream failed: {self.error}"))
                return
            if answer.cut:
                self.error = (f"the answer is longer than the {MAX_KEPT_CHARS:,} characters the gateway keeps for a "
                              "non-streamed answer")
                await self._fail(502, error_body(f"{self.error}: ask for it with \"stream\": true"))
                return
            assert self._writer is not None and self._assembly is not None
            answer.completion_tokens = self._assembly.output_tokens_so_far()
            answer.prompt_tokens = answer.prompt_tokens or self._prompt_tokens() or ctx.prompt_tokens
            await self._json(200, whole(self._writer, answer))
            return
        if self.gone:
            return
        self._batch = []  # the ending goes in one write with the response's last chunk (`_end`)
        if self._writer is not None:  # translated: write the ending ourselves
            if not self.error:
                assert self._assembly is not None
                await self._write(self._writer.finish(answer.finish_reason or "stop"))
                if ctx.include_usage:
                    await self._write(self._writer.usage(self._prompt_tokens() or ctx.prompt_tokens or 0,
                                                         self._assembly.output_tokens_so_far()))
            await self._write(DONE)
        else:
            for raw in self._held:
                await self._write(raw)
            if not any(raw.startswith(b"data: [DONE]") for raw in self._held):
                await self._write(DONE)
        await self._end()

    # -- writing ----------------------------------------------------------------------------
    async def _head(self, status: int, content_type: bytes) -> None:
        assert self._send is not None
        self.status = status
        headers = [(b"content-type", content_type), (b"cache-control", b"no-cache")]
        if self.opened is not None:
            headers += [(b"x-tokometer-upstream", self.opened.upstream.name.encode()),
                        (b"x-tokometer-model", self.answer.model.encode()),
                        (b"x-tokometer-fallback", b"1" if self.opened.fallback else b"0")]
            if self.opened.hedge is not None:
                headers.append((b"x-tokometer-hedge", self.opened.hedge.encode()))
        headers += [(k.encode(), v.encode()) for k, v in self.ctx.headers.items()]
        await self._send({"type": "http.response.start", "status": status, "headers": headers})
        self.sent_head = True

    async def _write(self, data: bytes) -> None:
        if not data or self.gone:
            return
        if self._batch is not None:
            self._batch.append(data)
            return
        await self._send_body(data, True)

    async def _flush(self) -> None:
        """Send what `_write` gathered while batching (and go on batching)."""
        batch = self._batch
        if batch:
            data = batch[0] if len(batch) == 1 else b"".join(batch)
            batch.clear()
            if not self.gone:
                await self._send_body(data, True)

    async def _send_body(self, data: bytes, more: bool) -> None:
        assert self._send is not None
        if self.first_sent_ns is None and self._assembly is not None and self._assembly.content:
            self.first_sent_ns = time.perf_counter_ns()
        await self._send({"type": "http.response.body", "body": data, "more_body": more})

    async def _end(self) -> None:
        """End the response, with whatever the ending gathered (one write: events, ``[DONE]``, the last chunk)."""
        data = b"".join(self._batch) if self._batch else b""
        self._batch = None
        with contextlib.suppress(OSError):
            await self._send_body(data, False)

    async def _json(self, status: int, body: dict[str, Any]) -> None:
        if self._assembly is not None and self._assembly.content:
            self.first_sent_ns = time.perf_counter_ns()
        await self._head(status, b"application/json")
        assert self._send is not None
        await self._send({"type": "http.response.body", "body": orjson.dumps(body), "more_body": False})

    async def _fail(self, status: int, body: dict[str, Any]) -> None:
        self.error = self.error or str(body.get("error", {}).get("message", ""))[:300]
        if self.sent_head:
            await self._write(b"data: " + orjson.dumps(body) + b"\n\n")
            await self._end()
            return
        self.status = status
        await self._json(status, body)


_TOOL_CALL = b'"tool_calls"'
_FUNCTION_CALL = b'"function_call"'


def _as_json(text: str) -> dict[str, Any] | None:
    try:
        value = orjson.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
