"""The load generator watching itself: is the client what is being measured?

`LoopMonitor` samples how long a ready callback waits for the event loop (the
delay every arriving byte also sees before it is stamped) and the process's CPU
time. `ClientHealth.judge` weighs that, with how late the client sent its
requests, against the step's own yardsticks (`StepTiming`: the schedule's mean
gap, a typical request's duration, the step's length, its TTFT) and says in
words when the client could not keep up. The rule is stated on `ClientHealth.judge`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import psutil

from tokometer.load.profiles import LoadStep
from tokometer.metrics import request as m
from tokometer.metrics.distribution import Distribution
from tokometer.records import RequestRecord

__all__ = ["ClientHealth", "LoopMonitor", "StepTiming", "client_lag_p99_ms"]

_CPU_LIMIT = 0.9
_LAG_FLOOR_MS = 1.0
"""Lateness below this is timer resolution, never a verdict."""
_GAP_SHARE = 0.25
"""Open loop: client lag p99 allowed, as a share of the mean scheduled gap."""
_CYCLE_SHARE = 0.05
"""Closed loop: client lag p99 allowed, as a share of a typical request (E2E p50)."""
_SHORTFALL_LIMIT = 0.05
"""Open loop: share of the asked rate the client may fail to offer."""
_TTFT_SHARE = 0.10
"""Event-loop lag p99 allowed, as a share of TTFT p50."""
_HOST_BUSY_LIMIT = 0.95
_SLOW_CONNECT_MS = 100.0
"""Connection set-up p99 above this (and above the client-lag allowance) gets a note: the server's side."""
_MS = 1e-6


def _busy_fraction(before: Any, after: Any) -> float | None:
    total = sum(after) - sum(before)
    idle = (after.idle + getattr(after, "iowait", 0.0)) - (before.idle + getattr(before, "iowait", 0.0))
    return None if total <= 0 else max(0.0, min(1.0, 1.0 - idle / total))


def client_lag_p99_ms(records: Sequence[RequestRecord]) -> float | None:
    """p99 of client lag minus connection set-up over the measured requests, in ms."""
    return Distribution.of(
        [v for v in (m.client_delay_ns(r) for r in records if not r.warmup) if v is not None], _MS).p99


