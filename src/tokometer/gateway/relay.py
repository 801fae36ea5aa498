"""Relay one request: route it, stream the answer back as it arrives, account for it.

An OpenAI-speaking upstream's events go to the client byte for byte (the
usage-only event is dropped if the client did not ask for usage; the gateway
asks every upstream for it). Other protocols are translated event by event
into OpenAI chunks. While relaying, the gateway notes what it needs: the first
and last content times (TTFT/TPOT for health, metrics and the log), the text
(for the cache and for continuation), the finish reason and token counts.

Continuation (route option ``continue_on_length``): when the upstream stops at
``finish_reason="length"`` before the client's ``max_tokens``, the answer so
far is sent back as an assistant message to continue (``continue_final_message``
for vLLM-style servers; an assistant prefill for llama.cpp) and the segments
stream as one answer with one ending.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson
from starlette.types import Message, Receive, Scope, Send

from tokometer.gateway.openai_format import DONE, Answer, ChunkWriter, error_body
from tokometer.gateway.router import AllUpstreamsFailed, Opened
from tokometer.gateway.upstream import Endpoint, UpstreamError, UpstreamEvent

if TYPE_CHECKING:
    from tokometer.gateway.app import Gateway
    from tokometer.gateway.config import RouteConfig

__all__ = ["Relay", "RelayContext"]


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


class Relay:
    """The ASGI response of a routed request."""

    def __init__(self, gateway: Gateway, ctx: RelayContext) -> None:
        self.gw = gateway
        self.ctx = ctx
        self.answer = Answer()
        self.opened: Opened | None = None
        self.gone = False
        self.sent_head = False
        self.status = 200
        self.error: str | None = None
        self.first_content_ns: int | None = None
        self.first_sent_ns: int | None = None
        self.last_content_ns: int | None = None
        self._send: Send | None = None
        self._held: list[bytes] = []
        self._writer: ChunkWriter | None = None
        self._sent_role = False

    # -- ASGI -------------------------------------------------------------------------------
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self._send = send
        watcher = asyncio.create_task(self._watch(receive))
        try:
            await self._run()
        finally:
            watcher.cancel()
            if self.opened is not None:
                self.opened.release()
            self.gw.finish(self)

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
            self.opened = await self.gw.router.open(ctx.route, ctx.body, ctx.endpoint)
        except AllUpstreamsFailed as exc:
            await self._fail(exc.status, self.gw.all_failed_body(ctx.route, exc))
            return
        except UpstreamError as exc:  # the request's own fault: pass the upstream's answer on
            await self._fail(exc.status or 502, _as_json(exc.body) or error_body(exc.detail, "invalid_request_error"))
            return
        opened = self.opened
        served = opened.upstream.cfg.model or str(ctx.body.get("model", ""))
        self.answer.model = served
        if not opened.upstream.openai or not ctx.stream:
            self._writer = ChunkWriter(ctx.endpoint, served)
        if ctx.stream:
            await self._head(200, b"text/event-stream")
        segments = 0
        body = ctx.body
        while True:
            segments += 1
            try:
                await self._relay(opened)
            except UpstreamError as exc:
                self.error = f"{exc.category}: {exc.detail}"
                self.gw.router.health[opened.upstream.name].failure(self.error)
                if ctx.stream and not self.gone:
                    await self._write(b"data: " + orjson.dumps(error_body(
                        f"upstream {opened.upstream.name} failed mid-answer ({exc.category}): {exc.detail}")) + b"\n\n")
                break
            if not self._continue_wanted(segments):
                break
            body = self._continuation(body)
            opened.release()
            try:
                opened = self.opened = await self.gw.router.open(ctx.route, body, ctx.endpoint,
                                                                 only=opened.upstream.name)
            except (AllUpstreamsFailed, UpstreamError) as exc:
                self.error = f"continuation failed: {exc}"
                break
        await self._finish_stream()

    async def _relay(self, opened: Opened) -> None:
        for event in opened.buffered:
            await self._event(event)
        opened.buffered = []
        async for event in opened.events:
            await self._event(event)
            if self.gone:
                raise UpstreamError("cancelled", "the client went away")
        self._observe(opened)

    async def _event(self, event: UpstreamEvent) -> None:
        answer, p = self.answer, event.parsed
        if p is None:
            return
        if p.has_content:
            if self.first_content_ns is None:
                self.first_content_ns = event.stamp
            self.last_content_ns = event.stamp
            answer.text += p.text
            answer.reasoning += p.reasoning
            answer.content_events += 1
        if p.finish_reason is not None:
            answer.finish_reason = p.finish_reason
        if p.completion_tokens is not None or p.completion_tokens_native is not None:
            answer.extra["segment_completion"] = p.completion_tokens or p.completion_tokens_native
        if p.prompt_tokens is not None or p.prompt_tokens_native is not None:
            answer.extra.setdefault("prompt", p.prompt_tokens or p.prompt_tokens_native)
        if p.error is not None:
            self.error = f"server_error_event: {p.error}"
        if not self.ctx.stream:
            return
        if self._writer is None:  # an OpenAI upstream: relay its bytes
            await self._relay_openai(event, p)
        elif p.has_content:
            if not self._sent_role:
                self._sent_role = True
                await self._write(self._writer.role())
            await self._write(self._writer.content(p.text, p.reasoning))

    async def _relay_openai(self, event: UpstreamEvent, p: Any) -> None:
        if p.has_content:
            await self._write(event.raw)
            self._sent_role = True
            return
        if p.error is not None:
            await self._write(event.raw)
            return
        # role-only, finish, usage and [DONE]: the first goes now, the ending waits (continuation may follow)
        if p.finish_reason is None and not p.done and p.completion_tokens is None:
            if not self._sent_role:
                self._sent_role = True
                await self._write(event.raw)
            return
        usage_only = p.completion_tokens is not None and p.finish_reason is None and not p.done
        if usage_only and not self.ctx.include_usage:
            return
        self._held.append(event.raw)

    def _observe(self, opened: Opened) -> None:
        answer = self.answer
        segment = answer.extra.pop("segment_completion", None)
        tokens = segment if isinstance(segment, int) else answer.content_events
        answer.completion_tokens = (answer.completion_tokens or 0) + tokens
        prompt = answer.extra.get("prompt")
        if answer.prompt_tokens is None and isinstance(prompt, int):
            answer.prompt_tokens = prompt
        ttft_ms = tpot_ms = None
        if self.first_content_ns is not None and opened.call.sent_ns:
            ttft_ms = (self.first_content_ns - opened.call.sent_ns) / 1e6
        if self.first_content_ns and self.last_content_ns and tokens > 1:
            tpot_ms = (self.last_content_ns - self.first_content_ns) / (tokens - 1) / 1e6
        self.gw.observe(self, opened, ttft_ms, tpot_ms)

    def _continue_wanted(self, segments: int) -> bool:
        route, answer = self.ctx.route, self.answer
        if not route.continue_on_length or answer.finish_reason != "length" or self.gone or self.error:
            return False
        wanted = self.ctx.requested_max_tokens
        return wanted is not None and (answer.completion_tokens or 0) < wanted and segments < route.max_segments

    def _continuation(self, body: dict[str, Any]) -> dict[str, Any]:
        out = dict(self.ctx.body)
        left = (self.ctx.requested_max_tokens or 0) - (self.answer.completion_tokens or 0)
        out["max_tokens"] = left
        out.pop("max_completion_tokens", None)
        if self.ctx.endpoint == "chat":
            out["messages"] = [*self.ctx.body.get("messages", []), {"role": "assistant", "content": self.answer.text}]
            out["continue_final_message"] = True
            out["add_generation_prompt"] = False
        else:
            out["prompt"] = str(self.ctx.body.get("prompt", "")) + self.answer.text
        self._held.clear()  # the ending of the cut-off segment is not the answer's ending
        self.answer.finish_reason = None
        return out

    async def _finish_stream(self) -> None:
        ctx, answer = self.ctx, self.answer
        if answer.prompt_tokens is None:
            answer.prompt_tokens = ctx.prompt_tokens
        if not ctx.stream:
            if self.error and not answer.text:
                await self._fail(502, error_body(f"the upstream failed: {self.error}"))
                return
            assert self._writer is not None
            await self._json(200, self._writer.whole(answer))
            return
        if self.gone:
            return
        if self._writer is not None:  # translated: write the ending ourselves
            if not self.error:
                await self._write(self._writer.finish(answer.finish_reason or "stop"))
                if ctx.include_usage:
                    await self._write(self._writer.usage(answer.prompt_tokens or 0, answer.completion_tokens or 0))
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
                        (b"x-tokometer-model", (self.opened.upstream.cfg.model or "").encode()),
                        (b"x-tokometer-fallback", b"1" if self.opened.fallback else b"0")]
        headers += [(k.encode(), v.encode()) for k, v in self.ctx.headers.items()]
        await self._send({"type": "http.response.start", "status": status, "headers": headers})
        self.sent_head = True

    async def _write(self, data: bytes) -> None:
        if not data or self.gone:
            return
        assert self._send is not None
        if self.first_sent_ns is None and self.first_content_ns is not None:
            self.first_sent_ns = time.perf_counter_ns()
        await self._send({"type": "http.response.body", "body": data, "more_body": True})

    async def _end(self) -> None:
        assert self._send is not None
        with contextlib.suppress(OSError):
            await self._send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _json(self, status: int, body: dict[str, Any]) -> None:
        if self.first_content_ns is not None:
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
        await self._json(status, body)


def _as_json(text: str) -> dict[str, Any] | None:
    try:
        value = orjson.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
