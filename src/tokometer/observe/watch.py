"""Watching a running server for ``tokometer top``: its ``/metrics`` and its GPUs, sampled on a thread.

`Watch.open` checks the server's ``/metrics`` once (with llama.cpp's ``/slots``: `observe.scrape`;
no ``/metrics`` there: an `EndpointError`, one line) and
the GPU source (``--gpu-metrics``, as `bench` reads it: `observe.gpu_source.gpu_reader`), then a
`observe.sampler.Sampler` reads both every ``interval_s`` on a daemon thread. `Watch.view` makes
the frame of the last ``window_s`` seconds (`observe.top.top_view`) and forgets readings older than
the window, so a view left open for days holds only a window's worth of them.
"""

from __future__ import annotations

import ipaddress
import time
from dataclasses import dataclass
from time import perf_counter_ns
from urllib.parse import urlsplit

from tokometer.observe.gpu_source import gpu_reader
from tokometer.observe.sampler import Sampler
from tokometer.observe.scrape import scraper
from tokometer.observe.top import TopView, top_view
from tokometer.util.errors import ConfigError, EndpointError
from tokometer.util.httpurl import http_url_problem
from tokometer.util.shown import clipped

__all__ = ["SCRAPE_TIMEOUT_S", "Watch", "is_local", "metrics_url"]

SCRAPE_TIMEOUT_S = 5.0


def metrics_url(url: str) -> str:
    """``/metrics`` at the origin of a server's URL, or the URL itself where its path ends in ``/metrics``.

    A URL without a scheme is taken as ``http://``. Raises `ConfigError` for one that is not a well-formed http(s)
    URL (`tokometer.util.httpurl`).
    """
    value = url.strip()
    if "://" not in value:
        value = "http://" + value
    if problem := http_url_problem(value):
        raise ConfigError(f"URL {url!r} {problem}: give a server's http(s):// URL (e.g. http://127.0.0.1:8000) or "
                          "its /metrics URL")
    parts = urlsplit(value)
    if parts.path.rstrip("/").endswith("/metrics"):
        return value
    return f"{parts.scheme}://{parts.netloc}/metrics"


def is_local(url: str) -> bool:
    """Whether ``url``'s host is this machine (a loopback address or ``localhost``)."""
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass
class Watch:
    """A server (and its GPUs) being sampled; `view` makes a frame, `stop` ends the sampling."""

    url: str
    """The ``/metrics`` URL read."""
    sampler: Sampler
    started_ns: int
    gpu_note: str | None = None
    """Why the GPUs asked for cannot be read (None: read, or none asked for)."""

    @classmethod
    def open(cls, url: str, interval_s: float, gpu_metrics: str = "auto", *, start: bool = True) -> Watch:
        """Check the sources once (first readings kept) and, with ``start``, sample them on a thread."""
        target = metrics_url(url)

        scrape = scraper(target, SCRAPE_TIMEOUT_S)
        started = perf_counter_ns()
        try:
            first = scrape()
        except (OSError, ValueError) as exc:
            raise EndpointError(f"no server metrics at {target}: {clipped(' '.join(str(exc).split()))} (give the "
                                "server's URL, or its /metrics URL; llama.cpp needs --metrics)") from None
        gpus, note = gpu_reader(gpu_metrics, local=is_local(target))
        sampler = Sampler(scrape, gpus, interval_s)
        sampler.snapshots.append(first)
        if gpus is not None:
            try:
                sampler.gpu_samples.extend(gpus())
            except (OSError, ValueError, RuntimeError) as exc:
                note = f"GPU metrics: {clipped(' '.join(str(exc).split()))}"
        watch = cls(target, sampler, started, note)
        if start:
            sampler.start()
        return watch

    def view(self, window_s: float, now_ns: int | None = None) -> TopView:
        """The frame of the last ``window_s`` seconds; readings older than that are forgotten."""
        now = perf_counter_ns() if now_ns is None else now_ns
        cutoff = now - int(window_s * 1e9)
        s = self.sampler
        for readings in (s.snapshots, s.gpu_samples, s.gaps):
            old = 0
            for reading in readings:  # appended in time order by one thread: the old ones are a prefix
                if reading.at_ns >= cutoff:
                    break
                old += 1
            del readings[:old]
        return top_view(self.url, list(s.snapshots), list(s.gpu_samples), list(s.gaps), now_ns=now,
                        window_s=window_s, started_ns=self.started_ns)

    def once(self, interval_s: float) -> TopView:
        """Two readings ``interval_s`` apart (the first taken by `open`) and the frame over them."""
        time.sleep(interval_s)
        self.sampler.sample()
        now = perf_counter_ns()
        return self.view((now - self.started_ns) / 1e9, now)

    def stop(self) -> None:
        self.sampler.stop(last_reading=False)
