"""The gateway's Prometheus metrics: latency, tokens, errors and upstream health, in standard names.

OpenTelemetry's GenAI semantic conventions name the latency histograms
(``gen_ai.server.time_to_first_token``, ``gen_ai.server.time_per_output_token``,
``gen_ai.server.request.duration``, exported with dots as underscores and the
unit suffix Prometheus expects); the rest carry a ``tokometer_gateway_``
prefix. GPU memory, utilisation and power come from NVML (``nvidia-ml-py``)
when a GPU is present; without one those gauges are simply not exported.

Under ``tokometer gateway --workers N`` (``PROMETHEUS_MULTIPROC_DIR`` set by the supervisor before
any metric exists) every worker writes its counters and histograms to that directory, and
whichever worker answers ``/metrics`` adds up all of them (prometheus_client's multiprocess
mode); the gauges read at scrape time (in flight, waiting, upstream up) are the answering
worker's own.

The per-request latency histograms are the metric registry's rows that name one
(`tokometer.metrics.registry.prometheus_rows`: TTFT, TPOT, ...), each observed from the relayed answer's
record by the row's own function (`RouteSeries.observe_record`), in seconds.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from tokometer.metrics.registry import prometheus_rows
from tokometer.records import RequestRecord

disable_created_metrics()  # type: ignore[no-untyped-call]  # *_created series only add noise

__all__ = ["CONTENT_TYPE", "GatewayMetrics", "GpuCollector", "RouteSeries"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_LATENCY = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 30.0, 60.0)
_TPOT = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0)
_BUCKETS = {"tpot_ms": _TPOT}
"""A per-request histogram's buckets, where not `_LATENCY` (a time per token is shorter)."""
_log = logging.getLogger(__name__)


class _Live(Collector):
    """Gauges read at scrape time: requests in flight and waiting, and upstream state."""

    def __init__(self, read: Callable[[], dict[str, dict[str, float]]]) -> None:
        self.read = read

    def collect(self) -> Iterator[GaugeMetricFamily]:
        state = self.read()
        in_flight = GaugeMetricFamily("tokometer_gateway_in_flight", "Requests being served, by upstream.",
                                      labels=["upstream"])
        waiting = GaugeMetricFamily("tokometer_gateway_waiting", "Requests queued for an upstream's concurrency "
                                    "limit.", labels=["upstream"])
        up = GaugeMetricFamily("tokometer_gateway_upstream_up", "1 when the upstream's circuit is closed.",
                               labels=["upstream"])
        for name, values in state.items():
            in_flight.add_metric([name], values["in_flight"])
            waiting.add_metric([name], values["waiting"])
            up.add_metric([name], values["up"])
        yield from (in_flight, waiting, up)


class GpuCollector(Collector):
    """GPU memory, utilisation and power per device via NVML; exports nothing without a GPU."""

    def __init__(self) -> None:
        self.nvml: Any = None
        try:
            import pynvml

            pynvml.nvmlInit()
            self.nvml = pynvml
        except Exception:  # no library, no driver, no GPU: all mean "nothing to export"
            self.nvml = None

    def collect(self) -> Iterator[GaugeMetricFamily]:
        if self.nvml is None:
            return
        nvml = self.nvml
        memory = GaugeMetricFamily("tokometer_gpu_memory_used_bytes", "GPU memory in use.", labels=["gpu"])
        total = GaugeMetricFamily("tokometer_gpu_memory_total_bytes", "GPU memory in all.", labels=["gpu"])
        util = GaugeMetricFamily("tokometer_gpu_utilization_ratio", "GPU busy fraction (NVML).", labels=["gpu"])
        power = GaugeMetricFamily("tokometer_gpu_power_watts", "GPU power draw.", labels=["gpu"])
        limit = GaugeMetricFamily("tokometer_gpu_power_limit_watts", "GPU power cap.", labels=["gpu"])
        try:
            for index in range(nvml.nvmlDeviceGetCount()):
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
                info = nvml.nvmlDeviceGetMemoryInfo(handle)
                label = [str(index)]
                memory.add_metric(label, float(info.used))
                total.add_metric(label, float(info.total))
                util.add_metric(label, nvml.nvmlDeviceGetUtilizationRates(handle).gpu / 100.0)
                power.add_metric(label, nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0)
                limit.add_metric(label, nvml.nvmlDeviceGetEnforcedPowerLimit(handle) / 1000.0)
        except Exception as exc:  # a GPU that vanished mid-scrape must not break /metrics
            _log.warning("NVML read failed: %s", exc)
            return
        yield from (memory, total, util, power, limit)


