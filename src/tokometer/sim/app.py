"""The simulator's ASGI app: protocol endpoints, paced streams, faults, its own trace.

Every streaming request follows the script in `SimConfig` on an absolute
schedule measured from the moment the request reached the app; the send time
of every content event is recorded in a `SendTrace` (``GET /sim/trace``), so a
test can hold the benchmark client's numbers against what really happened.
"""

from __future__ import annotations

import hashlib
import logging
import time
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from tokometer.inbound.body import BodyTimeout, BodyTooLarge, discard_rest, read_body
from tokometer.inbound.jsonbody import BadBody, parse_object
from tokometer.messages import message_text
from tokometer.protocols.openai.request import check_request
from tokometer.sim.auth import REFUSAL, RequireKey, authorized, presented
from tokometer.sim.config import SimConfig
from tokometer.sim.embeddings import embedding_routes
from tokometer.sim.metrics import CONTENT_TYPE, SimMetrics
from tokometer.sim.prefixcache import block_hashes, prompt_words
from tokometer.sim.protocols import PROTOCOLS, Protocol, count_words
from tokometer.sim.state import DropSimulatedResets, SimState
from tokometer.sim.steptime import engine_for
from tokometer.sim.streams import EngineStream, ScriptedStream
from tokometer.sim.trace import SendTrace, json_slices

__all__ = ["create_app"]

_ERRORS: dict[str, tuple[int, str, str]] = {
    "http_400": (400, "invalid request: simulated bad request", "invalid_request_error"),
    "http_401": (401, "Incorrect API key provided (simulated). Check the API key you send.", "authentication_error"),
    "http_403": (403, "Access denied for this key or region (simulated).", "permission_error"),
    "http_429": (429, "Rate limit reached for requests (simulated). Retry later.", "rate_limit_error"),
    "http_500": (500, "Internal server error (simulated).", "server_error"),
    "http_503": (503, "Service unavailable: the model is overloaded (simulated).", "server_error"),
}



class _StampArrival:
    """Pure ASGI middleware: stamp each request as it enters the app, before routing."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            scope["tokometer.arrival_ns"] = time.perf_counter_ns()
        await self.app(scope, receive, send)


async def _read(request: Request, config: SimConfig) -> bytes | Response:
    """The body within the limits the gateway keeps too (`tokometer.inbound`), or the refusal to send."""
    try:
        return await read_body(request, config.max_body_bytes, config.body_timeout_s, "--max-body-bytes",
                               idle_timeout_s=config.body_idle_timeout_s)
    except BodyTooLarge as exc:
        await discard_rest(request)
        return JSONResponse({"error": {"message": str(exc), "type": "invalid_request_error"}}, status_code=413,
                            headers={"connection": "close"})
    except BodyTimeout as exc:
        return JSONResponse({"error": {"message": str(exc), "type": "invalid_request_error"}}, status_code=408,
                            headers={"connection": "close"})
    except ClientDisconnect:
        return Response(status_code=499)


async def _json(request: Request, config: SimConfig) -> dict[str, Any] | Response:
    """An endpoint's JSON object body (an empty body is ``{}``), or the refusal to send."""
    raw = await _read(request, config)
    if isinstance(raw, Response):
        return raw
    try:
        return parse_object(raw or b"{}")
    except BadBody as exc:
        return _error(None, 400, str(exc), "invalid_request_error")


def _error(proto: Protocol | None, status: int, message: str, kind: str) -> Response:
    body = proto.error_body(status, message, kind) if proto else {"error": {"message": message, "type": kind}}
    return JSONResponse(body, status_code=status)


