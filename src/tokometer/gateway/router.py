"""Choose the upstream that serves a request: in the route's order, skipping down or slow ones.

`Router.open` tries upstreams until one produces its first content event
(or a complete empty answer), retrying with back-off and falling back to the
next upstream only while nothing has reached the client yet. It returns the
opened stream with the events read so far; from then on the request belongs to
that upstream. A failure that is the request's own fault (HTTP 400, 404, 422)
is returned to the client as the upstream said it, without trying elsewhere.

With ``hedge_after`` the first attempt may be hedged (`tokometer.gateway.hedge`): the
winner is returned as if it had been the only attempt, the loser was cancelled. A
resume (`tokometer.gateway.resume`) opens the route again without the upstreams that
already failed this answer, and without hedging.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any

from tokometer.gateway.auth import auth_error
from tokometer.gateway.balance import Balancer
from tokometer.gateway.breaker import UpstreamHealth
from tokometer.gateway.config import RouteConfig
from tokometer.gateway.hedge import HedgeAfter, race
from tokometer.gateway.prometheus import GatewayMetrics
from tokometer.gateway.tracing import attempt as traced
from tokometer.gateway.upstream import Upstream, UpstreamCall, UpstreamError, UpstreamEvent
from tokometer.protocols.gateway_clients import Endpoint
from tokometer.protocols.openai.errors import error_body
from tokometer.util.errors import TokometerError
from tokometer.util.shown import clipped

__all__ = ["AllUpstreamsFailed", "Opened", "Router", "all_failed_body"]


class AllUpstreamsFailed(TokometerError):
    """Every upstream of the route failed; ``errors`` says how, upstream by upstream."""

    def __init__(self, errors: list[tuple[str, UpstreamError]]) -> None:
        super().__init__("; ".join(f"{name}: {error.detail}" for name, error in errors))
        self.errors = errors

    @property
    def status(self) -> int:
        categories = {error.category for _, error in self.errors}
        if categories == {"timeout"}:
            return 504
        if categories <= {"http_401", "http_403"}:
            return 502
        if categories == {"http_429"}:
            return 429  # every upstream is rate-limited: the client's SDK backs off (RateLimitError), not fails
        return 503 if categories <= {"http_429", "http_5xx"} else 502

    @property
    def retry_after_s(self) -> float | None:
        """The earliest time any upstream said it would answer again (its ``Retry-After``); None: none said."""
        waits = [error.retry_after_s for _, error in self.errors if error.retry_after_s is not None]
        return min(waits) if waits else None


def all_failed_body(route_model: str, exc: AllUpstreamsFailed) -> dict[str, Any]:
    """The client's error body when no upstream of the route could answer."""
    categories = {error.category for _, error in exc.errors}
    if categories <= {"http_401", "http_403"}:
        name, error = exc.errors[-1]
        return auth_error(error.status or 401, f"upstream {name} refused the gateway's credentials "
                          f"({clipped(error.detail)})", upstream=name)
    tried = "; ".join(f"{name}: {error.category} ({clipped(error.detail)})" for name, error in exc.errors)
    if exc.status == 429:
        return error_body(f"every upstream of {route_model!r} is rate-limited: {tried}", "requests",
                          "rate_limit_exceeded")
    return error_body(f"no upstream of {route_model!r} could answer: {tried}", "upstream_error", "upstream_unavailable")


@dataclass(slots=True)
class Opened:
    """An upstream that has started answering."""

    upstream: Upstream
    call: UpstreamCall
    buffered: list[UpstreamEvent]
    first_token_ns: int | None
    fallback: bool
    retries: int
    tried: list[str] = field(default_factory=list)
    hedge: str | None = None
    """A hedge was sent: the leg that won ("primary" or "hedge")."""
    span: Any = None
    """The attempt's trace span, ended on release (`tokometer.gateway.tracing`; None: not traced)."""
    _released: bool = False

    def release(self) -> None:
        """Give back the upstream's concurrency slot (once)."""
        if not self._released:
            self._released = True
            if self.span is not None:
                self.span.end()
            self.upstream.in_flight -= 1
            if self.upstream.limit is not None:
                self.upstream.limit.release()

    async def discard(self) -> None:
        """Close the upstream request and give back its slot (a hedge's loser, a broken segment)."""
        await self.call.cancel()
        self.release()


