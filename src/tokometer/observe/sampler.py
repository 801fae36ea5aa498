"""Sampling a server's ``/metrics`` and its GPUs through a run, on a thread of its own.

The benchmark's event loop stamps every byte the server sends; nothing of the sampling runs on it.
A daemon thread reads the sources every ``interval_s`` (default 1 s): the server's Prometheus
exposition (`fetch_text`: urllib, which honours the same ``HTTP(S)_PROXY``/``NO_PROXY`` as the
client, with the run's TLS settings, a deadline for the whole answer and a size limit:
`tokometer.util.blockinghttp`) and the GPUs (NVML, or a DCGM exporter's ``/metrics``). Each
reading is kept with its `perf_counter_ns` stamp, the clock the client stamps requests with, so
that a step's window ``[first sent, last ended]`` selects the readings taken during it. Each server
reading keeps its parsed figures; only the newest keeps every raw series too (`Snapshot.raw`, which
for a large page weighs more than the page). A reading
that fails is a gap, counted and kept with its reason, never an error of the run.
"""

from __future__ import annotations

import dataclasses
import ssl
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from time import perf_counter_ns
from typing import TypeVar

from tokometer.observe.snapshot import GpuSample, Snapshot
from tokometer.util.blockinghttp import MAX_ANSWER_BYTES, request_bytes

__all__ = ["Gap", "Sampler", "fetch_text"]

_Reading = TypeVar("_Reading", Snapshot, GpuSample)

_MAX_BYTES = MAX_ANSWER_BYTES
"""The largest exposition read (a server with thousands of label sets is still far below)."""


def fetch_text(url: str, timeout_s: float, context: ssl.SSLContext | None = None) -> str:
    """The body of ``GET url`` as text, blocking; raises OSError on any failure: no connection, the whole
    answer not in within ``timeout_s`` (however the server trickles it), more than 16 MiB, a status of 400
    or more (``urllib.error.HTTPError``, with its ``code``). (`tokometer.util.blockinghttp`)"""
    body = request_bytes(url, headers={"Accept": "text/plain;version=0.0.4"}, timeout_s=timeout_s,
                         max_bytes=_MAX_BYTES, context=context)
    return body.decode("utf-8", "replace")


@dataclass(frozen=True, slots=True)
class Gap:
    """A reading that failed: when, which source, why."""

    at_ns: int
    source: str
    reason: str


@dataclass
class Sampler:
    """Reads ``server`` and ``gpus`` every ``interval_s`` on a daemon thread until `stop`."""

    server: Callable[[], Snapshot] | None
    gpus: Callable[[], Sequence[GpuSample]] | None
    interval_s: float = 1.0
    snapshots: list[Snapshot] = field(default_factory=list)
    gpu_samples: list[GpuSample] = field(default_factory=list)
    gaps: list[Gap] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="tokometer-observe", daemon=True)
        self._thread.start()

    def stop(self, last_reading: bool = True) -> None:
        """Stop sampling (after one last reading, so that the last step's window is closed by one, unless
        ``last_reading`` is False). The thread is not waited for without ``last_reading``."""
        self._stop.set()
        if not last_reading:
            return
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        self.sample()

    def sample(self) -> None:
        """Take one reading of every source now (the thread calls this; so may a test)."""
        if self.server is not None:
            try:
                snapshot = self.server()
                if self.snapshots and self.snapshots[-1].raw:  # only the newest keeps every raw series
                    self.snapshots[-1] = dataclasses.replace(self.snapshots[-1], raw={})
                self.snapshots.append(snapshot)
            except (OSError, ValueError) as exc:
                self.gaps.append(Gap(perf_counter_ns(), "server", str(exc)[:200]))
        if self.gpus is not None:
            try:
                self.gpu_samples.extend(self.gpus())
            except (OSError, ValueError, RuntimeError) as exc:
                self.gaps.append(Gap(perf_counter_ns(), "gpu", str(exc)[:200]))

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def close_with_newest(self, end_ns: int) -> None:
        """Make the newest server reading the one that closes a window ending at ``end_ns`` (`server_window`
        takes the first reading after its end): the readings taken between ``end_ns`` and it are dropped."""
        newest = self.snapshots[-1] if self.snapshots else None
        if newest is not None and newest.at_ns > end_ns:
            self.snapshots[:] = [s for s in self.snapshots if s.at_ns <= end_ns or s is newest]  # the list the
            # sampling thread appends to, not a new one

    def server_window(self, start_ns: int, end_ns: int) -> tuple[list[Snapshot], int]:
        """The snapshots that bound ``[start_ns, end_ns]``: the last one before it (the baseline for counter
        and histogram deltas), those within it, and the first one after it; and the gaps within it."""
        return _bounded(self.snapshots, start_ns, end_ns), self._gaps("server", start_ns, end_ns)

    def gpu_window(self, start_ns: int, end_ns: int) -> tuple[dict[int, list[GpuSample]], int]:
        """Per GPU index, its readings bounding and within ``[start_ns, end_ns]`` (as `server_window`)."""
        by_gpu: dict[int, list[GpuSample]] = {}
        for sample in self.gpu_samples:
            by_gpu.setdefault(sample.index, []).append(sample)
        return ({index: _bounded(samples, start_ns, end_ns) for index, samples in sorted(by_gpu.items())},
                self._gaps("gpu", start_ns, end_ns))

    def _gaps(self, source: str, start_ns: int, end_ns: int) -> int:
        return sum(1 for g in self.gaps if g.source == source and start_ns <= g.at_ns <= end_ns)


def _bounded(items: Sequence[_Reading], start_ns: int, end_ns: int) -> list[_Reading]:
    ordered: list[_Reading] = sorted(items, key=_stamp)
    before: list[_Reading] = [x for x in ordered if x.at_ns < start_ns]
    within: list[_Reading] = [x for x in ordered if start_ns <= x.at_ns <= end_ns]
    after: list[_Reading] = [x for x in ordered if x.at_ns > end_ns]
    return before[-1:] + within + after[:1]


def _stamp(reading: Snapshot | GpuSample) -> int:
    return reading.at_ns
