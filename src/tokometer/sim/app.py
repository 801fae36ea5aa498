"""The simulator's ASGI app: protocol endpoints, paced streams, faults, its own trace.

Every streaming request follows the script in `SimConfig` on an absolute
schedule measured from the moment the request reached the app; the send time
of every content event is recorded in a `SendTrace` (``GET /sim/trace``), so a
test can hold the benchmark client's numbers against what really happened.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import random
import time
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from tokometer.datasets.words import WORDS
from tokometer.sim.config import SimConfig
from tokometer.sim.protocols import PROTOCOLS, Protocol, RequestInfo, StreamTiming
from tokometer.sim.trace import SendTrace, TraceLog

__all__ = ["SimState", "SimulatedReset", "create_app"]

_VOCAB = WORDS

_ERRORS: dict[str, tuple[int, str, str]] = {
    "http_400": (400, "invalid request: simulated bad request", "invalid_request_error"),
    "http_401": (401, "Incorrect API key provided (simulated). Check the API key you send.", "authentication_error"),
    "http_403": (403, "Access denied for this key or region (simulated).", "permission_error"),
    "http_429": (429, "Rate limit reached for requests (simulated). Retry later.", "rate_limit_error"),
    "http_500": (500, "Internal server error (simulated).", "server_error"),
    "http_503": (503, "Service unavailable: the model is overloaded (simulated).", "server_error"),
}

_NS_PER_MS = 1_000_000


class _StampArrival:
    """Pure ASGI middleware: stamp each request as it enters the app, before routing."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            scope["tokometer.arrival_ns"] = time.perf_counter_ns()
        await self.app(scope, receive, send)


class SimulatedReset(Exception):
    """Raised inside a started stream so the server drops the connection mid-answer."""


class _DropSimulatedResets(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], SimulatedReset))


class SimState:
    """Configuration, request counter, fault dice and trace of one simulator process."""

    def __init__(self, config: SimConfig) -> None:
        self.config = config
        self.trace = TraceLog(config.trace_size)
        self._rng = random.Random(config.seed)
        self._seq = 0
        self.in_flight = 0
        self.words: list[str] = []
        self._word_ids: dict[str, int] = {}

    def word_id(self, word: str) -> int:
        """The simulator's vocabulary grows as words are seen: one word, one id."""
        found = self._word_ids.get(word)
        if found is None:
            found = self._word_ids[word] = len(self.words)
            self.words.append(word)
        return found

    def next_request(self) -> tuple[int, str]:
        seq = self._seq
        self._seq += 1
        schedule = self.config.fault_schedule
        if schedule:
            return seq, schedule[seq % len(schedule)]
        roll = self._rng.random()
        for name, rate in self.config.faults.items():
            if roll < rate:
                return seq, name
            roll -= rate
        return seq, "none"


async def _sleep_until(due_ns: int, precise: bool) -> None:
    """Sleep until ``due_ns``; event-loop timers have millisecond resolution, so
    ``precise`` finishes the last stretch by yielding to the loop until due."""
    while True:
        remaining = due_ns - time.perf_counter_ns()
        if remaining <= 0:
            return
        if precise:
            if remaining > 1_500_000:
                await asyncio.sleep((remaining - 1_500_000) / 1e9)
            else:
                await asyncio.sleep(0)
        elif remaining < 200_000:
            return
        else:
            await asyncio.sleep(remaining / 1e9)


