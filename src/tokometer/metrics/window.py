"""A step over part of its time: per time slice (``bench --time-slice``) and over its steady state.

A step's whole numbers include its warm-up (the first wave of requests, a ramp) and its drain (the last
requests finishing with nothing new sent). This module summarises a step over windows of its time, from its
records (docs/reference/metrics.md, "Time slices and steady state"):

- Times are seconds from the step's start: the earliest due time (or send, where none) of its requests,
  warm-up requests included.
- The *load* in a window counts every request of the step, warm-up included (they loaded the server):
  ``achieved_concurrency`` is the time-weighted mean number in flight (``sum over requests of the time each
  was in flight within the window / the window's length``), ``send_rate_rps`` the sends in the window over
  its length, ``target`` the mean of the load the profile aimed at (a ramp's value, then the step's).
- The *metrics* count measured requests only (not warm-up). A request belongs to the window it was **sent**
  in (as AIPerf's time slices place a request by its start), so every measured request is in exactly one
  slice and the slices' ``requests`` add up to the step's. Latency distributions are those of
  `tokometer.metrics.summarize` over the window's requests. ``output_throughput_tok_s`` counts the output
  tokens that **arrived** in the window (each content event's tokens by its arrival stamp, scaled to the
  request's output-token count) over the window's length; ``request_throughput_rps`` the measured requests
  that completed in the window; ``goodput_rps`` the window's requests that met every SLO over its length;
  ``overload`` the tests of `tokometer.metrics.overload` over the window's requests (None under 8 completed).

Steady state, `steady_state`: the window where the load was at its target, within ``tolerance``:

- closed loop (concurrency): the target is the step's concurrency ``N``. The window opens at the first
  moment, at or after any ramp's end, that the number in flight reaches ``(1 - tolerance) N``, and closes at
  the last moment it falls below that (the drain starts).
- open loop (rate): the load is the arrival rate, but the server fills up after the first send: the window
  opens at the first moment, at or after any ramp's end, that the number in flight reaches ``(1 -
  tolerance)`` times its time-weighted mean from the ramp's end to the last send, and closes at the last send.

Its requests are those sent after the window opened and finished by the time it closed: the first wave,
whose sends brought the load up to its target, is left out, and so are the requests that ran into the drain.
``at_target`` says whether the load held over the window: achieved concurrency (closed loop) or send rate
(open loop) within ``tolerance`` of the target.

`step_windows` decides, from a step's load (`StepLoad`: a `tokometer.load.profiles.LoadStep`), which of the two
a step has: a steady state for a load with one target (not a trace, not sessions), slices with ``slice_s``. Both
``bench`` and a step summarised again from the store (`tokometer.store.orphans`) call it; ``compare --window
steady`` takes a step's steady-state requests from `steady_requests`, the same selection.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from tokometer.metrics.registry import window_rows
from tokometer.metrics.summary import SLO, summarize
from tokometer.records import RequestRecord
from tokometer.util.limits import MAX_SLICE_S, MIN_SLICE_S

__all__ = ["MAX_SLICES", "StepLoad", "origin_ns", "slice_ns", "steady_requests", "steady_state", "step_windows",
           "time_slices", "window_summary"]

MAX_SLICES = 1000
"""A step cut into more slices than this gets wider slices (the step's span / this), and says so."""

Target = Callable[[float], float | None]
"""The load the profile aims at, ``t`` seconds from the step's start (None: no target, as for a trace)."""

_TARGET_SAMPLES = 64


def origin_ns(records: Sequence[RequestRecord]) -> int:
    """The step's start on the records' clock: the earliest due time (or send) of any of its requests."""
    return min((min(r.due_ns or r.sent_ns, r.sent_ns) for r in records if r.sent_ns), default=0)


class _Load:
    """The step's requests as arrays of sends and ends (ns from its start), for the load in any window."""

    def __init__(self, records: Sequence[RequestRecord], t0: int) -> None:
        sent = [r for r in records if r.sent_ns]
        self.sent = np.array([r.sent_ns - t0 for r in sent], dtype=np.int64)
        self.end = np.array([max(r.end_ns, r.sent_ns) - t0 for r in sent], dtype=np.int64)

    def concurrency(self, a: int, b: int) -> float:
        """Time-weighted mean in flight over [a, b)."""
        if b <= a or not self.sent.size:
            return 0.0
        overlap = np.clip(np.minimum(self.end, b) - np.maximum(self.sent, a), 0, None)
        return float(overlap.sum()) / (b - a)

    def sends(self, a: int, b: int) -> int:
        return int(np.count_nonzero((self.sent >= a) & (self.sent < b)))

    def steps(self) -> list[tuple[int, int]]:
        """(time, number in flight just after it) at every send and end, ends first at equal times."""
        events = sorted([(int(t), -1) for t in self.end] + [(int(t), 1) for t in self.sent])
        out, n = [], 0
        for t, delta in events:
            n += delta
            out.append((t, n))
        return out


def _target_mean(target: Target, a_s: float, b_s: float) -> float | None:
    values = [target(a_s + (k + 0.5) * (b_s - a_s) / _TARGET_SAMPLES) for k in range(_TARGET_SAMPLES)]
    if any(v is None for v in values):
        return None
    return round(sum(v for v in values if v is not None) / len(values), 6)


def _arrived_tokens(r: RequestRecord, a: int, b: int) -> float:
    """Output tokens of ``r`` that arrived in [a, b) on the records' clock (events scaled to its count)."""
    if not r.ok or not r.output_tokens or not r.event_ns:
        return 0.0
    streamed = sum(r.event_tokens)
    if streamed <= 0:
        return 0.0
    inside = sum(k for t, k in zip(r.event_ns, r.event_tokens, strict=False) if a <= t < b)
    return inside * r.output_tokens / streamed


def window_summary(records: Sequence[RequestRecord], chosen: Sequence[RequestRecord], load: _Load, t0: int,
                   a: int, b: int, target: Target, slo: SLO | None) -> dict[str, Any]:
    """One window [a, b) (ns from the step's start ``t0``) of a step: its load from all ``records``, its metrics
    from the measured requests ``chosen`` for it."""
    measured = [r for r in records if not r.warmup and r.sent_ns]
    tokens = sum(_arrived_tokens(r, t0 + a, t0 + b) for r in measured)
    completed = sum(1 for r in measured if r.ok and t0 + a <= r.end_ns < t0 + b)
    return _summary(chosen, load, a, b, target, slo, tokens, completed)


def _summary(chosen: Sequence[RequestRecord], load: _Load, a: int, b: int, target: Target, slo: SLO | None,
             tokens: float, completed: int) -> dict[str, Any]:
    """`window_summary` given the output tokens that arrived in the window and the requests completed in it."""
    length_s = (b - a) / 1e9
    summary = summarize(chosen, slo)
    return {
        "start_s": round(a / 1e9, 6), "end_s": round(b / 1e9, 6),
        "requests": len(chosen), "completed": summary.requests_completed, "failed": summary.requests_failed,
        "target": _target_mean(target, a / 1e9, b / 1e9),
        "achieved_concurrency": round(load.concurrency(a, b), 6),
        "send_rate_rps": round(load.sends(a, b) / length_s, 6) if length_s > 0 else None,
        "request_throughput_rps": round(completed / length_s, 6) if length_s > 0 else None,
        "output_throughput_tok_s": round(tokens / length_s, 6) if length_s > 0 else None,
        **{row.name: summary.distributions[row.attribute or row.name].to_json() for row in window_rows()},
        "goodput_rps": (round(sum(1 for r in chosen if r.ok and slo.met(r)) / length_s, 6)
                        if slo is not None and not slo.empty and length_s > 0 else None),
        "overload": summary.overload.to_json() if summary.overload is not None else None,
    }


def slice_ns(slice_s: float) -> int:
    """A slice width in ns, held within [`tokometer.util.limits.MIN_SLICE_S`, `MAX_SLICE_S`] (``bench`` validates
    ``--time-slice`` against them; a width read back from a store is held to them here)."""
    if not math.isfinite(slice_s):
        return int(MAX_SLICE_S * 1e9)
    return int(min(max(slice_s, MIN_SLICE_S), MAX_SLICE_S) * 1e9)


def _arrived_by_slice(measured: Sequence[RequestRecord], t0: int, width: int, count: int) -> list[float]:
    """`_arrived_tokens` of every request in each of ``count`` slices of ``width`` ns from ``t0``, summed over
    the requests in their order: each request's events are put into slices once (not once per slice), and
    each slice's share of a request is summed over the same events in the same order, so the sums are those
    of `_arrived_tokens` to the last bit."""
    parts: list[list[float]] = [[] for _ in range(count)]
    for r in measured:
        if not r.ok or not r.output_tokens or not r.event_ns:
            continue
        streamed = sum(r.event_tokens)
        if streamed <= 0:
            continue
        n = min(len(r.event_ns), len(r.event_tokens))
        tokens = r.event_tokens[:n]
        try:
            keys = (np.asarray(r.event_ns[:n], dtype=np.int64) - t0) // width
        except OverflowError:  # a stamp beyond 64 bits (a store edited by hand): outside every slice
            keys = np.array([min(max((t - t0) // width, -1), count) for t in r.event_ns[:n]], dtype=np.int64)
        if n > 1 and bool((keys[1:] < keys[:-1]).any()):  # stamps out of order: each slice's events, in order
            order = np.argsort(keys, kind="stable")
            keys, tokens = keys[order], [tokens[i] for i in order.tolist()]
        cuts = (np.flatnonzero(keys[1:] != keys[:-1]) + 1).tolist()
        for lo, hi in zip([0, *cuts], [*cuts, n], strict=True):
            k = int(keys[lo])
            if 0 <= k < count:
                parts[k].append(sum(tokens[lo:hi]) * r.output_tokens / streamed)
    return [sum(p) for p in parts]


def time_slices(records: Sequence[RequestRecord], slice_s: float, target: Target,
                slo: SLO | None = None) -> dict[str, Any]:
    """The step cut into slices of ``slice_s`` seconds from its start until its last end, each summarised by
    `window_summary`, its requests those sent in it: ``{"slice_s", "requests_by": "sent", "slices": [...]}``.

    Each request is put into its slices once (its send, its end, its events), not looked at again per slice."""
    t0 = origin_ns(records)
    load = _Load(records, t0)
    span = int(load.end.max()) if load.end.size else 0
    width = slice_ns(slice_s)
    note = None
    if span // width + 1 > MAX_SLICES:
        width = span // MAX_SLICES + 1
        note = f"{slice_s:g} s would cut this step into more than {MAX_SLICES} slices: slices of {width / 1e9:g} s"
    count = span // width + 1 if load.sent.size else 0  # the last end falls inside the last slice
    measured = [r for r in records if not r.warmup and r.sent_ns]
    chosen: list[list[RequestRecord]] = [[] for _ in range(count)]
    completed = [0] * count
    for r in measured:
        if 0 <= (k := (r.sent_ns - t0) // width) < count:
            chosen[k].append(r)
        if r.ok and 0 <= (k := (r.end_ns - t0) // width) < count:
            completed[k] += 1
    tokens = _arrived_by_slice(measured, t0, width, count)
    slices = [{"index": k, **_summary(chosen[k], load, k * width, (k + 1) * width, target, slo, tokens[k],
                                      completed[k])} for k in range(count)]
    return {"slice_s": width / 1e9, "requests_by": "sent", "note": note, "slices": slices}


@dataclass(frozen=True)
class _Window:
    """Where a step's steady state opened and closed (ns from its start ``t0``) and the requests in it."""

    t0: int
    load: _Load
    threshold: float
    opened: int
    closed: int
    chosen: list[RequestRecord]


def _steady_window(records: Sequence[RequestRecord], level: float, ramp_s: float, closed_loop: bool,
                   tolerance: float) -> _Window | tuple[str, float | None]:
    """The steady-state window (see the module docstring), or why there is none (and the threshold, if any)."""
    t0 = origin_ns(records)
    load = _Load(records, t0)
    if not load.sent.size:
        return "no request was sent", None
    ramp_end = int(ramp_s * 1e9)
    steps = load.steps()
    last_send = int(load.sent.max())
    held = level if closed_loop else load.concurrency(ramp_end, last_send)  # open loop: the level the queue held
    threshold = (1 - tolerance) * held
    opened = _first_reaching(steps, ramp_end, threshold)
    if opened is None:
        return (f"the number in flight never reached {threshold:.2f} after the step's start"
                + (" and its ramp" if ramp_end else "")), None
    closed = max((t for (t, n), (_, before) in zip(steps[1:], steps, strict=False) if before >= threshold > n),
                 default=int(load.end.max())) if closed_loop else last_send
    chosen = [r for r in records if not r.warmup and r.sent_ns and r.sent_ns - t0 > opened
              and r.end_ns - t0 <= closed]
    if closed <= opened or not chosen:
        return "no request was sent after the load reached its target and finished before the drain", threshold
    return _Window(t0, load, threshold, opened, closed, chosen)


def steady_state(records: Sequence[RequestRecord], target: Target, level: float, ramp_s: float, closed_loop: bool,
                 tolerance: float, slo: SLO | None = None) -> dict[str, Any]:
    """The step over its steady state (see the module docstring): ``found``, how it was found, the window and
    `window_summary` over it; or ``found: false`` and the ``reason``."""
    basis = "concurrency" if closed_loop else "arrival rate"
    head: dict[str, Any] = {"basis": basis, "tolerance": tolerance, "target": level}
    found = _steady_window(records, level, ramp_s, closed_loop, tolerance)
    if not isinstance(found, _Window):
        reason, threshold = found
        return {**head, "found": False, **({"threshold": round(threshold, 6)} if threshold is not None else {}),
                "reason": reason}
    w = found
    window = window_summary(records, w.chosen, w.load, w.t0, w.opened, w.closed, target, slo)
    achieved = window["achieved_concurrency"] if closed_loop else window["send_rate_rps"]
    at_target = achieved is not None and abs(achieved - level) <= tolerance * level
    return {**head, "found": True, "threshold": round(w.threshold, 6), "at_target": at_target, **window}


class _Ramp(Protocol):
    @property
    def duration_s(self) -> float: ...


class StepLoad(Protocol):
    """What `step_windows` reads of a step's load (`tokometer.load.profiles.LoadStep` has it)."""

    @property
    def target(self) -> float | None: ...
    @property
    def sessions(self) -> bool: ...
    @property
    def open_loop(self) -> bool: ...
    @property
    def ramp(self) -> _Ramp | None: ...
    def target_at(self, t_s: float) -> float | None: ...


def _has_steady_state(load: StepLoad) -> float | None:
    """The level a step's steady state is held against: its target; None for a trace or sessions."""
    return None if load.sessions else load.target


def step_windows(records: Sequence[RequestRecord], load: StepLoad, tolerance: float, slice_s: float | None,
                 slo: SLO | None = None) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """A step's ``steady_state`` (None for a load without one target: a trace, sessions) and ``time_slices``
    (None without ``slice_s``), as `StepSummary` holds them."""
    level = _has_steady_state(load)
    steady = (steady_state(records, load.target_at, level, load.ramp.duration_s if load.ramp else 0.0,
                           not load.open_loop, tolerance, slo) if level is not None else None)
    slices = time_slices(records, slice_s, load.target_at, slo) if slice_s is not None else None
    return steady, slices


def steady_requests(records: Sequence[RequestRecord], load: StepLoad,
                    tolerance: float) -> list[RequestRecord] | str:
    """The measured requests of a step's steady state, chosen as `steady_state` chose them; else why none."""
    level = _has_steady_state(load)
    if level is None:
        return "a trace or sessions step has no single target"
    found = _steady_window(records, level, load.ramp.duration_s if load.ramp else 0.0, not load.open_loop,
                           tolerance)
    return found.chosen if isinstance(found, _Window) else found[0]


def _first_reaching(steps: Sequence[tuple[int, int]], after: int, threshold: float) -> int | None:
    """The first moment at or after ``after`` at which the number in flight is at least ``threshold``."""
    state, i = 0, 0
    while i < len(steps) and steps[i][0] <= after:
        state, i = steps[i][1], i + 1
    if state >= threshold:
        return after
    return next((t for t, n in steps[i:] if n >= threshold), None)
