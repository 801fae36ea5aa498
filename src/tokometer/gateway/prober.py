"""Probes down or slow upstreams, so that traffic comes back to them when they recover.

An upstream that gets no traffic is never measured again; the prober sends it
a tiny streamed request (one short user message, two output tokens) every
``probe_interval_s`` of its fastest route while its circuit is not closed or
it counts as slow, and feeds the outcome to its health like any request's.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping, Sequence

from tokometer.gateway.breaker import UpstreamHealth
from tokometer.gateway.config import RouteConfig
from tokometer.gateway.upstream import Upstream, UpstreamError

__all__ = ["Prober"]

_PROBE = {"messages": [{"role": "user", "content": "ping"}], "max_tokens": 2, "temperature": 0, "stream": True}


class Prober:
    def __init__(self, upstreams: Mapping[str, Upstream], health: Mapping[str, UpstreamHealth],
                 routes: Sequence[RouteConfig]) -> None:
        self.upstreams = upstreams
        self.health = health
        self.routes = routes
        self._task: asyncio.Task[None] | None = None
        intervals = [r.probe_interval_s for r in routes]
        self.interval = min(intervals) if intervals else 2.0
        self.probes = 0

    def ensure_running(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def _needs_probe(self, name: str) -> bool:
        health = self.health[name]
        if health.state() != "closed":
            return health.allows()
        return any(name in r.upstreams and health.slow(r.slow_ttft_ms, r.slow_tpot_ms) for r in self.routes)

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            names = [name for name in self.upstreams if self._needs_probe(name)]
            if names:
                await asyncio.gather(*(self.probe(name) for name in names))

    async def probe(self, name: str) -> None:
        """One probe request; its TTFT (or failure) goes into the upstream's health."""
        upstream = self.upstreams[name]
        health = self.health[name]
        health.trial_in_flight = health.state() == "half-open"
        self.probes += 1
        body = {**_PROBE, "model": upstream.cfg.model}
        call = None
        try:
            first = None
            async with asyncio.timeout(upstream.cfg.first_token_timeout_s):  # the response head's wait included
                call = await upstream.open(body, "chat")
                while (event := await call.next_event()) is not None:
                    if event.parsed is not None and event.parsed.has_content and first is None:
                        first = event.stamp
            health.success((first - call.sent_ns) / 1e6 if first is not None else None)
        except (UpstreamError, TimeoutError) as exc:
            health.failure(f"probe: {exc}")
        finally:
            if call is not None:
                await call.cancel()