class _PacedStream:
    """An ASGI response that writes the scripted answer on schedule."""

    def __init__(self, state: SimState, proto: Protocol, info: RequestInfo, trace: SendTrace, n_tokens: int,
                 finish: str) -> None:
        self.state = state
        self.proto = proto
        self.info = info
        self.trace = trace
        self.n_tokens = n_tokens
        self.finish = finish
        self.disconnected = False
        self.gone = asyncio.Event()

    async def _watch_disconnect(self, receive: Receive) -> None:
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                self.disconnected = True
                self.gone.set()
                return

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        watcher = asyncio.create_task(self._watch_disconnect(receive))
        self.state.in_flight += 1
        try:
            await self._stream(send)
        finally:
            self.state.in_flight -= 1
            watcher.cancel()
            self.trace.end_ns = time.perf_counter_ns()
            self.trace.disconnected = self.disconnected

    async def _stream(self, send: Send) -> None:
        cfg, proto, info, trace = self.state.config, self.proto, self.info, self.trace
        base = trace.received_ns
        if trace.fault == "slow_first_byte":
            base += int(cfg.slow_first_byte_ms * _NS_PER_MS)
            await _sleep_until(base, cfg.precise)
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", proto.content_type.encode()), (b"cache-control", b"no-cache"),
                                (b"x-sim-request-id", str(trace.seq).encode())]})
        trace.headers_ns = time.perf_counter_ns()
        if cfg.empty_first_event:
            start = proto.start(info)
            if start:
                await send({"type": "http.response.body", "body": start, "more_body": True})
        ttft_ns = int(cfg.ttft_ms * _NS_PER_MS)
        step_ns = int(cfg.itl_ms * _NS_PER_MS) * cfg.tokens_per_event
        fault_at = cfg.fault_after_tokens
        sent = 0
        k = 0
        while sent < self.n_tokens:
            await _sleep_until(base + ttft_ns + k * step_ns, cfg.precise)
            if self.disconnected:
                return
            mid_stream = trace.fault in ("reset", "stall", "error_event", "malformed")
            if sent >= fault_at and mid_stream and await self._mid_stream_fault(send):
                return
            take = min(cfg.tokens_per_event, self.n_tokens - sent)
            ids = [(trace.seq * 31 + sent + i) % len(_VOCAB) for i in range(take)]
            text = "".join(" " + _VOCAB[i] for i in ids)
            if sent + take == self.n_tokens:
                body = proto.last_tokens(info, ids, text, sent, self.finish, self._timing(sent + take))
            else:
                body = proto.tokens(info, ids, text, sent)
            stamp = time.perf_counter_ns()
            await send({"type": "http.response.body", "body": body, "more_body": True})
            trace.event_ns.append(stamp)
            trace.event_tokens.append(take)
            sent += take
            k += 1
        if self.n_tokens == 0:
            await send({"type": "http.response.body", "body": proto.finish(info, self.finish, 0, self._timing(0)),
                        "more_body": True})
        trace.completion_tokens = sent
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _mid_stream_fault(self, send: Send) -> bool:
        """Apply the request's mid-stream fault; True when the stream must end here."""
        fault = self.trace.fault
        self.trace.fault = fault + ":done"
        if fault == "reset":
            raise SimulatedReset("simulated connection reset")
        if fault == "stall":
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.gone.wait(), self.state.config.stall_s)
            return True
        if fault == "error_event":
            await send({"type": "http.response.body", "body": self.proto.error_event("simulated engine failure"),
                        "more_body": False})
            return True
        await send({"type": "http.response.body", "body": self.proto.malformed(), "more_body": True})
        return False

    def _timing(self, completion_tokens: int) -> StreamTiming:
        events = self.trace.event_ns
        now = time.perf_counter_ns()
        first = events[0] if events else now
        return StreamTiming(
            prompt_ms=(first - self.trace.received_ns) / _NS_PER_MS,
            decode_ms=(now - first) / _NS_PER_MS,
            total_ms=(now - self.trace.received_ns) / _NS_PER_MS,
        )


def _error(proto: Protocol | None, status: int, message: str, kind: str) -> Response:
    body = proto.error_body(status, message, kind) if proto else {"error": {"message": message, "type": kind}}
    return JSONResponse(body, status_code=status)


def _authorized(request: Request, api_key: str | None) -> bool:
    if api_key is None:
        return True
    header = request.headers.get("authorization", "")
    return header == f"Bearer {api_key}"


