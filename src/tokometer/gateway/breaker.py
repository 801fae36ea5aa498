"""Is an upstream down, or slow? A circuit breaker and recent latencies per upstream.

- **Down**: ``breaker_failures`` failures in a row open the circuit for
  ``breaker_cooldown_s``; then one request (or probe) may try it (half-open); a
  success closes it, a failure opens it again.
- **Slow**: the median of the last ``slow_window`` TTFTs (or TPOTs) above the
  route's threshold. Slow counts as unavailable: traffic moves to the next
  upstream, as it would for a down one.
- **Coming back**: nothing would ever measure an upstream that gets no traffic,
  so a prober sends a tiny request to every down or slow upstream every
  ``probe_interval_s``; its TTFT and outcome feed the same window and breaker.
- **Shared**: with a `HealthListener` attached (replicas sharing state through Redis,
  `tokometer.gateway.sharedstate`), every sample and every breaker change is also reported
  to it, and a half-open circuit lets this replica send the trial only when the listener
  says so; without one (the default) nothing else happens.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from statistics import median
from typing import Protocol

__all__ = ["HealthListener", "UpstreamHealth"]

_MIN_SAMPLES = 2


class HealthListener(Protocol):
    """Told of one upstream's samples and breaker changes (to share them with other replicas)."""

    def sampled(self, ttft_ms: float | None, tpot_ms: float | None) -> None:
        """A request or probe succeeded with these latencies."""

    def changed(self) -> None:
        """The circuit opened, opened again, or closed."""

    def may_try(self) -> bool:
        """May this replica send the half-open trial now?"""


@dataclass(slots=True)
class UpstreamHealth:
    """Breaker state and recent latencies of one upstream."""

    breaker_failures: int = 5
    breaker_cooldown_s: float = 30.0
    window: int = 10
    consecutive_failures: int = 0
    opened_at: float | None = None
    trial_in_flight: bool = False
    ttft_ms: deque[float] = field(default_factory=deque)
    tpot_ms: deque[float] = field(default_factory=deque)
    last_error: str = ""
    listener: HealthListener | None = None

    # -- breaker ----------------------------------------------------------------------------
    def state(self, now: float | None = None) -> str:
        if self.opened_at is None:
            return "closed"
        now = time.monotonic() if now is None else now
        return "half-open" if now - self.opened_at >= self.breaker_cooldown_s else "open"

    def allows(self, now: float | None = None) -> bool:
        """May a request go there now? (In half-open state, one trial at a time.)"""
        state = self.state(now)
        if state == "closed":
            return True
        return state == "half-open" and not self.trial_in_flight and (self.listener is None or
                                                                       self.listener.may_try())

    def success(self, ttft_ms: float | None = None, tpot_ms: float | None = None) -> None:
        self.consecutive_failures = 0
        was_open = self.opened_at is not None
        self.opened_at = None
        self.trial_in_flight = False
        if ttft_ms is not None:
            self._push(self.ttft_ms, ttft_ms)
        if tpot_ms is not None:
            self._push(self.tpot_ms, tpot_ms)
        if self.listener is not None:
            if ttft_ms is not None or tpot_ms is not None:
                self.listener.sampled(ttft_ms, tpot_ms)
            if was_open:
                self.listener.changed()

    def sample(self, ttft_ms: float) -> None:
        """A TTFT seen without an outcome (a hedge's loser, cancelled after so long): into the window only,
        the breaker untouched (a primary that always loses must still be able to fail)."""
        self.trial_in_flight = False
        self._push(self.ttft_ms, ttft_ms)
        if self.listener is not None:
            self.listener.sampled(ttft_ms, None)

    def failure(self, reason: str, now: float | None = None) -> None:
        self.consecutive_failures += 1
        self.trial_in_flight = False
        self.last_error = reason
        if self.consecutive_failures >= self.breaker_failures or self.opened_at is not None:
            self.opened_at = time.monotonic() if now is None else now
            if self.listener is not None:
                self.listener.changed()

    def _push(self, window: deque[float], value: float) -> None:
        window.append(value)
        while len(window) > self.window:
            window.popleft()

    # -- slowness ---------------------------------------------------------------------------
    def recent_ttft_ms(self) -> tuple[float, ...]:
        """The recent TTFTs (the ``slow_window``), oldest first: what a hedge deadline is a percentile of."""
        return tuple(self.ttft_ms)

    def slow(self, ttft_limit_ms: float | None, tpot_limit_ms: float | None) -> str | None:
        """Why this upstream counts as slow for a route's limits, or ``None``."""
        if ttft_limit_ms is not None and len(self.ttft_ms) >= _MIN_SAMPLES:
            recent = median(self.ttft_ms)
            if recent > ttft_limit_ms:
                return f"recent TTFT p50 {recent:.0f} ms > {ttft_limit_ms:.0f} ms"
        if tpot_limit_ms is not None and len(self.tpot_ms) >= _MIN_SAMPLES:
            recent = median(self.tpot_ms)
            if recent > tpot_limit_ms:
                return f"recent TPOT p50 {recent:.1f} ms > {tpot_limit_ms:.1f} ms"
        return None

    def summary(self) -> dict[str, object]:
        return {
            "state": self.state(),
            "consecutive_failures": self.consecutive_failures,
            "ttft_p50_ms": median(self.ttft_ms) if self.ttft_ms else None,
            "tpot_p50_ms": median(self.tpot_ms) if self.tpot_ms else None,
            "last_error": self.last_error or None,
        }
