"""The cheap paths (``/metrics``, ``/health``): answers a flood of requests cannot turn into work for the loop.

A client that asks for ``/metrics`` a thousand times a second must not slow the streams the same event
loop relays. `Rendered` keeps the last rendering of an answer and hands it out again while it is young:
for ``SHARE``⁻¹ times as long as rendering it took (a 2 ms rendering is served again for 40 ms), so that
however often it is asked for, rendering takes at most ``SHARE`` of the loop's time, while a reader that
asks now and then (a Prometheus scrape, a test) always gets a rendering younger than a few tens of
milliseconds. The age is bounded above by `MAX_AGE_S` whatever a rendering cost.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["MAX_AGE_S", "SHARE", "Rendered"]

SHARE = 0.05
"""The most of the loop's time renderings of one cheap path may take, however often it is asked for."""
MAX_AGE_S = 1.0
"""The oldest a rendering handed out may be."""

T = TypeVar("T")


class Rendered(Generic[T]):
    """The answer ``render(variant)`` gives, rendered again only when the last one of that variant is old."""

    def __init__(self, render: Callable[[Hashable], T]) -> None:
        self._render = render
        self._kept: dict[Hashable, tuple[float, T]] = {}

    def get(self, variant: Hashable = None) -> T:
        """The answer of ``variant`` (who may see what: a few values at most)."""
        now = time.perf_counter()
        kept = self._kept.get(variant)
        if kept is not None and now < kept[0]:
            return kept[1]
        answer = self._render(variant)
        done = time.perf_counter()
        self._kept[variant] = (done + min(MAX_AGE_S, (done - now) / SHARE), answer)
        return answer
