"""Which of a route's upstreams a request tries first: the route's ``routing`` policy.

`Router.order` keeps its rule (upstreams whose circuit is open or that are slow go last); within the available
ones, `Balancer.rank` orders by the policy, and the rest follow in that order as fallbacks:

=====================  =============================================================================
ordered                the route's list, as written (the first healthy one serves; the next on failure)
round-robin            the list rotated by one per request
least-outstanding      fewest requests in flight to it (waiting at its max_concurrency included): this
                       replica's, plus the other replicas' as Redis last said when ``[replicas]
                       redis_url`` is set (`tokometer.gateway.sharedload`); ties in the list's order
least-load             fewest requests its engine holds: others' requests as its ``/metrics`` last said
                       (waiting + running, in vLLM's, SGLang's, llama.cpp's or TGI's names:
                       `tokometer.observe.vocabulary`), less this gateway's in flight then,
                       plus this gateway's in flight now; then the KV cache's use. A reading older
                       than ``3 × scrape_interval_s`` (or none: the scrape failed, timed out or was
                       not a known engine's) falls back to the outstanding requests, for that
                       upstream, until a reading comes again
prefix-affinity        the upstream the prompt's first ``affinity_prefix_chars`` characters hash to
                       (rendezvous hashing over the available upstreams: every replica of the gateway
                       picks the same one without sharing anything, and an upstream that goes away
                       moves only its own prefixes), while it has at most ``affinity_slack`` more
                       requests in flight than the least busy; else least-outstanding
=====================  =============================================================================

The load readings (`LoadBoard`) are taken off the request path: one background task per gateway reads every
least-load upstream's ``/metrics`` each interval, each read bounded (16 MiB, a deadline of the interval, in a
worker thread). Every replica reads the engines itself: an engine's own gauges are the truth all replicas
share, so least-load exchanges nothing through Redis; least-outstanding and prefix-affinity add the other
replicas' requests in flight (`SharedOutstanding`), read in the background.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from tokometer.gateway.config import RouteConfig
from tokometer.gateway.sharedload import SharedOutstanding
from tokometer.gateway.upstream import Upstream
from tokometer.messages import content_text, message_text
from tokometer.observe.prometheus import parse
from tokometer.observe.sampler import fetch_text

__all__ = ["Balancer", "Load", "LoadBoard", "metrics_url_of", "prefix_of"]

log = logging.getLogger("tokometer.gateway")

STALE_INTERVALS = 3
"""A load reading older than this many scrape intervals is not used."""


@dataclass(frozen=True, slots=True)
class Load:
    """An engine's load as its ``/metrics`` said, and the gateway's own in-flight count at that moment."""

    held: float
    """Requests the engine holds: waiting + running."""
    kv_usage: float
    """The KV cache's use, 0..1 (0: not exported)."""
    at: float
    """``time.monotonic()`` of the reading."""
    in_flight_then: int


def metrics_url_of(upstream: Upstream) -> str | None:
    """The ``/metrics`` URL the gateway reads for ``upstream`` (None: ``metrics_url = "off"``)."""
    configured = upstream.cfg.metrics_url
    if configured == "off":
        return None
    if configured:
        return configured
    parts = urlsplit(upstream.cfg.url)
    return f"{parts.scheme}://{parts.netloc}/metrics"