def create_app(config: SimConfig) -> Starlette:
    """The simulator as an ASGI app (run it with uvicorn, or `tokometer sim`)."""
    state = SimState(config, engine_for(config))
    metrics = SimMetrics(state, config.model)
    state.metrics = metrics
    logging.getLogger("uvicorn.error").addFilter(DropSimulatedResets())

    async def generate(request: Request) -> Response | ScriptedStream | EngineStream:
        received_ns = request.scope.get("tokometer.arrival_ns") or time.perf_counter_ns()
        config = state.config  # read once: PATCH /sim/config may change it between requests
        proto = PROTOCOLS[request.url.path]
        seq, fault = state.next_request()
        trace = SendTrace(seq=seq, path=request.url.path, fault=fault, received_ns=received_ns)
        state.trace.add(trace)
        if not authorized(presented(request.headers, request.url.path), config.api_key):
            trace.status = 401
            return _error(proto, 401, REFUSAL, "authentication_error")
        raw_or_refusal = await _read(request, config)
        if isinstance(raw_or_refusal, Response):
            trace.status = raw_or_refusal.status_code
            return raw_or_refusal
        raw = raw_or_refusal
        trace.body_digest = hashlib.blake2b(raw, digest_size=6).hexdigest()
        if state.config.trace_bodies:
            trace.body = raw[:65536].decode("utf-8", "replace")
        try:
            body = parse_object(raw)
            info = proto.read(body, config.model, count_words)
        except BadBody as exc:
            trace.status = 400
            return _error(proto, 400, str(exc), "invalid_request_error")
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
        too_long = info.prompt_tokens + max_tokens > config.max_context
        if too_long and config.truncate_context and fault != "http_400_context_length":
            info.prompt_tokens = max(1, config.max_context - max_tokens)  # cut silently; usage says so
            too_long = False
        if fault == "http_400_context_length" or too_long:
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
        if config.max_output_tokens is not None and n_tokens > config.max_output_tokens:
            n_tokens, finish = config.max_output_tokens, "length"
        info.id = f"cmpl-sim-{seq}"
        info.created = int(time.time())
        trace.prompt_tokens = info.prompt_tokens
        trace.finish = finish
        if state.engine is not None:
            blocks = block_hashes(prompt_words(body)) if state.engine.prefix_cache is not None else ()
            return EngineStream(state, proto, info, trace, n_tokens, finish, blocks=blocks)
        cached = config.prefix_cache_speedup > 1 and state.seen_before(trace.body_digest)
        return ScriptedStream(state, proto, info, trace, n_tokens, finish,
                              ttft_factor=1 / config.prefix_cache_speedup if cached else 1.0)

    async def models(request: Request) -> Response:
        config = state.config  # the current settings (PATCH /sim/config), not the start-up ones
        return JSONResponse({"object": "list", "data": [
            {"id": config.model, "object": "model", "created": 0, "owned_by": "tokometer-sim",
             "max_model_len": config.max_context}]})

    async def ollama_tags(request: Request) -> Response:
        config = state.config
        return JSONResponse({"models": [{"name": config.model, "model": config.model, "size": 0}]})

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def tokenize(request: Request) -> Response:
        body = await _json(request, state.config)
        if isinstance(body, Response):
            return body
        text = body.get("content", body.get("prompt", ""))
        messages = body.get("messages")
        if messages is not None:  # vLLM's chat form: the sim has no template, so the messages' words
            try:
                check_request({"messages": messages}, chat=True)
            except ValueError as exc:
                return _error(None, 400, f"invalid request: {exc}", "invalid_request_error")
            text = " ".join(message_text(m) for m in messages)
        if not isinstance(text, str):
            return _error(None, 400, "'content' must be a string", "invalid_request_error")
        ids = [state.word_id(w) for w in text.split()]
        return JSONResponse({"tokens": ids, "count": len(ids), "max_model_len": state.config.max_context})

    async def detokenize(request: Request) -> Response:
        body = await _json(request, state.config)
        if isinstance(body, Response):
            return body
        ids = body.get("tokens")
        if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
            return _error(None, 400, "'tokens' must be a list of integers", "invalid_request_error")
        if not all(0 <= i < len(state.words) for i in ids):
            return _error(None, 400, "unknown token id", "invalid_request_error")
        text = " ".join(state.words[i] for i in ids)
        return JSONResponse({"content": text, "prompt": text})

    async def get_trace(request: Request) -> Response:
        """``?last=N``, or ``?since=SEQ`` (requests SEQ on), and ``&limit=N``; streamed a slice at a time."""
        try:
            picked = {name: int(request.query_params[name]) for name in ("last", "since", "limit")
                      if request.query_params.get(name)}
        except ValueError:
            return _error(None, 400, "last, since and limit must be whole numbers", "invalid_request_error")
        return StreamingResponse(json_slices(state.trace.select(**picked)), media_type="application/json")

    async def clear_trace(request: Request) -> Response:
        state.trace.clear()
        return JSONResponse({"cleared": True})

    async def prometheus(request: Request) -> Response:
        return Response(metrics.render(), media_type=CONTENT_TYPE)

    async def sim_config(request: Request) -> Response:
        return JSONResponse(state.config.model_dump())

    async def patch_config(request: Request) -> Response:
        """Change the script while running (e.g. make the server slow, then fast again, in a test)."""
        changes = await _json(request, state.config)
        if isinstance(changes, Response):
            return changes
        try:
            state.config = SimConfig.model_validate({**state.config.model_dump(), **changes})
        except ValueError as exc:
            return _error(None, 400, f"invalid settings: {exc}", "invalid_request_error")
        return JSONResponse(state.config.model_dump())

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
        Route("/sim/config", patch_config, methods=["PATCH"]),
        Route("/metrics", prometheus, methods=["GET"]),
        *embedding_routes(state, _json),
    ]
    app = Starlette(routes=routes, middleware=[Middleware(_StampArrival),
                                               Middleware(RequireKey, state=state, skip=PROTOCOLS)])
    app.state.sim = state
    return app

