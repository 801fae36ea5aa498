"""One upstream engine: build its request from a client's OpenAI request, stream its events back.

The HTTP work is tokometer's own client (`client.http1`): keep-alive pool,
connect/idle/total timeouts, and each chunk handed over the moment it arrives.
`UpstreamCall` turns those chunks into whole events, each parsed by the
protocol's adapter (so the gateway knows content from usage from errors) and
kept byte for byte (so an OpenAI upstream's events reach the client unchanged).
The splitter is the bench's (`tokometer.protocols.common.framing`, linear in the bytes) with its event size limit
(1 MiB): an upstream whose event grows past it is a ``protocol`` failure, and is no longer read. The bench's
other read limits hold here too, for the one request they concern: the read budget of the whole answer
(`tokometer.util.readbudget`, sized from the request's ``max_tokens`` or ``max_response_bytes``), its
events (``2 x max_tokens + 64``) and its comment events (`MAX_COMMENT_EVENTS`); past one, that request fails
as ``protocol`` and its upstream is no longer read, so a flooding upstream costs the gateway a bounded
amount of memory and CPU and the other clients nothing.

Backpressure: what has arrived and not yet been relayed is at most `READ_AHEAD_BYTES` (and one
socket read more). When a client reads slowly, the relay waits on its socket, the events queue up,
and past that mark the upstream's socket is no longer read (`StreamedResponse.pause`): the engine's
writes then fill TCP's buffers and it is held back, instead of the gateway buffering the answer.
Reading resumes when what waits is down to a quarter of the mark. The upstream sockets' receive
buffer is set to the same size (the kernel's own grows to tens of MiB on a fast link), so that an
answer nobody takes holds the engine back after about twice the mark, not after megabytes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from time import perf_counter_ns
from typing import Any

import orjson

from tokometer.client.http1 import (
    ConnectError,
    HttpPool,
    HttpTimeout,
    PeerReset,
    StreamedResponse,
    transport_error_category,
)
from tokometer.gateway.config import UpstreamConfig
from tokometer.gateway.tracing import upstream_headers
from tokometer.messages import message_text
from tokometer.prompt import Message, Prompt
from tokometer.protocols.common.base import GenerationParams, ParsedEvent, ProtocolClient
from tokometer.protocols.common.framing import (
    EXTRA_EVENTS,
    MAX_COMMENT_EVENTS,
    MAX_EVENT_BYTES,
    EventSplitter,
    EventTooLarge,
    event_limit,
    payload_reader,
)
from tokometer.protocols.gateway_clients import Endpoint
from tokometer.protocols.openai.client import OpenAIChat, OpenAICompletions
from tokometer.protocols.registry import create_client, protocol_named
from tokometer.protocols.tool_events import tool_fields
from tokometer.records import ErrorCategory, describe_http_failure
from tokometer.util.errors import TokometerError
from tokometer.util.readbudget import response_budget
from tokometer.util.retryafter import retry_after_s
from tokometer.util.shown import quoted

__all__ = ["CLIENT_SEND_BUFFER_BYTES", "READ_AHEAD_BYTES", "Upstream", "UpstreamCall", "UpstreamError",
           "UpstreamEvent"]


READ_AHEAD_BYTES = 256 * 1024
"""The most of one upstream answer read ahead of the client (then the upstream is paused)."""
_RESUME_BYTES = READ_AHEAD_BYTES // 4
CLIENT_SEND_BUFFER_BYTES = 256 * 1024
"""The SO_SNDBUF of the gateway's client connections: the kernel's part of what a client that reads nothing
holds up (with the default it grows to tcp_wmem's maximum, often 4 MiB), the other end of the relay's
read-ahead."""
_BUDGET_SETTING = "the upstream's max_response_bytes (default: sized from max_tokens)"
_ERROR_BODY_BYTES = 8192
"""How much of an upstream's error answer is read (and quoted); the rest is not waited for."""


class UpstreamError(TokometerError):
    """An upstream failed before it produced a usable answer (the router may try another).

    ``category`` is the same `ErrorCategory` a failed request gets in `tokometer bench`."""

    def __init__(self, category: ErrorCategory, detail: str, status: int | None = None, body: str = "",
                 retry_after_s: float | None = None) -> None:
        super().__init__(detail)
        self.category: ErrorCategory = category
        self.detail = detail
        self.status = status
        self.body = body
        self.retry_after_s = retry_after_s
        """How long the upstream asked to be left alone (its ``Retry-After``; `tokometer.util.retryafter`)."""

    @property
    def client_error(self) -> bool:
        """The request itself is at fault (HTTP 4xx other than auth and rate limits): no fallback helps."""
        return self.status is not None and 400 <= self.status < 500 and self.status not in (401, 403, 408, 429)


@dataclass(slots=True)
class UpstreamEvent:
    raw: bytes
    stamp: int
    parsed: ParsedEvent | None


class Upstream:
    """An engine behind the gateway, with its own connection pool and concurrency limit."""

    def __init__(self, cfg: UpstreamConfig) -> None:
        self.cfg = cfg
        self.name = cfg.name
        self.backend = create_client(cfg.api)
        self.openai = protocol_named(cfg.api).gateway_native
        """It speaks OpenAI chat/completions: the client's request goes as it is (others' is built by their adapter:
        Ollama, TGI, llama.cpp, Anthropic's Messages and OpenAI's Responses API alike)."""
        self._readers: dict[Endpoint, ProtocolClient] = {"chat": OpenAIChat(), "completions": OpenAICompletions()} \
            if self.openai else {"chat": self.backend, "completions": self.backend}
        self.pool = HttpPool(cfg.url, connect_timeout=cfg.connect_timeout_s, idle_timeout=cfg.idle_timeout_s,
                             total_timeout=cfg.total_timeout_s, tls=cfg.tls(), receive_buffer=READ_AHEAD_BYTES)
        self.limit = asyncio.Semaphore(cfg.max_concurrency) if cfg.max_concurrency else None
        self.waiting = 0
        self.in_flight = 0
        self._headers = {"Content-Type": "application/json", "Accept": "text/event-stream, application/x-ndjson"}
        self._headers.update(self.backend.fixed_headers())
        key = cfg.key()
        if key:
            self._headers.update(self.backend.auth_headers(key))

    def reader(self, endpoint: Endpoint) -> ProtocolClient:
        """The adapter that reads this upstream's answer to a request at ``endpoint``. An OpenAI upstream
        answers ``/chat/completions`` with chat chunks (``delta.content``) and ``/completions`` with completion
        chunks (``text``), whichever of the two its ``api`` names (that says only that it speaks OpenAI's
        protocol): reading one with the other's adapter finds no text in it. Any other upstream answers both
        in its own protocol, which its adapter reads."""
        return self._readers[endpoint]

    def request_bytes(self, body: Mapping[str, Any], endpoint: Endpoint) -> bytes:
        """The upstream request for a client's OpenAI-format ``body`` (with the attempt's ``traceparent`` if traced)."""
        headers = self._headers if (traced := upstream_headers()) is None else {**self._headers, **traced}
        if self.openai:
            out = dict(body)
            out["model"] = self.cfg.model or body.get("model", "")
            out["stream"] = True
            out["stream_options"] = {"include_usage": True}
            path = "/chat/completions" if endpoint == "chat" else "/completions"
            return self.pool.encode("POST", path, orjson.dumps(out), headers)
        prompt = _prompt(body, endpoint)
        max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
        params = GenerationParams(model=self.cfg.model, max_tokens=max_tokens if isinstance(max_tokens, int) else None,
                                  temperature=body.get("temperature"), seed=body.get("seed"), include_usage=False)
        request = self.backend.build(prompt, params)
        if body.get("tools"):  # the Messages and Responses APIs declare tools too (in their own shape)
            request.body.update(tool_fields(self.cfg.api, body.get("tools"), body.get("tool_choice")))
        return self.pool.encode("POST", request.path, orjson.dumps(request.body), headers)

    async def open(self, body: Mapping[str, Any], endpoint: Endpoint) -> UpstreamCall:
        """Send the request and wait for the response head; raise UpstreamError if it fails or is not 200."""
        asked = body.get("max_completion_tokens", body.get("max_tokens"))
        call = UpstreamCall(self, self.request_bytes(body, endpoint), self.reader(endpoint),
                            asked if isinstance(asked, int) and not isinstance(asked, bool) else None)
        await call.start()
        return call

    async def close(self) -> None:
        await self.pool.close()


def _prompt(body: Mapping[str, Any], endpoint: Endpoint) -> Prompt:
    if endpoint == "completions":
        text = body.get("prompt", "")
        return Prompt.from_text(text if isinstance(text, str) else " ".join(map(str, text)))
    messages = []
    for message in body.get("messages") or ():
        messages.append(Message(str(message.get("role", "user")), message_text(message)))
    return Prompt.from_messages(tuple(messages))


class UpstreamCall:
    """One streamed request to an upstream: head first, then events as they arrive.

    The events are split and parsed as the upstream's bytes are read (in the connection's callback,
    `_arrived`), and wait in ``ready`` for the relay, which takes all that are there at once (`take`): no
    queue, task wake-up or generator step per chunk or event, one wake-up of the relay per upstream read at
    most. A failure found while reading (an event too large, too many, one unparseable) is kept, the
    upstream is no longer read, and it is raised once the events before it are taken."""

    def __init__(self, upstream: Upstream, request: bytes, backend: ProtocolClient,
                 max_tokens: int | None = None) -> None:
        self.upstream = upstream
        self.request = request
        self.backend = backend
        """The adapter that reads this answer (`Upstream.reader`)."""
        budget = upstream.cfg.max_response_bytes or response_budget(max_tokens)
        self.response = StreamedResponse(max_bytes=budget, max_bytes_setting=_BUDGET_SETTING)
        self.max_events = event_limit(max_tokens)
        self._events = self._comments = 0
        self._task: asyncio.Task[None] | None = None
        self._splitter = EventSplitter(backend.framing, MAX_EVENT_BYTES)
        self._parse = backend.parse
        self._payload_of = payload_reader(backend.framing)
        self._raw: list[tuple[bytes, int]] = []
        """Body chunks before the head was accepted (an error answer's body, or events that came with the head)."""
        self.ready: deque[UpstreamEvent] = deque()
        """Events read and not yet taken (`take`, `next_event`)."""
        self._failure: UpstreamError | None = None
        self._head = False
        self._ended = False
        self._finished = False
        self._waiter: asyncio.Future[None] | None = None
        self.status = 0
        self.sent_ns = 0
        self.queued_bytes = 0
        """Arrived and not yet taken (bounded by READ_AHEAD_BYTES and one socket read)."""
        self.paused = False

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        response = self.response
        # one future, resolved by the response's head or by the request's end (whichever comes first)
        self._waiter = loop.create_future()
        response.on_head = self._head_came
        response.on_chunk = self._raw_arrived
        self._task = loop.create_task(self.upstream.pool.request(self.request, response))
        self._task.add_done_callback(self._request_ended)
        try:
            await self._waiter
        except asyncio.CancelledError:  # no response head yet (a hedge's loser, a client gone): hang up now
            self._task.cancel()
            raise
        finally:
            self._waiter = None
        if not self._head:
            self._raise_from_task()
        self.status = response.status
        self.sent_ns = response.sent_ns
        failure = describe_http_failure(self.status, response.headers, "")
        if failure is not None:
            body = await self._read_rest()
            category, detail = describe_http_failure(self.status, response.headers, body) or failure
            raise UpstreamError(category, detail, self.status, body, retry_after_s(response.headers))
        response.on_chunk = self._arrived
        raw, self._raw = self._raw, []
        self._taken(self.queued_bytes)
        for chunk, stamp in raw:
            self._arrived(chunk, stamp)

    def _head_came(self, _: StreamedResponse) -> None:
        self._head = True
        self._wake()

    def _request_ended(self, _: object) -> None:
        self._ended = True
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _queued(self, size: int) -> None:
        self.queued_bytes += size
        if self.queued_bytes > READ_AHEAD_BYTES and not self.paused:
            self.paused = True
            self.response.pause()

    def _taken(self, size: int) -> None:
        self.queued_bytes -= size
        if self.paused and self.queued_bytes <= _RESUME_BYTES:
            self.paused = False
            self.response.resume()

    def _raw_arrived(self, chunk: bytes, stamp: int) -> None:
        self._raw.append((chunk, stamp))
        self._queued(len(chunk))
        self._wake()

    def _arrived(self, chunk: bytes, stamp: int) -> None:
        """A body chunk of an answer being relayed: its complete events, split and parsed, into ``ready``."""
        if self._failure is not None:
            return  # spent: the upstream is no longer read
        try:
            frames = self._splitter.feed(chunk)
        except EventTooLarge as exc:
            self._fail(UpstreamError("protocol", str(exc)))
            return
        if frames:
            self._take_in(frames, stamp)

    def _take_in(self, frames: list[bytes], stamp: int) -> None:
        if why := self._count(frames):
            self._fail(UpstreamError("protocol", why))
            return
        parse, payload_of, ready = self._parse, self._payload_of, self.ready
        size = 0
        for frame in frames:
            payload = payload_of(frame)
            parsed = None
            if payload:
                try:
                    parsed = parse(payload)
                except ValueError:
                    shown = quoted(payload.decode(errors="replace"))
                    self._fail(UpstreamError("malformed_stream", f"unparseable event: {shown}"))
                    break
            ready.append(UpstreamEvent(frame, stamp, parsed))
            size += len(frame)
        self._queued(size)
        self._wake()

    def _fail(self, failure: UpstreamError) -> None:
        """Keep ``failure`` (raised once the events before it are taken) and read the upstream no more."""
        self._failure = failure
        self.response.pause()
        self._wake()

    def _finish(self) -> None:
        """The request ended: a broken connection fails the answer, else the last (unterminated) event is in."""
        self._finished = True
        try:
            self._raise_from_task()  # a broken connection outranks the half event it left behind
        except UpstreamError as exc:
            self._failure = self._failure or exc
            return
        if self._failure is None and (frames := self._splitter.flush()):
            self._take_in(frames, perf_counter_ns())

    async def _more(self) -> bool:
        """Wait until an event is ready (True), or the answer ended (False); raise the answer's failure."""
        while not self.ready:
            if self._ended and not self._finished:
                self._finish()
                continue
            if self._failure is not None:
                await self.cancel()
                raise self._failure
            if self._ended:
                return False
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        return True

    async def take(self) -> deque[UpstreamEvent] | None:
        """Every event that is ready, waiting for one if none is; None: the answer ended. Raises UpstreamError
        if the stream broke off or broke the limits (after the events before that were taken)."""
        if not self.ready and not await self._more():
            return None
        ready, self.ready = self.ready, deque()
        self._taken(self.queued_bytes)
        return ready

    async def next_event(self) -> UpstreamEvent | None:
        """The next event (None: the answer ended); raises as `take` does."""
        if not self.ready and not await self._more():
            return None
        event = self.ready.popleft()
        self._taken(len(event.raw))
        return event

    def _raise_from_task(self) -> None:
        assert self._task is not None and self._task.done()
        if self._task.cancelled():
            raise UpstreamError("cancelled", "the request was cancelled (the client went away)")
        error = self._task.exception()
        if isinstance(error, (HttpTimeout, ConnectError, PeerReset)):
            raise UpstreamError(transport_error_category(error), str(error)) from None
        if error is not None:
            raise UpstreamError("reset", f"{type(error).__name__}: {error}") from None

    async def _read_rest(self) -> str:
        """An error answer's body, up to `_ERROR_BODY_BYTES` (an endless error page is not read to its end)."""
        while not self._ended and sum(len(chunk) for chunk, _ in self._raw) < _ERROR_BODY_BYTES:
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        if not self._ended:
            await self.cancel()
        return b"".join(chunk for chunk, _ in self._raw)[:_ERROR_BODY_BYTES].decode("utf-8", "replace")

    def _count(self, frames: list[bytes]) -> str | None:
        """Count ``frames`` (a comment event, ``:`` first and no data line, apart); why to stop reading, or None."""
        comments = sum(1 for frame in frames if frame[:1] == b":" and b"data:" not in frame)
        self._comments += comments
        self._events += len(frames) - comments
        if self._comments > MAX_COMMENT_EVENTS:
            return f"the upstream sent more than {MAX_COMMENT_EVENTS} SSE comment events (a keep-alive flood)"
        if self.max_events and self._events > self.max_events:
            return (f"the upstream ignored max_tokens: more than {self.max_events} events (2 x max_tokens + "
                    f"{EXTRA_EVENTS})")
        return None

    async def cancel(self) -> None:
        """Drop the request (the client went away, or another upstream serves it)."""
        if self._task is not None and not self._task.done():
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