class Router:
    """Upstreams, their health, and the order a route tries them in."""

    def __init__(self, upstreams: dict[str, Upstream], metrics: GatewayMetrics,
                 balancer: Balancer | None = None) -> None:
        self.upstreams = upstreams
        self.metrics = metrics
        self.balancer = balancer
        """Ranks a route's available upstreams by its ``routing`` (None: every route in its list's order)."""
        self.health: dict[str, UpstreamHealth] = {
            name: UpstreamHealth(u.cfg.breaker_failures, u.cfg.breaker_cooldown_s) for name, u in upstreams.items()
        }
        self._racing: dict[str, int] = {}
        """Hedged races running, by route."""
        self._specs: dict[str, HedgeAfter] = {}

    def order(self, route: RouteConfig, body: Mapping[str, Any] | None = None) -> list[tuple[str, str | None]]:
        """The route's upstreams, available ones first (in the order its ``routing`` ranks them for ``body``:
        `tokometer.gateway.balance`); each with why it is unavailable (or None)."""
        ready, later = self._split(route)
        if self.balancer is not None and len(ready) > 1 and route.routing != "ordered":
            ready = [(name, None) for name in self.balancer.rank(route, [name for name, _ in ready], body)]
        return ready + later

    def _split(self, route: RouteConfig) -> tuple[list[tuple[str, str | None]], list[tuple[str, str | None]]]:
        """The route's upstreams in its order: those available now, and the others with why not."""
        now = time.monotonic()
        ready: list[tuple[str, str | None]] = []
        later: list[tuple[str, str | None]] = []
        for name in route.upstreams:
            health = self.health[name]
            reason = None if health.allows(now) else f"circuit {health.state(now)} ({health.last_error})"
            reason = reason or health.slow(route.slow_ttft_ms, route.slow_tpot_ms)
            (later if reason else ready).append((name, reason))
        return ready, later

    async def open(self, route: RouteConfig, body: Mapping[str, Any], endpoint: Endpoint,
                   only: str | None = None, exclude: frozenset[str] = frozenset()) -> Opened:
        """Open the route's first upstream that answers (``only``: that one; ``exclude``: not these, and no
        hedging: a resume)."""
        errors: list[tuple[str, UpstreamError]] = []
        retries = 0
        tried: list[str] = []
        order = [only] if only else [name for name, _ in self.order(route, body) if name not in exclude]
        hedging = route.hedge_after is not None and not only and not exclude
        skip: set[str] = set()
        for name in order:
            if name in skip:
                continue
            upstream = self.upstreams[name]
            attempts = 1 + upstream.cfg.retries
            for attempt in range(attempts):
                tried.append(name)
                try:
                    if hedging:
                        hedging = False
                        opened = await self._hedged(route, upstream, order, body, endpoint, errors, tried, skip)
                    else:
                        opened = await traced(self._try(upstream, body, endpoint), upstream)
                except UpstreamError as error:
                    self.failed(name, error)
                    errors.append((name, error))
                    if error.client_error:
                        raise
                    if attempt + 1 < attempts:
                        retries += 1
                        self.metrics.retries.labels(name).inc()
                        await asyncio.sleep(upstream.cfg.retry_backoff_s * (2**attempt))
                    continue
                # a fallback: served by another than the list's first (ordered) or the routing's first choice
                first = order[0] if order and route.routing != "ordered" else route.upstreams[0]
                opened.fallback = opened.upstream.name != first
                opened.retries = retries
                opened.tried = tried
                if opened.fallback and not exclude:
                    self.metrics.fallbacks.labels(route.model, first, opened.upstream.name).inc()
                return opened
        if not errors:
            errors.append((",".join(sorted(exclude)) or route.model,
                           UpstreamError("reset", "no other upstream is left to try")))
        raise AllUpstreamsFailed(errors)

    def failed(self, name: str, error: UpstreamError) -> None:
        """Count a failure of upstream ``name`` (its breaker; the timeouts metric)."""
        if error.category == "timeout":
            self.metrics.timeouts.labels(name).inc()
        if not error.client_error:
            self.health[name].failure(f"{error.category}: {clipped(error.detail)}")

    # -- hedging ----------------------------------------------------------------------------
    async def _hedged(self, route: RouteConfig, primary: Upstream, order: list[str], body: Mapping[str, Any],
                      endpoint: Endpoint, errors: list[tuple[str, UpstreamError]], tried: list[str],
                      skip: set[str]) -> Opened:
        """The first attempt on ``primary``, raced by a hedge if its first token is late (raises the primary's
        error when no leg answered; the hedge's error is counted here)."""
        assert route.hedge_after is not None
        spec = self._specs.get(route.hedge_after)
        if spec is None:
            spec = self._specs[route.hedge_after] = HedgeAfter.parse(route.hedge_after)
        deadline_ms = spec.deadline_ms(self.health[primary.name].recent_ttft_ms(), route.hedge_min_ms)
        target: list[str] = []

        def start_hedge() -> Coroutine[Any, Any, Opened] | None:
            name = self._hedge_target(route, order, primary.name)
            if name is None:
                return None
            racing = self._racing.get(route.model, 0)  # each race's hedge leg is in flight too: not a request
            if racing >= max(1.0, route.hedge_budget * (self._route_in_flight(route) - racing)):
                self.metrics.hedges.labels(route.model, "over_budget").inc()
                return None
            target.append(name)
            tried.append(name)
            self._racing[route.model] = self._racing.get(route.model, 0) + 1
            return traced(self._try(self.upstreams[name], body, endpoint), self.upstreams[name], hedge=True)

        try:
            result = await race(traced(self._try(primary, body, endpoint), primary),
                                None if deadline_ms is None else deadline_ms / 1e3, start_hedge, Opened.discard)
        finally:
            if target:
                self._racing[route.model] -= 1
        if target:
            hedge = target[0]
            if isinstance(result.hedge_error, UpstreamError):
                self.failed(hedge, result.hedge_error)
                errors.append((hedge, result.hedge_error))
                skip.add(hedge)
            self.metrics.hedges.labels(route.model, result.by or "failed").inc()
        if result.primary_lost_after_s is not None:  # cancelled, not failed: it was at least this slow
            self.health[primary.name].sample(result.primary_lost_after_s * 1e3)
        if result.winner is None:  # the primary's error goes to the caller: retries and fallback as usual
            assert result.primary_error is not None
            raise result.primary_error
        if result.by == "hedge" and isinstance(result.primary_error, UpstreamError):
            self.failed(primary.name, result.primary_error)
            errors.append((primary.name, result.primary_error))
        if target:
            result.winner.hedge = result.by
        return result.winner

    def _hedge_target(self, route: RouteConfig, order: list[str], primary: str) -> str | None:
        """The next upstream after ``primary`` that is available now (not down, not slow)."""
        available = {name for name, _ in self._split(route)[0]}
        for name in order:
            if name != primary and name in available:
                return name
        return None

    def _route_in_flight(self, route: RouteConfig) -> int:
        return sum(self.upstreams[name].in_flight for name in set(route.upstreams))

    async def _try(self, upstream: Upstream, body: Mapping[str, Any], endpoint: Endpoint) -> Opened:
        if upstream.limit is not None:
            upstream.waiting += 1
            try:
                await upstream.limit.acquire()
            finally:
                upstream.waiting -= 1
        upstream.in_flight += 1
        opened: Opened | None = None
        call: UpstreamCall | None = None
        try:
            buffered: list[UpstreamEvent] = []
            first: int | None = None
            try:
                # from the request's send: a server that takes the connection and never sends a response head (a
                # stopped process, a full accept queue) is as late with its first token as one that streams nothing
                async with asyncio.timeout(upstream.cfg.first_token_timeout_s):
                    call = await upstream.open(body, endpoint)
                    while (event := await call.next_event()) is not None:
                        buffered.append(event)
                        parsed = event.parsed
                        if parsed is None:
                            continue
                        if parsed.error is not None:
                            raise UpstreamError("server_error_event", f"error event: {clipped(parsed.error)}")
                        if parsed.has_content:
                            first = event.stamp
                            break
                        if parsed.done or parsed.finish_reason is not None:
                            break
            except TimeoutError:
                raise UpstreamError("timeout", f"no first token within {upstream.cfg.first_token_timeout_s:g} s") \
                    from None
            opened = Opened(upstream, call, buffered, first, False, 0)
            return opened
        finally:
            if opened is None:
                if call is not None:
                    with contextlib.suppress(Exception):
                        await call.cancel()
                upstream.in_flight -= 1
                if upstream.limit is not None:
                    upstream.limit.release()
