"""Load profiles: what a step offers the server, and when each request is due.

- ``synchronous``: one request at a time.
- ``concurrency``: N requests in flight; a finished one is replaced at once
  (closed loop). A request is due when its slot frees.
- ``rate``: open loop; requests are due on a schedule computed before the step
  starts (``schedule_offsets``), whatever the server does.
- ``ramp`` (with ``concurrency`` or ``rate``): the load rises to the step's value over a set time, then holds
  (`tokometer.load.ramp`).
- ``trace``: open loop on a recorded schedule: ``offsets`` (ns from the step's start, from a trace file's
  timestamps, `tokometer.datasets.trace`).

With ``sessions`` (``bench --sessions``), the unit of load is a chat session rather than a request: the
concurrency is the number of live sessions and the rate the number of new sessions a second
(`tokometer.load.sessions`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from tokometer.load.ramp import Ramp

__all__ = ["Arrival", "LoadStep", "load_entry", "schedule_offsets"]

Arrival = Literal["poisson", "gamma", "constant"]


@dataclass(frozen=True, slots=True)
class LoadStep:
    """One step of a run: a concurrency level or a request rate."""

    mode: Literal["synchronous", "concurrency", "rate", "trace"]
    concurrency: int = 1
    rate: float | None = None
    arrival: Arrival = "poisson"
    burstiness: float = 1.0
    max_concurrency: int | None = None
    sessions: bool = False
    """Concurrency counts live sessions and rate new sessions a second (`tokometer.load.sessions`)."""
    offsets: tuple[int, ...] = ()
    """``trace``: each request's due time, ns from the step's start (already stretched by the time scale)."""
    trace: str = ""
    """``trace``: the trace's name, for labels."""
    ramp: Ramp | None = None
    """``concurrency`` or ``rate``: the load rises to the step's value (the ramp's end) over the ramp's time."""

    @property
    def open_loop(self) -> bool:
        """Requests are due on a schedule fixed before the step starts (a rate, or a trace)."""
        return self.mode in ("rate", "trace")

    @property
    def target(self) -> float | None:
        """The load the step holds once any ramp is over: its concurrency (1 when synchronous), its rate, or
        None for a trace."""
        if self.mode == "trace":
            return None
        if self.mode == "rate":
            return self.rate
        return float(self.concurrency if self.mode == "concurrency" else 1)

    def target_at(self, t_s: float) -> float | None:
        """The load the step aims at ``t_s`` seconds after its start: on its ramp, then `target`."""
        return self.ramp.at(t_s) if self.ramp is not None else self.target

    @property
    def trace_rate(self) -> float | None:
        """``trace``: the trace's mean request rate, (n - 1) / its span (None under two requests or no span)."""
        if len(self.offsets) < 2 or self.offsets[-1] <= self.offsets[0]:
            return None
        return (len(self.offsets) - 1) / ((self.offsets[-1] - self.offsets[0]) / 1e9)

    def label(self) -> dict[str, Any]:
        """The step's ``load`` entry in JSON results."""
        if self.mode == "trace":
            out: dict[str, Any] = {"rate": self.trace_rate, "arrival": "trace", "trace": self.trace,
                                   ("sessions" if self.sessions else "requests"): len(self.offsets)}
            if self.max_concurrency:
                out["max_concurrency"] = self.max_concurrency
            return out
        out = self._label()
        if self.ramp is not None:
            out["ramp"] = self.ramp.label()
        if self.sessions:
            return {**out, "sessions": True}
        return out

    def _label(self) -> dict[str, Any]:
        out: dict[str, Any]
        if self.mode == "rate":
            out = {"rate": self.rate, "arrival": self.arrival}
            if self.arrival == "gamma":
                out["burstiness"] = self.burstiness
            if self.max_concurrency:
                out["max_concurrency"] = self.max_concurrency
            return out
        out = {"concurrency": self.concurrency}
        if self.mode == "synchronous":
            out["synchronous"] = True
        return out

    def short(self) -> str:
        """A few characters for table columns: ``c=4``, ``10/s``, ``trace``."""
        if self.mode == "trace":
            return "agents" if self.sessions else "trace"
        ramped = "" if self.ramp is None else f"{self.ramp.start:g}↗"
        if self.mode == "rate":
            return f"{ramped}{self.rate:g}/s"
        if ramped:
            return f"c={ramped}{self.concurrency}"
        return "sync" if self.mode == "synchronous" else f"c={self.concurrency}"

    def describe(self) -> str:
        if self.mode == "trace":
            span = (self.offsets[-1] - self.offsets[0]) / 1e9 if self.offsets else 0.0
            if self.sessions:  # agent sessions (`tokometer.load.agentic`), each at its own start
                return f"agent sessions {self.trace} ({len(self.offsets)} sessions starting over {span:.1f} s)"
            return f"trace {self.trace} ({len(self.offsets)} requests over {span:.1f} s)"
        if self.sessions:
            if self.mode == "rate":
                return f"rate {self.rate:g} new sessions/s ({self.arrival})"
            return "one session at a time" if self.mode == "synchronous" else f"{self.concurrency} live sessions"
        ramp = "" if self.ramp is None else (f", ramped {self.ramp.strategy} from {self.ramp.start:g} over "
                                             f"{self.ramp.duration_s:g} s")
        if self.mode == "rate":
            return f"rate {self.rate:g}/s ({self.arrival}{ramp})"
        if ramp:
            return f"concurrency {self.concurrency} ({ramp[2:]})"
        if self.mode == "synchronous":
            return "synchronous"
        return f"concurrency {self.concurrency}"


def load_entry(step: LoadStep, trial: int | None = None) -> dict[str, Any]:
    """A step's ``load`` entry as saved and written: `LoadStep.label`, plus ``trial`` (1..N) for a step run
    as one of N trials (``bench --repeat N``)."""
    return {**step.label(), "trial": trial} if trial is not None else step.label()


def schedule_offsets(n: int, rate: float, arrival: Arrival, burstiness: float = 1.0, seed: int = 0) -> list[int]:
    """Due times (ns from the step's start) of ``n`` requests at ``rate`` per second.

    Gaps are exponential (``poisson``), gamma with shape ``burstiness``
    (``gamma``: < 1 burstier than Poisson, > 1 smoother) or equal
    (``constant``). The gaps are then scaled together so the ``n - 1`` gaps span
    exactly ``(n - 1) / rate`` seconds: the step offers the rate asked for, not
    a random draw near it, and the gaps keep the shape of their distribution.
    The first request is due at 0.
    """
    if n <= 0:
        return []
    if rate <= 0:
        raise ValueError("rate must be positive")
    gaps_n = n - 1
    if gaps_n == 0:
        return [0]
    import numpy as np  # here, not above: the spec imports this module, and so `bench --help`

    rng = np.random.default_rng(seed)
    if arrival == "constant":
        gaps = np.full(gaps_n, 1.0)
    elif arrival == "poisson":
        gaps = rng.exponential(1.0, gaps_n)
    elif arrival == "gamma":
        if burstiness <= 0:
            raise ValueError("burstiness must be positive")
        gaps = rng.gamma(burstiness, 1.0 / burstiness, gaps_n)
    else:
        raise ValueError(f"unknown arrival process {arrival!r}")
    gaps *= (gaps_n / rate) / gaps.sum()
    offsets = np.concatenate(([0.0], np.cumsum(gaps))) * 1e9
    return [int(x) for x in offsets]
