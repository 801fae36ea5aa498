"""`Ramp`: a step's load rising from a start value to its target over a set time, then holding there.

``bench --ramp linear|exponential --ramp-from START --ramp-time DURATION`` ramps each step's load (its
concurrency, or its rate) from ``START`` up to the step's own value over ``DURATION``, as vLLM's
``--ramp-up-strategy``, GuideLLM and AIPerf do; the load then holds at the step's value until the step ends.

The target at ``t`` seconds from the step's start, with ``s`` the start, ``e`` the end and ``R`` the
ramp's duration (``t >= R``: ``e``):

- ``linear``: ``s + (e - s) t / R``;
- ``exponential``: ``s (e / s) ** (t / R)`` (``s > 0``): the same factor every equal stretch of time.

A concurrency ramp opens slots as the target passes whole numbers: slot ``k`` (from 1) opens when the target
first reaches ``k`` (`slot_opens`); the first ``floor(s)`` open at once. A rate ramp is an inhomogeneous
arrival process with that rate: request ``i`` is due when the expected number of arrivals since the start,
``Λ(t) = ∫ rate``, reaches the ``i``-th point of a unit-rate process of the step's arrival kind
(`tokometer.load.profiles.schedule_offsets`), by `due_at`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

from tokometer.util.limits import MAX_RATE, MIN_RATE

__all__ = ["MAX_RAMP_LOAD", "MAX_RAMP_S", "MIN_RAMP_LOAD", "MIN_RAMP_S", "Ramp", "RampStrategy"]

RampStrategy = Literal["linear", "exponential"]

MIN_RAMP_LOAD = MIN_RATE
MAX_RAMP_LOAD = MAX_RATE
"""A ramp's start (unless a linear one's 0) and end, in slots or requests a second, lie from `MIN_RAMP_LOAD` to
`MAX_RAMP_LOAD` (the bounds of a rate, `tokometer.util.limits`): an exponential ramp then rises by a factor of
at most 1e15 and Λ, Λ⁻¹ and the slots' openings stay finite (beyond, ``e / s`` overflowed and they were NaN)."""
MIN_RAMP_S = 1e-9
MAX_RAMP_S = 1e7
"""A ramp's duration lies from 1 ns (the clock's step) to 10,000,000 s (116 days)."""


@dataclass(frozen=True, slots=True)
class Ramp:
    """A ramp from ``start`` to ``end`` over ``duration_s`` seconds (then ``end``)."""

    strategy: RampStrategy
    start: float
    end: float
    duration_s: float

    def __post_init__(self) -> None:
        if not 0 <= self.start < self.end:
            raise ValueError("a ramp rises: its start must be at least 0 and below its end")
        if self.strategy == "exponential" and self.start <= 0:
            raise ValueError("an exponential ramp starts above 0")
        if not self.duration_s > 0:
            raise ValueError("a ramp takes some time: its duration must be positive")
        if self.start and not MIN_RAMP_LOAD <= self.start <= MAX_RAMP_LOAD:
            raise ValueError(f"a ramp's start is 0 (linear) or from {MIN_RAMP_LOAD:g} to {MAX_RAMP_LOAD:g}, not "
                             f"{self.start:g}")
        if not MIN_RAMP_LOAD <= self.end <= MAX_RAMP_LOAD:
            raise ValueError(f"a ramp's end is from {MIN_RAMP_LOAD:g} to {MAX_RAMP_LOAD:g}, not {self.end:g}")
        if not MIN_RAMP_S <= self.duration_s <= MAX_RAMP_S:
            raise ValueError(f"a ramp's duration is from {MIN_RAMP_S:g} to {MAX_RAMP_S:g} s, not "
                             f"{self.duration_s:g} s")

    def at(self, t_s: float) -> float:
        """The target load ``t_s`` seconds from the step's start."""
        if t_s >= self.duration_s:
            return self.end
        if t_s <= 0:
            return self.start
        x = t_s / self.duration_s
        if self.strategy == "linear":
            return self.start + (self.end - self.start) * x
        return float(self.start * (self.end / self.start) ** x)

    def when(self, value: float) -> float:
        """The first time (seconds from the step's start) the target reaches ``value`` (0 for a value at or
        below the start; the ramp's end for the end value)."""
        if value <= self.start:
            return 0.0
        if value >= self.end:
            return self.duration_s
        if self.strategy == "linear":
            return self.duration_s * (value - self.start) / (self.end - self.start)
        return self.duration_s * math.log(value / self.start) / math.log(self.end / self.start)

    def slot_opens(self, slots: int) -> list[float]:
        """When each of ``slots`` closed-loop slots opens, seconds from the step's start (slot k at `when`(k))."""
        return [self.when(float(k)) for k in range(1, slots + 1)]

    def expected(self, t_s: float) -> float:
        """Λ(t): the expected number of arrivals of a rate ramp in its first ``t_s`` seconds."""
        r, s, e = self.duration_s, self.start, self.end
        t = min(max(t_s, 0.0), r)
        if self.strategy == "linear":
            ramped = s * t + (e - s) * t * t / (2 * r)
        else:
            q = math.log(e / s)
            ramped = s * r / q * (math.exp(q * t / r) - 1)
        return ramped + e * max(t_s - r, 0.0)

    def due_at(self, arrivals: float) -> float:
        """Λ⁻¹: the time (seconds) at which a rate ramp expects ``arrivals`` arrivals."""
        r, s, e = self.duration_s, self.start, self.end
        at_end = self.expected(r)
        if arrivals <= 0:
            return 0.0
        if arrivals >= at_end:
            return r + (arrivals - at_end) / e
        if self.strategy == "linear":
            a = (e - s) / (2 * r)  # a t^2 + s t = arrivals
            return (-s + math.sqrt(s * s + 4 * a * arrivals)) / (2 * a)
        q = math.log(e / s)
        return r / q * math.log1p(arrivals * q / (s * r))

    def label(self) -> dict[str, Any]:
        """The ramp as a step's ``load`` entry writes it."""
        return {"strategy": self.strategy, "from": self.start, "to": self.end, "duration_s": self.duration_s}

    @classmethod
    def from_label(cls, data: Any) -> Ramp | None:
        """The ramp `label` wrote; None for anything else (a value that is not a number, one out of range)."""
        if not isinstance(data, dict) or data.get("strategy") not in ("linear", "exponential"):
            return None
        values = [v for v in (data.get(key) for key in ("from", "to", "duration_s"))
                  if isinstance(v, (int, float)) and not isinstance(v, bool)]
        if len(values) != 3:
            return None
        try:
            return cls(data["strategy"], float(values[0]), float(values[1]), float(values[2]))
        except (OverflowError, ValueError):
            return None