@dataclass(frozen=True, slots=True)
class StepTiming:
    """A step's own yardsticks, against which the client's lateness is judged.

    All over the measured requests (warm-up left out). ``scheduled_span_ms`` and
    ``sent_span_ms`` (open loop only): first to last due time, and first to last
    send, of the requests that were sent.
    """

    open_loop: bool = False
    capped: bool = False
    """An open-loop step with ``--max-concurrency``: sends may wait for a free slot by design."""
    scheduled_span_ms: float | None = None
    sent_span_ms: float | None = None
    sends: int = 0
    e2e_p50_ms: float | None = None
    ttft_p50_ms: float | None = None
    connect_p99_ms: float | None = None
    """p99 of the time new connections took to open: the server's side (its accept queue), never the client's."""

    @classmethod
    def of(cls, step: LoadStep, records: Sequence[RequestRecord]) -> StepTiming:
        measured = [r for r in records if not r.warmup]
        sent = [r for r in measured if r.sent_ns]
        open_loop = step.open_loop
        spans: tuple[float | None, float | None] = (None, None)
        if open_loop and len(sent) > 1:
            # when the client began each send: connection set-up (a server slow to accept) is not its lateness
            began = [r.sent_ns - r.connect_ns for r in sent]
            spans = ((max(r.due_ns for r in sent) - min(r.due_ns for r in sent)) * _MS,
                     (max(began) - min(began)) * _MS)
        return cls(
            open_loop=open_loop,
            capped=open_loop and bool(step.max_concurrency),
            scheduled_span_ms=spans[0],
            sent_span_ms=spans[1],
            sends=len(sent),
            e2e_p50_ms=Distribution.of([v for v in map(m.e2e_ns, measured) if v is not None], _MS).p50,
            ttft_p50_ms=Distribution.of([v for v in map(m.ttft_ns, measured) if v is not None], _MS).p50,
            connect_p99_ms=Distribution.of([v for v in map(m.connect_ns, measured) if v is not None], _MS).p99,
        )

    @property
    def mean_gap_ms(self) -> float | None:
        """Open loop: the mean scheduled gap between two sends."""
        if self.scheduled_span_ms is None or self.sends < 2:
            return None
        return self.scheduled_span_ms / (self.sends - 1)

    @property
    def shortfall(self) -> float | None:
        """Open loop: the share of the scheduled rate not offered, 1 - scheduled span / sent span (≥ 0)."""
        if not self.scheduled_span_ms or not self.sent_span_ms:
            return None
        return max(0.0, 1.0 - self.scheduled_span_ms / self.sent_span_ms)

    def client_lag_limit_ms(self) -> float:
        """The client lag p99 allowed: 1 ms, or more when the step's own yardstick is long."""
        yardstick, share = (self.mean_gap_ms, _GAP_SHARE) if self.open_loop else (self.e2e_p50_ms, _CYCLE_SHARE)
        return max(_LAG_FLOOR_MS, share * yardstick) if yardstick else _LAG_FLOOR_MS

    def loop_lag_limit_ms(self) -> float:
        """The event-loop lag p99 allowed: 1 ms, or a tenth of TTFT p50 if that is more."""
        return max(_LAG_FLOOR_MS, _TTFT_SHARE * self.ttft_p50_ms) if self.ttft_p50_ms else _LAG_FLOOR_MS

    def client_lag_allowance(self) -> str:
        """Words for the client-lag allowance, for the verdict."""
        limit = f"{self.client_lag_limit_ms():.2f} ms = max({_LAG_FLOOR_MS:g} ms, "
        if self.open_loop and self.mean_gap_ms is not None:
            return limit + f"{_GAP_SHARE:.0%} of the {self.mean_gap_ms:.1f} ms mean gap between scheduled sends)"
        if not self.open_loop and self.e2e_p50_ms is not None:
            return limit + f"{_CYCLE_SHARE:.0%} of the {self.e2e_p50_ms:.1f} ms a request took, E2E p50)"
        return f"{_LAG_FLOOR_MS:g} ms"


