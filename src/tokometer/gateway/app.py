"""The gateway's ASGI app: an OpenAI-compatible front for any engines tokometer speaks to.

A request passes the admission stages, one ordered table (`tokometer.gateway.stages`):
authentication (API keys, hashed) → the body → its translation and fields → the route for its
``model`` → the key's token budget → the prompt's size (counted with the model's tokenizer:
rejected, truncated, ``max_tokens`` capped) → the answer cache; then the router (primary,
retries, circuit breaker, fallback, "slow" as down) → the relay (streams pass through as they
arrive) → accounting (health, metrics, one log line, budget, cache:
`tokometer.gateway.accounting`). Endpoints: ``/v1/chat/completions``,
``/v1/completions``, ``/v1/messages`` (Anthropic's Messages API) and ``/v1/responses`` (OpenAI's
Responses API), both translated into chat requests on the way in and written back in their own
protocol (`tokometer.protocols.gateway_clients`), ``/v1/models``, ``/health``, ``/metrics`` (the last two
rendered at most so often that a flood of them cannot slow the streams: `tokometer.inbound.cheap`).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, ClassVar

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from tokometer.gateway.accounting import Figures, cached_answer, feed_health, log_entry, observe, replay_entry
from tokometer.gateway.auth import KeyRing
from tokometer.gateway.balance import Balancer, LoadBoard
from tokometer.gateway.budget import TokenBudgets
from tokometer.gateway.cache import AnswerCache, CachedAnswer, make_cache
from tokometer.gateway.config import GatewayConfig
from tokometer.gateway.counting import CountingLanes
from tokometer.gateway.openai_format import Answer, replay, whole
from tokometer.gateway.outcome import RelayContext, RelayOutcome
from tokometer.gateway.prober import Prober
from tokometer.gateway.prometheus import CONTENT_TYPE, GatewayMetrics
from tokometer.gateway.prompt import PromptLimiter
from tokometer.gateway.ratelimit import RateLimits
from tokometer.gateway.relay import Relay
from tokometer.gateway.requestlog import RequestLog
from tokometer.gateway.router import Router
from tokometer.gateway.sharedload import share_outstanding
from tokometer.gateway.sharedstate import share_health
from tokometer.gateway.stages import Admission, Check, stages_for
from tokometer.gateway.tracing import tracer_for
from tokometer.gateway.upstream import Upstream
from tokometer.inbound.cheap import Rendered
from tokometer.inbound.request_limits import DEFAULT_LIMITS
from tokometer.protocols.gateway_clients import CLIENT_PATHS, ClientApi, Endpoint, writer_for

__all__ = ["Gateway", "create_app"]


class Gateway:
    """The gateway's state: upstreams, routes, health, cache, budgets, keys, metrics, log."""

    def __init__(self, config: GatewayConfig) -> None:
        self.config = config
        self.limits = DEFAULT_LIMITS.with_messages(config.server.max_messages)
        self.upstreams = {u.name: Upstream(u) for u in config.upstreams}
        self.metrics = GatewayMetrics()
        self.loads = LoadBoard(self.upstreams, config.routes)
        self.outstanding = share_outstanding(self.upstreams, config.routes, config.replicas)
        self.router = Router(self.upstreams, self.metrics, Balancer(self.upstreams, self.loads, self.outstanding))
        self.metrics.add_live(self._live)
        for route in config.routes:
            for name in route.upstreams:
                self.router.health[name].window = route.slow_window
        self.limiters = {r.model: PromptLimiter(r) for r in config.routes}
        self.cache: AnswerCache | None = make_cache(config.cache)
        self.keys = KeyRing(config.keys)
        self.budgets = TokenBudgets(config.keys, config.budgets.period, config.cache.redis_url,
                                    config.cache.redis_timeout_s)
        self.rates = RateLimits(config.cache.redis_url, config.cache.redis_timeout_s)
        self.log = RequestLog(config.log.path)
        self.tracer = tracer_for(config.tracing)
        """OpenTelemetry traces (`tokometer.gateway.tracing`); None: off."""
        self.prober = Prober(self.upstreams, self.router.health, config.routes)
        self.shared = share_health(self.router.health, config.replicas)
        self.worker: str | None = None  # this process's index under --workers: sent as x-tokometer-worker
        self._tasks: set[asyncio.Task[Any]] = set()
        self.counting = CountingLanes(config.server.counting_threads)
        self.stages = stages_for(self)
        """The admission stages this gateway's config needs, in order: chosen once, here."""

    def _live(self) -> dict[str, dict[str, float]]:
        return {name: {"in_flight": u.in_flight, "waiting": u.waiting,
                       "up": 1.0 if self.router.health[name].state() == "closed" else 0.0}
                for name, u in self.upstreams.items()}

    def _background(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        await self.prober.stop()
        await self.loads.stop()
        if self.shared is not None:
            await self.shared.close()
        if self.outstanding is not None:
            await self.outstanding.close()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        for upstream in self.upstreams.values():
            await upstream.close()
        if self.cache is not None:
            await self.cache.close()
        await self.budgets.close()
        await self.rates.close()
        if self.tracer is not None:
            await asyncio.to_thread(self.tracer.shutdown)
        self.log.close()
        self.counting.shutdown()

    # -- handling ---------------------------------------------------------------------------
    async def handle(self, request: Request, endpoint: Endpoint, api: ClientApi = "openai") -> Response | Relay:
        """Admit a request through this gateway's stages (`tokometer.gateway.stages`); relay what passes."""
        admission = Admission(request, endpoint, api, time.perf_counter_ns())
        trace = None if self.tracer is None else self.tracer.begin(request.headers, endpoint, api)
        for stage in self.stages:
            if isinstance(stage, Check):
                answer = stage.run(self, admission)
            else:
                answer = await stage.run(self, admission)
            if answer is not None:
                if trace is not None:
                    route = getattr(admission, "route", None)  # (not found yet when refused before it)
                    trace.answered(answer.status_code, route and route.model, answer.headers.get("x-tokometer-cache"))
                return answer
        self.prober.ensure_running()
        self.loads.ensure_running()
        return Relay(admission.context(self.worker), self.router, self.metrics, self.finish)

    def replay(self, ctx: RelayContext, hit: CachedAnswer) -> Response:
        """A cached answer, written in the client's protocol (streamed or whole), logged and counted."""
        answer = Answer(text=hit.text, reasoning=hit.reasoning, finish_reason=hit.finish_reason,
                        prompt_tokens=hit.prompt_tokens, completion_tokens=hit.completion_tokens, model=hit.model)
        writer = writer_for(ctx.api, ctx.endpoint == "chat", hit.model, ctx.include_usage, hit.prompt_tokens,
                            ctx.requested_max_tokens)
        # the name's UTF-8 bytes, as the relay writes them (Starlette encodes a header's text as Latin-1)
        served_by = hit.served_by.encode().decode("latin-1")
        out_headers = {**ctx.headers, "x-tokometer-cache": "hit", "x-tokometer-upstream": served_by}
        self.log.write(replay_entry(ctx, hit))
        self.metrics.requests.labels(ctx.route.model, "cache", "200").inc()
        if not ctx.stream:
            return JSONResponse(whole(writer, answer), headers=out_headers)
        chunks = replay(writer, answer)

        async def body() -> AsyncIterator[bytes]:
            for chunk in chunks:
                yield chunk

        from starlette.responses import StreamingResponse

        return StreamingResponse(body(), media_type="text/event-stream", headers=out_headers)

    def health(self, request: Request) -> dict[str, Any]:
        """``/health``: up/down per upstream for anyone; errors and timings only for whom the config allows."""
        return self.health_of(self.shows_details(request))

    def shows_details(self, request: Request) -> bool:
        """Whether ``/health`` shows this request upstreams' errors and timings (``[server] health_details``)."""
        show = self.config.server.health_details
        return show == "public" or (show == "authenticated" and (
            not self.keys.enabled or self.keys.identify_request(request.headers)[0] is not None))

    def health_of(self, detailed: Any) -> dict[str, Any]:
        """``/health``'s answer, with the details or without."""
        upstreams: dict[str, Any] = {}
        for name in self.upstreams:
            summary = self.router.health[name].summary()
            upstreams[name] = summary if detailed else {"state": summary["state"]}
            if detailed and name in self.loads.urls:
                summary["load"] = self.loads.reading(name)
            if detailed and self.outstanding is not None and name in self.outstanding.names:
                summary["others_in_flight"] = self.outstanding.others(name)
        cache = None if self.cache is None else {"backend": self.cache.backend, "healthy": self.cache.healthy}
        return {"status": "ok", "upstreams": upstreams, "cache": cache if detailed else None}

    # -- accounting (the relay's outcome) -------------------------------------------------------
    def finish(self, outcome: RelayOutcome) -> None:
        """Account for one relayed request (`tokometer.gateway.accounting`): health, metrics, log, budget, cache."""
        figures = Figures.of(outcome)
        feed_health(self.router, outcome, figures)
        observe(self.metrics, outcome, figures)
        self.log.write(log_entry(outcome, figures))
        if self.tracer is not None:
            self.tracer.finish(outcome, figures)
        ctx = outcome.ctx
        tokens = (figures.prompt or 0) + (figures.completion or 0)
        if ctx.key is not None and tokens:
            self._background(self.budgets.charge(ctx.key, tokens))
        if ctx.rate_limits and tokens:
            self._background(self.rates.charge(ctx.rate_limits, tokens))
        if ctx.cache_key is not None and self.cache is not None:
            cached = cached_answer(outcome, figures)
            if cached is not None:
                self._background(self.cache.put(ctx.cache_key, cached))


class _GatewayApp(Starlette):
    """Starlette, with the completions endpoints answered before its middleware and router.

    Every streamed event of every answer passes through the ``send`` of the app that answered: past
    Starlette's error and exception middleware that is three wrapper calls per event, and the router's
    matching per request. `Gateway.handle` answers every error itself, so those two endpoints go to it
    directly; an exception there still reaches uvicorn, which logs it and answers 500.
    """

    _FAST: ClassVar[dict[str, tuple[Endpoint, ClientApi]]] = CLIENT_PATHS

    def __init__(self, gateway: Gateway, cheap: dict[str, Callable[[Request], Response]], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.gateway = gateway
        self.cheap = cheap
        """The cheap paths' answers (``/metrics``, ``/health``), answered past Starlette's middleware and router
        too: a flood of them costs the loop as little as it can."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        fast = self._FAST.get(scope["path"]) if scope["type"] == "http" and scope["method"] == "POST" else None
        if fast is None:
            cheap = self.cheap.get(scope["path"]) if scope["type"] == "http" and scope["method"] == "GET" else None
            if cheap is not None:
                await cheap(Request(scope, receive))(scope, receive, send)
                return
            await super().__call__(scope, receive, send)
            return
        scope["app"] = self
        answer = await self.gateway.handle(Request(scope, receive), *fast)
        await answer(scope, receive, send)


def create_app(config: GatewayConfig) -> Starlette:
    """The gateway as an ASGI app (run it with uvicorn, or `tokometer gateway`)."""
    gateway = Gateway(config)

    def client_route(path: str, endpoint: Endpoint, api: ClientApi) -> Route:
        async def answer(request: Request) -> Response | Relay:
            return await gateway.handle(request, endpoint, api)

        return Route(path, answer, methods=["POST"])

    async def models(request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [
            {"id": r.model, "object": "model", "created": 0, "owned_by": "tokometer-gateway"}
            for r in config.routes]})

    shown_health: Rendered[bytes] = Rendered(lambda detailed: orjson.dumps(gateway.health_of(detailed)))
    shown_metrics: Rendered[bytes] = Rendered(lambda _: gateway.metrics.render())

    def health(request: Request) -> Response:
        return Response(shown_health.get(gateway.shows_details(request)), media_type="application/json")

    def metrics(request: Request) -> Response:
        return Response(shown_metrics.get(), media_type=CONTENT_TYPE)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if gateway.shared is not None:
            await gateway.shared.start()
        if gateway.outstanding is not None:
            await gateway.outstanding.start()
        yield
        await gateway.close()

    app = _GatewayApp(gateway, {"/health": health, "/metrics": metrics}, routes=[
        *(client_route(path, *client) for path, client in _GatewayApp._FAST.items()),
        Route("/v1/models", models, methods=["GET"]),
    ], lifespan=lifespan)
    app.state.gateway = gateway
    return app
