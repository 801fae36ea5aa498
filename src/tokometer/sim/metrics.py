"""The simulator's ``/metrics``: vLLM's Prometheus names, so dashboards and the gateway see a vLLM.

Gauges are read from the live state at scrape time (requests running and
waiting, KV-cache use); counters and histograms are updated as requests end,
from the simulator's own send trace. Names follow vLLM V1:
``vllm:num_requests_running``, ``vllm:num_requests_waiting``,
``vllm:kv_cache_usage_perc``, ``vllm:num_preemptions``, ``vllm:prompt_tokens``,
``vllm:generation_tokens``, ``vllm:request_success`` (counters get ``_total``),
``vllm:time_to_first_token_seconds``, ``vllm:inter_token_latency_seconds``,
``vllm:e2e_request_latency_seconds``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from tokometer.sim.state import SimState
from tokometer.sim.trace import SendTrace

disable_created_metrics()  # type: ignore[no-untyped-call]  # *_created series only add noise

__all__ = ["CONTENT_TYPE", "SimMetrics"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

_LATENCY_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                    20.0, 40.0, 80.0)
_ITL_BUCKETS = (0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.2,
                0.3, 0.4, 0.5, 0.75, 1.0, 2.5)


class _LiveState(Collector):
    def __init__(self, state: SimState, model: str) -> None:
        self.state = state
        self.model = model

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        engine = self.state.engine
        labels = ["model_name"]
        running = GaugeMetricFamily("vllm:num_requests_running", "Number of requests in model execution batches.",
                                    labels=labels)
        waiting = GaugeMetricFamily("vllm:num_requests_waiting", "Number of requests waiting to be processed.",
                                    labels=labels)
        kv = GaugeMetricFamily("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.",
                               labels=labels)
        preempt = CounterMetricFamily("vllm:num_preemptions", "Cumulative number of preemptions.", labels=labels)
        if engine is None:
            running.add_metric([self.model], self.state.in_flight)
            waiting.add_metric([self.model], 0)
            kv.add_metric([self.model], 0.0)
            preempt.add_metric([self.model], 0)
        else:
            running.add_metric([self.model], len(engine.running))
            waiting.add_metric([self.model], len(engine.waiting))
            kv.add_metric([self.model], engine.kv_used / max(1, engine.limits.kv_capacity_tokens))
            preempt.add_metric([self.model], engine.stats.preemptions)
        yield from (running, waiting, kv, preempt)


class SimMetrics:
    """One registry per simulator app (tests run several in one process)."""

    def __init__(self, state: SimState, model: str) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.model = model
        labels = ["model_name"]
        self.registry.register(_LiveState(state, model))
        self.prompt_tokens = Counter("vllm:prompt_tokens", "Number of prefill tokens processed.", labels,
                                     registry=self.registry)
        self.generation_tokens = Counter("vllm:generation_tokens", "Number of generation tokens processed.", labels,
                                         registry=self.registry)
        self.success = Counter("vllm:request_success", "Count of successfully processed requests.",
                               [*labels, "finished_reason"], registry=self.registry)
        self.ttft = Histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
                              labels, buckets=_LATENCY_BUCKETS, registry=self.registry)
        self.itl = Histogram("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
                             labels, buckets=_ITL_BUCKETS, registry=self.registry)
        self.e2e = Histogram("vllm:e2e_request_latency_seconds", "Histogram of end to end request latency.",
                             labels, buckets=_LATENCY_BUCKETS, registry=self.registry)

    def observe(self, trace: SendTrace) -> None:
        """Account for one finished request from the simulator's own send trace."""
        model = self.model
        self.prompt_tokens.labels(model).inc(trace.prompt_tokens)
        self.generation_tokens.labels(model).inc(trace.completion_tokens)
        if trace.status != 200 or trace.disconnected or ":done" in trace.fault:
            return
        self.success.labels(model, trace.finish or "stop").inc()
        events = trace.event_ns
        if events:
            self.ttft.labels(model).observe((events[0] - trace.received_ns) / 1e9)
            for (a, b), n in zip(itertools.pairwise(events), trace.event_tokens[1:], strict=False):
                self.itl.labels(model).observe((b - a) / 1e9 / max(n, 1))
        self.e2e.labels(model).observe((trace.end_ns - trace.received_ns) / 1e9)

    def render(self) -> bytes:
        return generate_latest(self.registry)
