"""The simulator's ASGI app: protocol endpoints, paced streams, faults, its own trace.

Every streaming request follows the script in `SimConfig` on an absolute
schedule measured from the moment the request reached the app; the send time
of every content event is recorded in a `SendTrace` (``GET /sim/trace``), so a
test can hold the benchmark client's numbers against what really happened.
The protocol endpoints are one per registered protocol with a server side (`tokometer.sim.servers`,
answered by `tokometer.sim.generate`), and one model list per path those servers list models at (OpenAI's
``/v1/models``, Ollama's ``/api/tags``); the rest here are the simulator's own (models, tokenizer, trace,
settings, metrics). Each endpoint finds the simulator's `SimState` on the app (``app.state.sim``, its
metrics ``app.state.metrics``).
"""

from __future__ import annotations

import logging
import time

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from tokometer.inbound.cheap import Rendered
from tokometer.messages import message_text
from tokometer.protocols.common.server import ProtocolServer
from tokometer.sim.adapters import listed_with
from tokometer.sim.auth import RequireKey
from tokometer.sim.bodies import CONFIG_CHANGES, DETOKENIZE_REQUEST, TOKENIZE_REQUEST, error, read_json
from tokometer.sim.config import SimConfig
from tokometer.sim.embeddings import embedding_routes
from tokometer.sim.generate import generate
from tokometer.sim.prometheus import CONTENT_TYPE, SimMetrics
from tokometer.sim.servers import SERVERS
from tokometer.sim.state import DropSimulatedResets, SimState
from tokometer.sim.steptime import engine_for
from tokometer.sim.trace import json_slices

__all__ = ["create_app"]


class _StampArrival:
    """Pure ASGI middleware: stamp each request as it enters the app, before routing."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            scope["tokometer.arrival_ns"] = time.perf_counter_ns()
        await self.app(scope, receive, send)


def create_app(config: SimConfig) -> Starlette:
    """The simulator as an ASGI app (run it with uvicorn, or `tokometer sim`)."""
    state = SimState(config, engine_for(config))
    metrics = SimMetrics(state, config.model)
    state.metrics = metrics
    logging.getLogger("uvicorn.error").addFilter(DropSimulatedResets())
    routes = [Route(path, generate, methods=["POST"]) for path in SERVERS]
    lists = {server.models_path: server for server in SERVERS.values() if server.models_path is not None}
    routes += [_model_list(server) for server in lists.values()]
    routes += [
        Route("/health", _health, methods=["GET"]),
        Route("/tokenize", _tokenize, methods=["POST"]),
        Route("/detokenize", _detokenize, methods=["POST"]),
        Route("/sim/trace", _get_trace, methods=["GET"]),
        Route("/sim/trace", _clear_trace, methods=["DELETE"]),
        Route("/sim/config", _sim_config, methods=["GET"]),
        Route("/sim/config", _patch_config, methods=["PATCH"]),
        Route("/metrics", _prometheus, methods=["GET"]),
        *embedding_routes(state, read_json),
    ]
    app = Starlette(routes=routes, middleware=[Middleware(_StampArrival),
                                               Middleware(RequireKey, state=state, skip=SERVERS)])
    app.state.sim = state
    app.state.metrics = metrics
    app.state.shown_metrics = Rendered(lambda _: metrics.render())
    return app


def _state(request: Request) -> SimState:
    """The simulator's state, kept on the app."""
    state: SimState = request.app.state.sim
    return state


def _model_list(server: ProtocolServer) -> Route:
    """The route of ``server``'s protocol's model list: the one model the simulator serves."""

    async def models(request: Request) -> Response:
        config = _state(request).config  # the current settings (PATCH /sim/config), not the start-up ones
        listing = server.models(config.model, config.max_context, "tokometer-sim")
        if config.lora is not None:  # the adapters after the model, as vLLM lists them
            listing = listed_with(listing, [server.models(name, config.max_context, "tokometer-sim")
                                            for name in config.lora.names])
        return JSONResponse(listing)

    assert server.models_path is not None
    return Route(server.models_path, models, methods=["GET"])


async def _health(request: Request) -> Response:
    return JSONResponse({"status": "ok"})


async def _tokenize(request: Request) -> Response:
    """vLLM's ``/tokenize`` (``prompt`` or ``messages``) and llama.cpp's (``content``): a word a token."""
    state = _state(request)
    body = await read_json(request, state.config, TOKENIZE_REQUEST)
    if isinstance(body, Response):
        return body
    text = body.get("content", body.get("prompt", ""))
    messages = body.get("messages")
    if messages is not None:  # vLLM's chat form: the sim has no template, so the messages' words
        text = " ".join(message_text(m) for m in messages)
    if not isinstance(text, str):
        return error(None, 400, "'content' must be a string", "invalid_request_error")
    ids = [state.word_id(w) for w in text.split()]
    return JSONResponse({"tokens": ids, "count": len(ids), "max_model_len": state.config.max_context})


async def _detokenize(request: Request) -> Response:
    """The words of token ids `_tokenize` gave."""
    state = _state(request)
    body = await read_json(request, state.config, DETOKENIZE_REQUEST)
    if isinstance(body, Response):
        return body
    ids = body.get("tokens")
    if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        return error(None, 400, "'tokens' must be a list of integers", "invalid_request_error")
    if not all(0 <= i < len(state.words) for i in ids):
        return error(None, 400, "unknown token id", "invalid_request_error")
    text = " ".join(state.words[i] for i in ids)
    return JSONResponse({"content": text, "prompt": text})


async def _get_trace(request: Request) -> Response:
    """``?last=N``, or ``?since=SEQ`` (requests SEQ on), and ``&limit=N``; streamed a slice at a time."""
    state = _state(request)
    try:
        picked = {name: int(request.query_params[name]) for name in ("last", "since", "limit")
                  if request.query_params.get(name)}
    except ValueError:
        return error(None, 400, "last, since and limit must be whole numbers", "invalid_request_error")
    return StreamingResponse(json_slices(state.trace.select(**picked)), media_type="application/json")


async def _clear_trace(request: Request) -> Response:
    _state(request).trace.clear()
    return JSONResponse({"cleared": True})


async def _prometheus(request: Request) -> Response:
    """``/metrics``, rendered at most so often that a flood of requests cannot slow the streams
    (`tokometer.inbound.cheap`)."""
    shown: Rendered[bytes] = request.app.state.shown_metrics
    return Response(shown.get(), media_type=CONTENT_TYPE)


async def _sim_config(request: Request) -> Response:
    return JSONResponse(_state(request).config.model_dump())


async def _patch_config(request: Request) -> Response:
    """Change the script while running (e.g. make the server slow, then fast again, in a test)."""
    state = _state(request)
    changes = await read_json(request, state.config, CONFIG_CHANGES)
    if isinstance(changes, Response):
        return changes
    try:
        state.config = SimConfig.model_validate({**state.config.model_dump(), **changes})
    except ValueError as exc:
        return error(None, 400, f"invalid settings: {exc}", "invalid_request_error")
    return JSONResponse(state.config.model_dump())