class RouteSeries:
    """The series of one (route, upstream) pair that every relayed request touches, each looked up once (on
    first use, so that /metrics shows the same series as before): a ``labels()`` lookup costs a lock, a
    tuple and a dict probe, and a request made seven of them."""

    __slots__ = ("_children", "_metrics", "_route", "_upstream")

    def __init__(self, metrics: GatewayMetrics, route: str, upstream: str) -> None:
        self._metrics, self._route, self._upstream = metrics, route, upstream
        self._children: dict[object, Any] = {}

    def _child(self, which: object) -> Any:
        child = self._children.get(which)
        if child is None:
            m, route, upstream = self._metrics, self._route, self._upstream
            if isinstance(which, int):
                child = m.requests.labels(route, upstream, str(which))
            elif which in ("input", "output"):
                child = m.tokens.labels(route, upstream, which)
            elif which == "overhead":
                child = m.overhead.labels(route)
            elif which in m.histograms:
                child = m.histograms[str(which)].labels(route, upstream)
            else:
                child = getattr(m, str(which)).labels(route, upstream)
            self._children[which] = child
        return child

    def request(self, status: int) -> None:
        """One request more that ended with HTTP ``status``."""
        self._child(status).inc()

    def observe(self, which: str, seconds: float) -> None:
        """One value of histogram ``which``: a per-request row's short name (ttft, tpot), duration or overhead."""
        self._child(which).observe(seconds)

    def observe_record(self, record: RequestRecord) -> None:
        """Each per-request histogram's value of one relayed answer, where the answer has one."""
        for row, per_second in self._metrics.timed:
            value = row.per_request(record) if row.per_request is not None else None
            if value is not None:
                self._child(row.short).observe(value / per_second)

    def add(self, which: str, amount: float) -> None:
        """Add to counter ``which``: input or output (tokens), or cost."""
        self._child(which).inc(amount)


class GatewayMetrics:
    """Every metric of one gateway, in its own registry."""

    def __init__(self, live: Callable[[], dict[str, dict[str, float]]] | None = None, gpu: bool = True) -> None:
        r = self.registry = CollectorRegistry(auto_describe=True)
        route_up = ["route", "upstream"]
        self.requests = Counter("tokometer_gateway_requests", "Requests by route, upstream and HTTP status.",
                                [*route_up, "status"], registry=r)
        self.histograms = {row.short: Histogram(row.prometheus[0], row.prometheus[1], route_up,
                                                buckets=_BUCKETS.get(row.name, _LATENCY), registry=r)
                           for row in prometheus_rows()}
        """The per-request histograms by the row's short name (``ttft``), in registry order."""
        self.timed = [(row, 1e3 / row.scale) for row in prometheus_rows()]
        """Each per-request histogram's row, and what its value is divided by for seconds."""
        self.duration = Histogram("gen_ai_server_request_duration_seconds", "End-to-end request time at the gateway.",
                                  route_up, buckets=_LATENCY, registry=r)
        self.overhead = Histogram("tokometer_gateway_overhead_seconds", "The gateway's own time on a request's "
                                  "first token: before the upstream request, and from its first token to the client.",
                                  ["route"], buckets=(0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                                      0.05, 0.1), registry=r)
        self.tokens = Counter("tokometer_gateway_tokens", "Tokens by type (input, output).", [*route_up, "type"],
                              registry=r)
        self.cost = Counter("tokometer_gateway_cost_usd", "Estimated cost in USD.", route_up, registry=r)
        self.timeouts = Counter("tokometer_gateway_timeouts", "Upstream timeouts.", ["upstream"], registry=r)
        self.retries = Counter("tokometer_gateway_retries", "Retries of an upstream.", ["upstream"], registry=r)
        self.fallbacks = Counter("tokometer_gateway_fallbacks", "Requests served by a fallback upstream.",
                                 ["route", "primary", "upstream"], registry=r)
        self.cache = Counter("tokometer_gateway_cache_lookups", "Answer-cache lookups by result (hit, miss).",
                             ["route", "result"], registry=r)
        self.rejected = Counter("tokometer_gateway_rejected", "Requests refused by the gateway, by reason.",
                                ["reason"], registry=r)
        self.hedges = Counter("tokometer_gateway_hedges", "Hedges due, by outcome: primary or hedge (the leg that "
                              "won), failed (both legs), over_budget (not sent).", ["route", "outcome"], registry=r)
        self.resumes = Counter("tokometer_gateway_resumes", "Answers an upstream broke off mid-stream, by why (reason) "
                               "and outcome: resumed (on the next upstream) or gave_up (error event).",
                               ["route", "reason", "outcome"], registry=r)
        self._series: dict[tuple[str, str], RouteSeries] = {}
        self.shown = r  # what /metrics renders
        if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):  # --workers: every worker's counters, added up
            self.shown = CollectorRegistry(auto_describe=True)
            MultiProcessCollector(self.shown)  # type: ignore[no-untyped-call]
        if live is not None:
            self.add_live(live)
        if gpu:
            self.shown.register(GpuCollector())

    @property
    def ttft(self) -> Histogram:
        """Time to first token at the gateway."""
        return self.histograms["ttft"]

    @property
    def tpot(self) -> Histogram:
        """Decode time per output token at the gateway."""
        return self.histograms["tpot"]

    def series(self, route: str, upstream: str) -> RouteSeries:
        """The series of requests on ``route`` served by ``upstream`` (made on first use, then kept)."""
        found = self._series.get((route, upstream))
        if found is None:
            found = self._series[route, upstream] = RouteSeries(self, route, upstream)
        return found

    def add_live(self, live: Callable[[], dict[str, dict[str, float]]]) -> None:
        """Export the in-flight/waiting/up gauges read from ``live()`` at scrape time."""
        self.shown.register(_Live(live))

    def render(self) -> bytes:
        return generate_latest(self.shown)