@dataclass(slots=True)
class ClientHealth:
    """How the client fared during a step."""

    loop_lag_p99_ms: float
    loop_lag_max_ms: float
    cpu_fraction: float
    """Process CPU time / wall time (1.0 = one core busy all the time)."""
    client_lag_p99_ms: float | None
    """p99 of client lag minus connection setup: how late the client itself was."""
    workers: int = 1
    host_cpu_busy: float | None = None
    """Fraction of all the host's CPU time that was busy during the step (any process)."""
    saturated: bool = False
    verdict: str = "client kept up"
    note: str = ""
    problems: list[str] = field(default_factory=list)
    """Which rules found the client saturated: ``cpu``, ``loop_lag``, ``behind_schedule``, ``late_sends``."""
    client_lag_limit_ms: float = _LAG_FLOOR_MS
    loop_lag_limit_ms: float = _LAG_FLOOR_MS
    send_shortfall: float | None = None
    """Open loop: the share of the scheduled send rate the client did not offer."""
    actors: list[dict[str, Any]] | None = None
    """``bench --ray``: per Ray actor, where it ran and how its clock was put on the driver's
    (`tokometer.load.cluster.actor_entry`); None for a run on this host."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def judge(self, timing: StepTiming | None = None) -> ClientHealth:
        """Set ``saturated``, ``problems``, ``verdict`` and ``note`` by this rule.

        The client could not keep up (``saturated``) when any of these holds:

        - ``cpu``: its processes used more than 90% of their cores: throughput
          may be the client's limit.
        - ``loop_lag``: its event loop's lag p99 exceeded max(1 ms, 10% of the
          step's TTFT p50): stamps of arriving bytes, TTFT above all, may be
          late by a tenth of what is measured.
        - ``behind_schedule`` (open loop): the measured requests went out over a
          span more than 5% longer than their schedule's, so the server was
          offered less than 95% of the asked rate.
        - ``late_sends``: client lag p99 (connection set-up not counted)
          exceeded max(1 ms, a quarter of the mean scheduled gap) in an open
          loop, where later sends reshape the arrivals; or max(1 ms, 5% of
          E2E p50) in a closed loop, where a slot idles that long between
          requests and the server sees less concurrency than asked.

        Lateness that is small against the step's gaps, requests and length is
        scheduling noise and does not count. With ``--max-concurrency`` on a
        rate, sends wait for a free slot by design: ``behind_schedule`` and
        ``late_sends`` then become a note, not a verdict. A host whose CPUs
        were more than 95% busy gets a note as well. Connection set-up is the
        server's side (its accept queue) and counts in no rule: client lag and
        the send span are measured from when the client began each send, and a
        slow set-up (p99 over 100 ms) is a note that says whose it is.
        """
        t = timing or StepTiming()
        self.client_lag_limit_ms, self.loop_lag_limit_ms = t.client_lag_limit_ms(), t.loop_lag_limit_ms()
        self.send_shortfall = t.shortfall
        found = self._findings(t)
        notes = []
        if t.capped:
            held = [found.pop(k) for k in ("behind_schedule", "late_sends") if k in found]
            if held:
                notes.append("--max-concurrency held sends back (" + "; ".join(held) + ")")
        if t.connect_p99_ms is not None and t.connect_p99_ms > max(_SLOW_CONNECT_MS, self.client_lag_limit_ms):
            notes.append(f"opening connections took up to {t.connect_p99_ms:.0f} ms (p99): the server was slow to "
                         "accept them (a full accept queue retries a SYN after 1 s); that is the server's side, "
                         "not the client's, and it is not counted as client lag")
        if self.host_cpu_busy is not None and self.host_cpu_busy > _HOST_BUSY_LIMIT:
            notes.append(f"the host's CPUs were {100 * self.host_cpu_busy:.0f}% busy during the step: the client "
                         "competed for CPU (with a server on the same machine?), so latencies may include "
                         "scheduling delays")
        self.problems = list(found)
        self.saturated = bool(found)
        self.verdict = ("the client could not keep up: " + "; ".join(found.values())
                        + ". Use fewer streams, more --workers, or a machine where the client has its own cores"
                        if found else "client kept up")
        self.note = "; ".join(notes)
        return self

    def _findings(self, t: StepTiming) -> dict[str, str]:
        """Each rule of `judge` that holds, in words."""
        found: dict[str, str] = {}
        if self.cpu_fraction > _CPU_LIMIT * self.workers:
            found["cpu"] = (f"it used {100 * self.cpu_fraction:.0f}% of {self.workers} core(s): throughput may "
                            "be the client's limit, not the server's")
        if self.loop_lag_p99_ms > self.loop_lag_limit_ms:
            found["loop_lag"] = (f"its event loop was busy (lag p99 {self.loop_lag_p99_ms:.2f} ms; allowed: "
                                 f"{self.loop_lag_limit_ms:.2f} ms = max({_LAG_FLOOR_MS:g} ms, {_TTFT_SHARE:.0%} "
                                 "of TTFT p50)): arrival stamps may be late by about that much")
        if self.send_shortfall is not None and self.send_shortfall > _SHORTFALL_LIMIT:
            found["behind_schedule"] = (f"it fell behind the schedule: the server was offered "
                                        f"{1 - self.send_shortfall:.0%} of the asked rate "
                                        f"(allowed: {1 - _SHORTFALL_LIMIT:.0%} or more)")
        if self.client_lag_p99_ms is not None and self.client_lag_p99_ms > self.client_lag_limit_ms:
            found["late_sends"] = (f"it sent requests late (client lag p99 {self.client_lag_p99_ms:.2f} ms, "
                                   f"connection setup not counted; allowed: {t.client_lag_allowance()}): "
                                   + ("arrivals strayed from the schedule" if t.open_loop
                                      else "the server was offered less concurrency than asked"))
        return found

    @classmethod
    def merged(cls, healths: Sequence[ClientHealth], records: Sequence[RequestRecord], step: LoadStep,
               workers: int) -> ClientHealth:
        """One step run by ``workers`` processes: their healths combined, judged on all their records."""
        return cls(
            loop_lag_p99_ms=max((h.loop_lag_p99_ms for h in healths), default=0.0),
            loop_lag_max_ms=max((h.loop_lag_max_ms for h in healths), default=0.0),
            cpu_fraction=sum(h.cpu_fraction for h in healths),
            client_lag_p99_ms=client_lag_p99_ms(records),
            workers=workers,
            host_cpu_busy=max((h.host_cpu_busy or 0.0 for h in healths), default=None),
        ).judge(StepTiming.of(step, records))


_MAX_FILLED = 200_000
"""The most samples one stall may add (a 1,000 s stall at 5 ms)."""


class LoopMonitor:
    """Samples event-loop scheduling delay every ``interval`` seconds while running.

    A sample is how long one more turn of the loop took (what a ready callback, and a byte that has
    arrived, waits). A timer that fired more than ``interval`` late is a stall of the whole loop (a
    long parse, a blocking call): the sample is then that lateness, and it counts for the time it
    lasted: the samples the monitor would have taken during it are filled in, each as late as it
    would have been (``lag - interval``, ``lag - 2 interval``, ...: the correction HdrHistogram makes
    for an expected interval), so a stall of a tenth of the step moves the p99 as it moved the arrival
    stamps of every stream. Timer lateness under ``interval`` is the OS's scheduling noise, not a stall.
    """

    def __init__(self, interval: float = 0.005) -> None:
        self.interval = interval
        self.samples: list[int] = []
        self._task: asyncio.Task[None] | None = None
        self._wall0 = 0
        self._cpu0 = 0.0
        self.wall_s = 0.0
        self.cpu_s = 0.0
        self._host0: Any = None
        self.host_busy: float | None = None

    async def _run(self) -> None:
        interval_ns = int(self.interval * 1e9)
        while True:
            due = time.perf_counter_ns() + interval_ns
            await asyncio.sleep(self.interval)
            t0 = time.perf_counter_ns()
            await asyncio.sleep(0)
            now = time.perf_counter_ns()
            late = now - due
            if late <= interval_ns:
                self.samples.append(now - t0)
                continue
            self.samples.append(late)  # a stall; and the samples it kept from being taken, each as late as it was
            self.samples.extend(range(late - interval_ns, 0, -interval_ns)[:_MAX_FILLED])

    def start(self) -> None:
        self._wall0 = time.perf_counter_ns()
        self._cpu0 = time.process_time()
        self._host0 = psutil.cpu_times()
        self._task = asyncio.get_running_loop().create_task(self._run())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
        self.wall_s = (time.perf_counter_ns() - self._wall0) / 1e9
        self.cpu_s = time.process_time() - self._cpu0
        self.host_busy = _busy_fraction(self._host0, psutil.cpu_times())

    def health(self, step: LoadStep, records: Sequence[RequestRecord], workers: int = 1) -> ClientHealth:
        """The client's health over a finished step, judged against the step's ``records``."""
        lag = np.asarray(self.samples, dtype=np.float64) / 1e6
        return ClientHealth(
            loop_lag_p99_ms=float(np.percentile(lag, 99)) if lag.size else 0.0,
            loop_lag_max_ms=float(lag.max()) if lag.size else 0.0,
            cpu_fraction=self.cpu_s / self.wall_s if self.wall_s > 0 else 0.0,
            client_lag_p99_ms=client_lag_p99_ms(records),
            workers=workers,
            host_cpu_busy=self.host_busy,
        ).judge(StepTiming.of(step, records))
