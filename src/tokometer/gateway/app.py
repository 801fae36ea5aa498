"""The gateway's ASGI app: an OpenAI-compatible front for any engines tokometer speaks to.

A request passes: authentication (API keys, hashed) → the route for its
``model`` → the key's token budget → the prompt's size (counted with the
model's tokenizer: rejected, truncated, ``max_tokens`` capped) → the answer
cache → the router (primary, retries, circuit breaker, fallback, "slow" as
down) → the relay (streams pass through as they arrive) → accounting (budget,
cache, metrics, one log line). Endpoints: ``/v1/chat/completions``,
``/v1/completions``, ``/v1/messages`` (Anthropic's Messages API) and ``/v1/responses`` (OpenAI's
Responses API), both translated into chat requests on the way in and written back in their own
protocol (`tokometer.protocols.gateway_clients`), ``/v1/models``, ``/health``, ``/metrics``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ClassVar

from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from tokometer.gateway.auth import KeyRing, auth_error
from tokometer.gateway.budget import TokenBudgets
from tokometer.gateway.cache import AnswerCache, CachedAnswer, cache_key, make_cache
from tokometer.gateway.config import GatewayConfig, RouteConfig
from tokometer.gateway.memory import lower_thread_priority, release_free_memory
from tokometer.gateway.metrics import CONTENT_TYPE, GatewayMetrics
from tokometer.gateway.openai_format import Answer, replay, whole
from tokometer.gateway.outcome import RelayContext, RelayOutcome
from tokometer.gateway.prober import Prober
from tokometer.gateway.prompt import PromptCheck, PromptLimiter, TooLong
from tokometer.gateway.relay import Relay
from tokometer.gateway.requestlog import RequestLog, RequestLogEntry, cost_usd
from tokometer.gateway.router import Router
from tokometer.gateway.sharedstate import share_health
from tokometer.gateway.upstream import Endpoint, Upstream
from tokometer.inbound.body import BodyTimeout, BodyTooLarge, discard_rest, read_body
from tokometer.inbound.connections import EVICTED
from tokometer.inbound.jsonbody import BadBody, parse_object
from tokometer.metrics.request import decode_speed_tok_s, tpot_ns, ttft_ns
from tokometer.protocols.gateway_clients import ClientApi, api_name, relays_openai_bytes, to_chat_request, writer_for
from tokometer.protocols.gateway_clients import error_body as client_error_body
from tokometer.protocols.openai.errors import error_body
from tokometer.protocols.openai.request import check_request

__all__ = ["Gateway", "create_app"]

log = logging.getLogger("tokometer.gateway")
_BIG_PROMPT_BYTES = 256 * 1024
"""Bodies from this size on are counted in the big-prompt lane."""
_BIG_QUEUE_PER_THREAD = 4
"""Big prompts waiting (or being counted) per counting thread before more are refused with 503."""


def _error(api: ClientApi, body: dict[str, Any], status_code: int,
           headers: dict[str, str] | None = None) -> JSONResponse:
    """An error the gateway answers itself (``body`` in OpenAI's shape), in the shape ``api``'s clients read."""
    return JSONResponse(client_error_body(api, status_code, body), status_code=status_code, headers=headers)


def _client(request: Request) -> str:
    return f"{request.client.host}:{request.client.port}" if request.client else "an unknown address"


class Gateway:
    """The gateway's state: upstreams, routes, health, cache, budgets, keys, metrics, log."""

    def __init__(self, config: GatewayConfig) -> None:
        self.config = config
        self.upstreams = {u.name: Upstream(u) for u in config.upstreams}
        self.metrics = GatewayMetrics()
        self.router = Router(self.upstreams, self.metrics)
        self.metrics.add_live(self._live)
        for route in config.routes:
            for name in route.upstreams:
                self.router.health[name].window = route.slow_window
        self.limiters = {r.model: PromptLimiter(r) for r in config.routes}
        self.cache: AnswerCache | None = make_cache(config.cache)
        self.keys = KeyRing(config.keys)
        self.budgets = TokenBudgets(config.keys, config.budgets.period, config.cache.redis_url,
                                    config.cache.redis_timeout_s)
        self.log = RequestLog(config.log.path)
        self.prober = Prober(self.upstreams, self.router.health, config.routes)
        self.shared = share_health(self.router.health, config.replicas)
        self.worker: str | None = None  # this process's index under --workers: sent as x-tokometer-worker
        self._tasks: set[asyncio.Task[Any]] = set()
        self._count_small = ThreadPoolExecutor(2, "tokometer-count")
        self._count_big = ThreadPoolExecutor(config.server.counting_threads, "tokometer-count-big",
                                             initializer=lower_thread_priority)
        self._big_waiting = 0

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
        if self.shared is not None:
            await self.shared.close()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        for upstream in self.upstreams.values():
            await upstream.close()
        if self.cache is not None:
            await self.cache.close()
        await self.budgets.close()
        self.log.close()
        for pool in (self._count_small, self._count_big):
            pool.shutdown(wait=False, cancel_futures=True)

    # -- handling ---------------------------------------------------------------------------
    async def handle(self, request: Request, endpoint: Endpoint, api: ClientApi = "openai") -> Response | Relay:
        received = time.perf_counter_ns()
        key = None
        if self.keys.enabled:
            key, problem = self.keys.identify_request(request.headers)
            if key is None:
                self.metrics.rejected.labels("auth").inc()
                log.warning("authentication failed from %s: %s", _client(request), problem)
                return _error(api, auth_error(401, problem), status_code=401)
        limits = self.config.server
        try:
            raw = await read_body(request, limits.max_body_bytes, limits.body_timeout_s,
                                  idle_timeout_s=limits.body_idle_timeout_s)
        except BodyTimeout as exc:
            self.metrics.rejected.labels(exc.reason).inc()
            log.warning("client %s: %s", _client(request), exc)
            return _error(api, error_body(str(exc), "invalid_request_error", "request_timeout"), status_code=408,
                                headers={"connection": "close"})
        except BodyTooLarge as exc:
            self.metrics.rejected.labels("body_too_large").inc()
            await discard_rest(request)
            return _error(api, error_body(str(exc), "invalid_request_error", "request_too_large"), status_code=413,
                                headers={"connection": "close"})
        except ClientDisconnect:
            if not request.scope.get(EVICTED):  # closed to make room: logged as such already
                log.warning("client %s went away while sending its request body", _client(request))
            return Response(status_code=499)
        size = len(raw)
        try:
            body = to_chat_request(api, parse_object(raw))
            check_request(body, endpoint == "chat")
        except BadBody as exc:
            self.metrics.rejected.labels("bad_body").inc()
            return _error(api, error_body(str(exc), "invalid_request_error"), status_code=400)
        except ValueError as exc:  # a field of the wrong type: named, as OpenAI answers it
            self.metrics.rejected.labels("bad_field").inc()
            return _error(api, error_body(f"invalid request: {exc}", "invalid_request_error", "invalid_type"),
                                status_code=400)
        finally:
            del raw
        messages = body.get("messages")
        if isinstance(messages, list) and len(messages) > limits.max_messages:
            self.metrics.rejected.labels("too_many_messages").inc()
            return _error(api, error_body(f"{len(messages):,} messages is more than this gateway takes "
                                           f"({limits.max_messages:,}): send fewer", "invalid_request_error",
                                           "too_many_messages"), status_code=400)
        route = self.config.route(str(body.get("model", "")))
        if route is None:
            models = ", ".join(r.model for r in self.config.routes)
            return _error(api, error_body(f"model {body.get('model')!r} is not served here; models: {models}",
                                           "invalid_request_error", "model_not_found"), status_code=404)
        if key is not None and key.tokens_per_period is not None:
            state = await self.budgets.state(key.name)
            if state.exceeded:
                self.metrics.rejected.labels("budget").inc()
                return _error(api, error_body(self.budgets.message(state), "rate_limit_error",
                                               "token_budget_exceeded"), status_code=429)
        try:
            check = await self._check_prompt(route, body, endpoint, size)
        except TooLong as exc:
            self.metrics.rejected.labels("too_long").inc()
            return _error(api, error_body(str(exc), "invalid_request_error", "context_length_exceeded"),
                                status_code=400)
        if check is None:
            self.metrics.rejected.labels("counting_busy").inc()
            return _error(api, error_body("too many large prompts are being counted at once: retry shortly",
                                           "server_error", "counting_busy"), status_code=503,
                                headers={"retry-after": "1"})
        stream = bool(body.get("stream"))
        options = body.get("stream_options")
        include_usage = not relays_openai_bytes(api) or bool(isinstance(options, dict) and options.get("include_usage"))
        asked = body.get("max_completion_tokens", body.get("max_tokens"))
        headers: dict[str, str] = {} if self.worker is None else {"x-tokometer-worker": self.worker}
        if check.truncated_from is not None:
            headers["x-tokometer-truncated-from"] = str(check.truncated_from)
        if check.capped_max_tokens is not None:
            headers["x-tokometer-max-tokens"] = str(check.capped_max_tokens)
        ck = cache_key(route.model, check.body, endpoint) if self.cache is not None else None
        if ck is not None and self.cache is not None:
            hit = await self.cache.get(ck)
            self.metrics.cache.labels(route.model, "hit" if hit else "miss").inc()
            if hit is not None:
                return self._replay(route, endpoint, api, hit, stream, include_usage, key.name if key else None,
                                    received, headers, asked if isinstance(asked, int) else None)
        ctx = RelayContext(route, endpoint, check.body, stream, include_usage, key.name if key else None, ck,
                           check.prompt_tokens, asked if isinstance(asked, int) else None, received, headers, api)
        self.prober.ensure_running()
        return Relay(ctx, self.router, self.metrics, self.finish)

    async def _check_prompt(self, route: RouteConfig, body: dict[str, Any], endpoint: Endpoint,
                            size: int) -> PromptCheck | None:
        """Count (and cut) the prompt in a worker thread, so that no prompt holds up the event loop that
        relays everyone else's streams. Big prompts (``size``: the body's bytes) have a lane of their own,
        ``counting_threads`` niced threads with a bounded queue, so small ones never wait behind them;
        after a big one the freed memory is handed back to the system. None: the big lane is full."""
        limiter = self.limiters[route.model]
        if limiter.tokenizer is None:
            return limiter.check(body, endpoint)  # nothing to count: cheap
        loop = asyncio.get_running_loop()
        if size < _BIG_PROMPT_BYTES:
            return await loop.run_in_executor(self._count_small, limiter.check, body, endpoint)
        if self._big_waiting >= _BIG_QUEUE_PER_THREAD * self.config.server.counting_threads:
            return None
        self._big_waiting += 1
        try:
            return await loop.run_in_executor(self._count_big, limiter.check, body, endpoint)
        finally:
            self._big_waiting -= 1
            release_free_memory()

    def _replay(self, route: RouteConfig, endpoint: Endpoint, api: ClientApi, hit: CachedAnswer, stream: bool,
                include_usage: bool, key: str | None, received: int, headers: dict[str, str],
                max_tokens: int | None) -> Response:
        answer = Answer(text=hit.text, reasoning=hit.reasoning, finish_reason=hit.finish_reason,
                        prompt_tokens=hit.prompt_tokens, completion_tokens=hit.completion_tokens, model=hit.model)
        writer = writer_for(api, endpoint == "chat", hit.model, include_usage, hit.prompt_tokens, max_tokens)
        out_headers = {**headers, "x-tokometer-cache": "hit", "x-tokometer-upstream": hit.served_by}
        self.log.write(RequestLogEntry(key=key, route=route.model, upstream=hit.served_by, model_served=hit.model,
                                       status=200, prompt_tokens=hit.prompt_tokens,
                                       completion_tokens=hit.completion_tokens, cost_usd=0.0, ttft_ms=None,
                                       decode_tok_s=None, e2e_ms=(time.perf_counter_ns() - received) / 1e6,
                                       cache_hit=True, fallback=False, retries=0, error=None,
                                       api=api_name(api, endpoint)))
        self.metrics.requests.labels(route.model, "cache", "200").inc()
        if not stream:
            return JSONResponse(whole(writer, answer), headers=out_headers)
        chunks = replay(writer, answer)

        async def body() -> AsyncIterator[bytes]:
            for chunk in chunks:
                yield chunk

        from starlette.responses import StreamingResponse

        return StreamingResponse(body(), media_type="text/event-stream", headers=out_headers)

    def health(self, request: Request) -> dict[str, Any]:
        """``/health``: up/down per upstream for anyone; errors and timings only for whom the config allows."""
        show = self.config.server.health_details
        detailed = show == "public" or (show == "authenticated" and (
            not self.keys.enabled or self.keys.identify_request(request.headers)[0] is not None))
        upstreams: dict[str, Any] = {}
        for name in self.upstreams:
            summary = self.router.health[name].summary()
            upstreams[name] = summary if detailed else {"state": summary["state"]}
        cache = None if self.cache is None else {"backend": self.cache.backend, "healthy": self.cache.healthy}
        return {"status": "ok", "upstreams": upstreams, "cache": cache if detailed else None}

    # -- accounting (the relay's outcome) -------------------------------------------------------
    def finish(self, outcome: RelayOutcome) -> None:
        """Account for one relayed request: health, metrics, log, budget, cache. Every latency and token
        figure is `tokometer.metrics.request`'s, of the record the relay filled."""
        ctx, answer, record, upstream = outcome.ctx, outcome.answer, outcome.record, outcome.upstream
        name, route = (upstream.name if upstream is not None else "none"), ctx.route.model
        status = outcome.status
        ttft, tpot, e2e = ttft_ns(record), tpot_ns(record), (record.end_ns - record.sent_ns)
        # the upstream's own TTFT: `ttft_ns` of the record as if sent when the upstream request was
        upstream_ttft = None if ttft is None or not outcome.upstream_sent_ns else \
            ttft + record.sent_ns - outcome.upstream_sent_ns
        if upstream is not None and record.ok and not outcome.served_by:  # a resumed answer's TPOT is no one's
            self.router.health[name].success(None if upstream_ttft is None else upstream_ttft / 1e6,
                                             None if tpot is None else tpot / 1e6)
        series = self.metrics.series(route, name)
        if ttft is not None:
            series.observe("ttft", ttft / 1e9)
        if tpot is not None:
            series.observe("tpot", tpot / 1e9)
        prompt, completion = answer.prompt_tokens or ctx.prompt_tokens, record.output_tokens
        series.request(status)
        series.observe("duration", e2e / 1e9)
        cost = cost_usd(upstream.cfg, prompt or 0, completion or 0) if upstream is not None else None
        if prompt:
            series.add("input", prompt)
        if completion:
            series.add("output", completion)
        if cost:
            series.add("cost", cost)
        overhead = None
        if outcome.upstream_sent_ns and record.first_token_ns and outcome.first_sent_ns and outcome.hedge != "hedge":
            overhead = ((outcome.upstream_sent_ns - record.sent_ns) + (outcome.first_sent_ns - record.first_token_ns))
            series.observe("overhead", overhead / 1e9)
        self.log.write(RequestLogEntry(key=ctx.key, route=route, upstream=upstream.name if upstream else None,
                                       model_served=answer.model or None, status=status, prompt_tokens=prompt,
                                       completion_tokens=completion, cost_usd=cost, ttft_ms=_ms(ttft),
                                       tpot_ms=_ms(tpot), decode_tok_s=decode_speed_tok_s(record), e2e_ms=e2e / 1e6,
                                       cache_hit=False, fallback=outcome.fallback, retries=outcome.retries,
                                       error=outcome.error, upstream_ttft_ms=_ms(upstream_ttft),
                                       overhead_ms=_ms(overhead), hedge=outcome.hedge,
                                       resumes=max(0, len(outcome.served_by) - 1),
                                       served_by=list(outcome.served_by) or None,
                                       api=api_name(ctx.api, ctx.endpoint)))
        if ctx.key is not None and (prompt or completion):
            self._background(self.budgets.charge(ctx.key, (prompt or 0) + (completion or 0)))
        complete = status == 200 and outcome.error is None and answer.finish_reason is not None and not answer.cut \
            and not answer.has_tool_calls
        if complete and ctx.cache_key is not None and self.cache is not None and upstream is not None:
            cached = CachedAnswer(model=answer.model, text=answer.text, finish_reason=answer.finish_reason or "stop",
                                  prompt_tokens=prompt or 0, completion_tokens=completion or 0,
                                  served_by=upstream.name, created=int(time.time()), reasoning=answer.reasoning)
            self._background(self.cache.put(ctx.cache_key, cached))


def _ms(ns: float | None) -> float | None:
    return None if ns is None else ns / 1e6


class _GatewayApp(Starlette):
    """Starlette, with the completions endpoints answered before its middleware and router.

    Every streamed event of every answer passes through the ``send`` of the app that answered: past
    Starlette's error and exception middleware that is three wrapper calls per event, and the router's
    matching per request. `Gateway.handle` answers every error itself, so those two endpoints go to it
    directly; an exception there still reaches uvicorn, which logs it and answers 500.
    """

    _FAST: ClassVar[dict[str, tuple[Endpoint, ClientApi]]] = {
        "/v1/chat/completions": ("chat", "openai"), "/v1/completions": ("completions", "openai"),
        "/v1/messages": ("chat", "anthropic-messages"), "/v1/responses": ("chat", "openai-responses")}

    def __init__(self, gateway: Gateway, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.gateway = gateway

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        fast = self._FAST.get(scope["path"]) if scope["type"] == "http" and scope["method"] == "POST" else None
        if fast is None:
            await super().__call__(scope, receive, send)
            return
        scope["app"] = self
        answer = await self.gateway.handle(Request(scope, receive), *fast)
        await answer(scope, receive, send)


def create_app(config: GatewayConfig) -> Starlette:
    """The gateway as an ASGI app (run it with uvicorn, or `tokometer gateway`)."""
    gateway = Gateway(config)

    async def chat(request: Request) -> Response | Relay:
        return await gateway.handle(request, "chat")

    async def completions(request: Request) -> Response | Relay:
        return await gateway.handle(request, "completions")

    async def messages(request: Request) -> Response | Relay:
        return await gateway.handle(request, "chat", "anthropic-messages")

    async def responses(request: Request) -> Response | Relay:
        return await gateway.handle(request, "chat", "openai-responses")

    async def models(request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [
            {"id": r.model, "object": "model", "created": 0, "owned_by": "tokometer-gateway"}
            for r in config.routes]})

    async def health(request: Request) -> Response:
        return JSONResponse(gateway.health(request))

    async def metrics(request: Request) -> Response:
        return Response(gateway.metrics.render(), media_type=CONTENT_TYPE)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if gateway.shared is not None:
            await gateway.shared.start()
        yield
        await gateway.close()

    app = _GatewayApp(gateway, routes=[
        Route("/v1/chat/completions", chat, methods=["POST"]),
        Route("/v1/completions", completions, methods=["POST"]),
        Route("/v1/messages", messages, methods=["POST"]),
        Route("/v1/responses", responses, methods=["POST"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
    ], lifespan=lifespan)
    app.state.gateway = gateway
    return app