def prefix_of(body: Mapping[str, Any], chars: int) -> str:
    """The start of a request's prompt: its messages' (or its prompt's) text, up to ``chars`` characters."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        prompt = body.get("prompt")
        return (prompt if isinstance(prompt, str) else content_text(prompt))[:chars]
    pieces: list[str] = []
    size = 0
    for message in messages:
        text = message_text(message) if isinstance(message, Mapping) else ""
        pieces.append(text)
        size += len(text) + 1
        if size >= chars:
            break
    return "\x1e".join(pieces)[:chars]


def _weight(prefix: str, name: str) -> bytes:
    return hashlib.blake2b(f"{name}\x1f{prefix}".encode("utf-8", "surrogatepass"), digest_size=8).digest()


class LoadBoard:
    """The last load reading of each upstream that a least-load route uses, refreshed in the background."""

    def __init__(self, upstreams: Mapping[str, Upstream], routes: Sequence[RouteConfig]) -> None:
        self.upstreams = upstreams
        watched = {name: r.scrape_interval_s for r in routes if r.routing == "least-load" for name in r.upstreams}
        self.interval = min(watched.values(), default=0.5)
        self.urls = {name: url for name in sorted(watched)
                     if (url := metrics_url_of(upstreams[name])) is not None}
        self.loads: dict[str, Load] = {}
        self.failures: dict[str, str] = {}
        self._task: asyncio.Task[None] | None = None

    def ensure_running(self) -> None:
        if self.urls and (self._task is None or self._task.done()):
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    def fresh(self, name: str, now: float) -> Load | None:
        """The upstream's reading if it is recent enough to route by, else None."""
        load = self.loads.get(name)
        return load if load is not None and now - load.at <= STALE_INTERVALS * self.interval else None

    def reading(self, name: str) -> dict[str, Any]:
        """The upstream's last reading for ``/health``: requests held, KV-cache use, its age, or why none."""
        load = self.loads.get(name)
        if load is None:
            return {"error": self.failures.get(name, "not read yet")}
        return {"held": load.held, "kv_usage": load.kv_usage, "age_s": round(time.monotonic() - load.at, 3),
                "fresh": self.fresh(name, time.monotonic()) is not None}

    async def _run(self) -> None:
        while True:
            started = time.monotonic()
            await asyncio.gather(*(self._read(name, url) for name, url in self.urls.items()))
            await asyncio.sleep(max(0.0, self.interval - (time.monotonic() - started)))

    async def _read(self, name: str, url: str) -> None:
        in_flight = self.upstreams[name].in_flight + self.upstreams[name].waiting
        try:
            async with asyncio.timeout(self.interval * 2):
                text = await asyncio.to_thread(fetch_text, url, self.interval * 2)
            snap = parse(text, 0)
            gauges = snap.gauges
            if "requests_running" not in gauges and "requests_waiting" not in gauges:
                raise ValueError(f"no running or waiting requests in it (read as {snap.source!r} metrics)")
        except (OSError, ValueError, TimeoutError) as exc:
            why = (f"no whole answer within {self.interval * 2:g} s" if isinstance(exc, TimeoutError)
                   else str(exc)[:200] or type(exc).__name__)
            if name not in self.failures:
                log.warning("upstream %s: its /metrics (%s) cannot be read for least-load routing (%s): routing "
                            "it by outstanding requests until it can", name, url, why)
            self.failures[name] = why
            self.loads.pop(name, None)
            return
        if self.failures.pop(name, None) is not None:
            log.warning("upstream %s: its /metrics can be read again", name)
        held = gauges.get("requests_running", 0.0) + gauges.get("requests_waiting", 0.0)
        self.loads[name] = Load(max(0.0, held), min(1.0, max(0.0, gauges.get("kv_cache_usage", 0.0))),
                                time.monotonic(), in_flight)


class Balancer:
    """Orders a route's available upstreams by its routing policy (`rank`)."""

    def __init__(self, upstreams: Mapping[str, Upstream], board: LoadBoard,
                 shared: SharedOutstanding | None = None) -> None:
        self.upstreams = upstreams
        self.board = board
        self.shared = shared
        """The other replicas' requests in flight (`tokometer.gateway.sharedload`); None: this replica's alone."""
        self._turns: dict[str, itertools.count[int]] = {}

    def rank(self, route: RouteConfig, names: list[str], body: Mapping[str, Any] | None) -> list[str]:
        """``names`` (the available upstreams, in the route's order) in the order to try them."""
        policy = route.routing
        if policy == "ordered" or len(names) < 2:
            return names
        if policy == "round-robin":
            turn = next(self._turns.setdefault(route.model, itertools.count())) % len(names)
            return names[turn:] + names[:turn]
        if policy == "least-load":
            now = time.monotonic()
            return sorted(names, key=lambda name: self._load(name, now))
        ranked = sorted(names, key=self._outstanding)
        if policy == "prefix-affinity" and body is not None:
            prefix = prefix_of(body, route.affinity_prefix_chars)
            home = max(names, key=lambda name: _weight(prefix, name))
            if self._outstanding(home) <= self._outstanding(ranked[0]) + route.affinity_slack:
                return [home] + [name for name in ranked if name != home]
        return ranked

    def _own(self, name: str) -> int:
        upstream = self.upstreams[name]
        return upstream.in_flight + upstream.waiting

    def _outstanding(self, name: str) -> int:
        """Requests in flight to ``name`` from this replica and, when shared, the others."""
        own = self._own(name)
        return own if self.shared is None else own + self.shared.others(name)

    def _load(self, name: str, now: float) -> tuple[float, float]:
        load = self.board.fresh(name, now)
        outstanding = self._own(name)  # the engine's count already holds the other replicas' requests
        if load is None:
            return float(outstanding), 0.0
        # the engine's count held this gateway's requests of that moment: those are replaced by its count now
        return max(0.0, load.held - load.in_flight_then) + outstanding, load.kv_usage
