"""The load generator watching itself: is the client what is being measured?

`LoopMonitor` samples how long a ready callback waits for the event loop (the
delay every arriving byte also sees before it is stamped) and the process's CPU
time. `ClientHealth.verdict` turns that, with the client lag of the step, into
words when the client could not keep up.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import psutil

__all__ = ["ClientHealth", "LoopMonitor", "lag_limit_ms"]

_LOOP_LAG_LIMIT_MS = 1.0
_CPU_LIMIT = 0.9
_CLIENT_LAG_LIMIT_MS = 1.0
_HOST_BUSY_LIMIT = 0.95


def _busy_fraction(before: Any, after: Any) -> float | None:
    total = sum(after) - sum(before)
    idle = (after.idle + getattr(after, "iowait", 0.0)) - (before.idle + getattr(before, "iowait", 0.0))
    return None if total <= 0 else max(0.0, min(1.0, 1.0 - idle / total))


def lag_limit_ms(open_loop: bool, e2e_p50_ms: float | None) -> float:
    """How late a send may be before the verdict cares: 1 ms on an open-loop schedule;
    in a closed loop, 1% of a typical request's duration if that is more."""
    if open_loop or e2e_p50_ms is None:
        return _CLIENT_LAG_LIMIT_MS
    return max(_CLIENT_LAG_LIMIT_MS, 0.01 * e2e_p50_ms)


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

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def judge(self, lag_limit_ms: float = _CLIENT_LAG_LIMIT_MS) -> ClientHealth:
        """Set ``saturated`` and say in words what went wrong, if anything.

        ``lag_limit_ms``: how late a send may be before it matters (1 ms for an
        open-loop rate; more for closed-loop steps whose requests take seconds).
        """
        problems = []
        if self.loop_lag_p99_ms > _LOOP_LAG_LIMIT_MS:
            problems.append(f"its event loop was busy (lag p99 {self.loop_lag_p99_ms:.2f} ms): arrival stamps "
                            "may be late by about that much")
        if self.cpu_fraction > _CPU_LIMIT * self.workers:
            problems.append(f"it used {100 * self.cpu_fraction:.0f}% of {self.workers} core(s): throughput may "
                            "be the client's limit, not the server's")
        if self.client_lag_p99_ms is not None and self.client_lag_p99_ms > lag_limit_ms:
            problems.append(f"it sent requests late (client lag p99 {self.client_lag_p99_ms:.2f} ms, connection "
                            "setup not counted): the server was offered less load than asked")
        if problems:
            self.saturated = True
            self.verdict = ("the client could not keep up: " + "; ".join(problems)
                            + ". Use fewer streams, more --workers, or a machine where the client has its own cores")
        if self.host_cpu_busy is not None and self.host_cpu_busy > _HOST_BUSY_LIMIT:
            self.note = (f"the host's CPUs were {100 * self.host_cpu_busy:.0f}% busy during the step: the client "
                         "competed for CPU (with a server on the same machine?), so latencies may include "
                         "scheduling delays")
        return self


class LoopMonitor:
    """Samples event-loop scheduling delay every ``interval`` seconds while running."""

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
        while True:
            await asyncio.sleep(self.interval)
            t0 = time.perf_counter_ns()
            await asyncio.sleep(0)
            self.samples.append(time.perf_counter_ns() - t0)

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

    def health(self, client_lag_p99_ms: float | None, workers: int = 1,
               lag_limit_ms: float = _CLIENT_LAG_LIMIT_MS) -> ClientHealth:
        lag = np.asarray(self.samples, dtype=np.float64) / 1e6
        return ClientHealth(
            loop_lag_p99_ms=float(np.percentile(lag, 99)) if lag.size else 0.0,
            loop_lag_max_ms=float(lag.max()) if lag.size else 0.0,
            cpu_fraction=self.cpu_s / self.wall_s if self.wall_s > 0 else 0.0,
            client_lag_p99_ms=client_lag_p99_ms,
            workers=workers,
            host_cpu_busy=self.host_busy,
        ).judge(lag_limit_ms)