def create_app(config: SimConfig) -> Starlette:
    """The simulator as an ASGI app (run it with uvicorn, or `tokometer sim`)."""
    state = SimState(config)
    logging.getLogger("uvicorn.error").addFilter(_DropSimulatedResets())

    async def generate(request: Request) -> Response | _PacedStream:
        received_ns = request.scope.get("tokometer.arrival_ns") or time.perf_counter_ns()
        proto = PROTOCOLS[request.url.path]
        seq, fault = state.next_request()
        trace = SendTrace(seq=seq, path=request.url.path, fault=fault, received_ns=received_ns)
        state.trace.add(trace)
        if not _authorized(request, config.api_key):
            trace.status = 401
            return _error(proto, 401, "Invalid API key (simulated): check the key you send.", "authentication_error")
        raw = await request.body()
        trace.body_digest = hashlib.blake2b(raw, digest_size=6).hexdigest()
        try:
            body = orjson.loads(raw)
            if not isinstance(body, dict):
                raise ValueError("the body must be a JSON object")
            info = proto.read(body, config.model)
        except ValueError as exc:
            trace.status = 400
            return _error(proto, 400, f"invalid request: {exc}", "invalid_request_error")
        if config.reject_stream_options and info.sent_stream_options:
            trace.status = 400
            return _error(proto, 400, "Unrecognized request argument supplied: stream_options", "invalid_request_error")
        if fault in _ERRORS:
            status, message, kind = _ERRORS[fault]
            trace.status = status
            return _error(proto, status, message, kind)
        max_tokens = info.max_tokens if info.max_tokens is not None else config.default_max_tokens
        if fault == "http_400_context_length" or info.prompt_tokens + max_tokens > config.max_context:
            trace.status = 400
            message = (f"This model's maximum context length is {config.max_context} tokens. However, you requested "
                       f"{info.prompt_tokens + max_tokens} tokens ({info.prompt_tokens} in the messages, "
                       f"{max_tokens} in the completion). Please reduce the length of the messages or completion.")
            return _error(proto, 400, message, "invalid_request_error")
        natural = config.output_tokens
        if info.ignore_eos or natural is None or natural > max_tokens:
            n_tokens, finish = max_tokens, "length"
        else:
            n_tokens, finish = natural, "stop"
        info.id = f"cmpl-sim-{seq}"
        info.created = int(time.time())
        trace.prompt_tokens = info.prompt_tokens
        trace.finish = finish
        return _PacedStream(state, proto, info, trace, n_tokens, finish)

    async def models(request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [
            {"id": config.model, "object": "model", "created": 0, "owned_by": "tokometer-sim",
             "max_model_len": config.max_context}]})

    async def ollama_tags(request: Request) -> Response:
        return JSONResponse({"models": [{"name": config.model, "model": config.model, "size": 0}]})

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def tokenize(request: Request) -> Response:
        body: dict[str, Any] = orjson.loads(await request.body() or b"{}")
        text = body.get("content", body.get("prompt", ""))
        if not isinstance(text, str):
            return _error(None, 400, "'content' must be a string", "invalid_request_error")
        ids = [state.word_id(w) for w in text.split()]
        return JSONResponse({"tokens": ids, "count": len(ids), "max_model_len": config.max_context})

    async def detokenize(request: Request) -> Response:
        body: dict[str, Any] = orjson.loads(await request.body() or b"{}")
        ids = body.get("tokens")
        if not isinstance(ids, list) or not all(isinstance(i, int) for i in ids):
            return _error(None, 400, "'tokens' must be a list of integers", "invalid_request_error")
        try:
            text = " ".join(state.words[i] for i in ids)
        except IndexError:
            return _error(None, 400, "unknown token id", "invalid_request_error")
        return JSONResponse({"content": text, "prompt": text})

    async def get_trace(request: Request) -> Response:
        last = request.query_params.get("last")
        traces = state.trace.last(int(last) if last else None)
        return Response(orjson.dumps([t.to_json() for t in traces]), media_type="application/json")

    async def clear_trace(request: Request) -> Response:
        state.trace.clear()
        return JSONResponse({"cleared": True})

    async def sim_config(request: Request) -> Response:
        return JSONResponse(config.model_dump())

    routes = [Route(path, generate, methods=["POST"]) for path in PROTOCOLS]
    routes += [
        Route("/v1/models", models, methods=["GET"]),
        Route("/api/tags", ollama_tags, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
        Route("/tokenize", tokenize, methods=["POST"]),
        Route("/detokenize", detokenize, methods=["POST"]),
        Route("/sim/trace", get_trace, methods=["GET"]),
        Route("/sim/trace", clear_trace, methods=["DELETE"]),
        Route("/sim/config", sim_config, methods=["GET"]),
    ]
    app = Starlette(routes=routes, middleware=[Middleware(_StampArrival)])
    app.state.sim = state
    return app

