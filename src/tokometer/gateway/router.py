"""Choose the upstream that serves a request: in the route's order, skipping down or slow ones.

`Router.open` tries upstreams until one produces its first content event
(or a complete empty answer), retrying with back-off and falling back to the
next upstream only while nothing has reached the client yet. It returns the
opened stream with the events read so far; from then on the request belongs to
that upstream. A failure that is the request's own fault (HTTP 400, 404, 422)
is returned to the client as the upstream said it, without trying elsewhere.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from tokometer.errors import TokometerError
from tokometer.gateway.auth import auth_error
from tokometer.gateway.config import RouteConfig
from tokometer.gateway.health import UpstreamHealth
from tokometer.gateway.metrics import GatewayMetrics
from tokometer.gateway.upstream import Endpoint, Upstream, UpstreamCall, UpstreamError, UpstreamEvent
from tokometer.wire.openai import error_body

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
        return 503 if categories <= {"http_429", "http_5xx"} else 502


def all_failed_body(route_model: str, exc: AllUpstreamsFailed) -> dict[str, Any]:
    """The client's error body when no upstream of the route could answer."""
    categories = {error.category for _, error in exc.errors}
    if categories <= {"http_401", "http_403"}:
        name, error = exc.errors[-1]
        return auth_error(error.status or 401, f"upstream {name} refused the gateway's credentials "
                          f"({error.detail[:160]})", upstream=name)
    tried = "; ".join(f"{name}: {error.category} ({error.detail[:120]})" for name, error in exc.errors)
    return error_body(f"no upstream of {route_model!r} could answer: {tried}", "upstream_error", "upstream_unavailable")


@dataclass(slots=True)
class Opened:
    """An upstream that has started answering."""

    upstream: Upstream
    call: UpstreamCall
    events: AsyncIterator[UpstreamEvent]
    buffered: list[UpstreamEvent]
    first_token_ns: int | None
    fallback: bool
    retries: int
    tried: list[str] = field(default_factory=list)
    _released: bool = False

    def release(self) -> None:
        """Give back the upstream's concurrency slot (once)."""
        if not self._released:
            self._released = True
            self.upstream.in_flight -= 1
            if self.upstream.limit is not None:
                self.upstream.limit.release()


class Router:
    """Upstreams, their health, and the order a route tries them in."""

    def __init__(self, upstreams: dict[str, Upstream], metrics: GatewayMetrics) -> None:
        self.upstreams = upstreams
        self.metrics = metrics
        self.health: dict[str, UpstreamHealth] = {
            name: UpstreamHealth(u.cfg.breaker_failures, u.cfg.breaker_cooldown_s) for name, u in upstreams.items()
        }

    def order(self, route: RouteConfig) -> list[tuple[str, str | None]]:
        """The route's upstreams, available ones first; each with why it is unavailable (or None)."""
        now = time.monotonic()
        ready: list[tuple[str, str | None]] = []
        later: list[tuple[str, str | None]] = []
        for name in route.upstreams:
            health = self.health[name]
            reason = None if health.allows(now) else f"circuit {health.state(now)} ({health.last_error})"
            reason = reason or health.slow(route.slow_ttft_ms, route.slow_tpot_ms)
            (later if reason else ready).append((name, reason))
        return ready + later

    async def open(self, route: RouteConfig, body: Mapping[str, Any], endpoint: Endpoint,
                   only: str | None = None) -> Opened:
        errors: list[tuple[str, UpstreamError]] = []
        retries = 0
        tried: list[str] = []
        order = [(only, None)] if only else self.order(route)
        for name, _ in order:
            upstream = self.upstreams[name]
            attempts = 1 + upstream.cfg.retries
            for attempt in range(attempts):
                tried.append(name)
                try:
                    opened = await self._try(upstream, body, endpoint)
                except UpstreamError as error:
                    self._failed(name, error)
                    errors.append((name, error))
                    if error.client_error:
                        raise
                    if attempt + 1 < attempts:
                        retries += 1
                        self.metrics.retries.labels(name).inc()
                        await asyncio.sleep(upstream.cfg.retry_backoff_s * (2**attempt))
                    continue
                opened.fallback = name != route.upstreams[0]
                opened.retries = retries
                opened.tried = tried
                if opened.fallback:
                    self.metrics.fallbacks.labels(route.model, route.upstreams[0], name).inc()
                return opened
        raise AllUpstreamsFailed(errors)

    def _failed(self, name: str, error: UpstreamError) -> None:
        if error.category == "timeout":
            self.metrics.timeouts.labels(name).inc()
        if not error.client_error:
            self.health[name].failure(f"{error.category}: {error.detail[:120]}")

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
            call = await upstream.open(body, endpoint)
            events = call.events()
            buffered: list[UpstreamEvent] = []
            first: int | None = None
            try:
                async with asyncio.timeout(upstream.cfg.first_token_timeout_s):
                    async for event in events:
                        buffered.append(event)
                        parsed = event.parsed
                        if parsed is None:
                            continue
                        if parsed.error is not None:
                            raise UpstreamError("server_error_event", f"error event: {parsed.error[:200]}")
                        if parsed.has_content:
                            first = event.stamp
                            break
                        if parsed.done or parsed.finish_reason is not None:
                            break
            except TimeoutError:
                raise UpstreamError("timeout", f"no first token within {upstream.cfg.first_token_timeout_s:g} s") \
                    from None
            opened = Opened(upstream, call, events, buffered, first, False, 0)
            return opened
        finally:
            if opened is None:
                if call is not None:
                    with contextlib.suppress(Exception):
                        await call.cancel()
                upstream.in_flight -= 1
                if upstream.limit is not None:
                    upstream.limit.release()
