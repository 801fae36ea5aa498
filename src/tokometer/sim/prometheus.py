"""The simulator's ``/metrics``: one engine's Prometheus names (vLLM V1 by default, ``--metrics-names``).

Gauges are read from the live state at scrape time (requests running and
waiting, KV-cache use); counters and histograms are updated as requests end,
from the simulator's own send trace. Every naming mode exports the same
truths under that engine's names and units (the names are looked up in each
engine's source; `tokometer.observe.vocabulary` cites them):

- ``vllm`` (V1): ``vllm:num_requests_running``, ``vllm:num_requests_waiting``,
  ``vllm:kv_cache_usage_perc`` (0..1), ``vllm:num_preemptions``, ``vllm:prompt_tokens``,
  ``vllm:generation_tokens``, ``vllm:request_success`` (counters get ``_total``),
  ``vllm:time_to_first_token_seconds``, ``vllm:inter_token_latency_seconds``,
  ``vllm:e2e_request_latency_seconds``, and in the modelled engine ``vllm:prefix_cache_queries`` and
  ``vllm:prefix_cache_hits`` (prompt tokens looked up and found in its prefix cache);
- ``vllm-v0``: the same with ``vllm:gpu_cache_usage_perc`` and
  ``vllm:time_per_output_token_seconds``;
- ``sglang``: ``sglang:num_running_reqs``, ``sglang:num_queue_reqs``, ``sglang:token_usage``,
  ``sglang:num_retracted_requests``, ``sglang:prompt_tokens``, ``sglang:generation_tokens``,
  ``sglang:num_requests``, ``sglang:time_to_first_token_seconds``,
  ``sglang:inter_token_latency_seconds``, ``sglang:e2e_request_latency_seconds``;
- ``llamacpp``: ``llamacpp:requests_processing``, ``llamacpp:requests_deferred``,
  ``llamacpp:kv_cache_usage_ratio``, ``llamacpp:prompt_tokens_total``,
  ``llamacpp:tokens_predicted_total`` (no labels, no histograms, as llama-server);
- ``tgi``: ``tgi_batch_current_size``, ``tgi_queue_size``, ``tgi_request_success``, and the
  per-request histograms ``tgi_request_input_length``, ``tgi_request_generated_tokens``,
  ``tgi_request_mean_time_per_token_duration`` (one observation per request: its mean decode time
  per token), ``tgi_request_duration`` (TGI has no TTFT histogram and no KV gauge).

With a draft model (``--spec-tokens``, `tokometer.sim.speculative`): in ``vllm`` mode vLLM V1's
counters ``vllm:spec_decode_num_drafts``, ``vllm:spec_decode_num_draft_tokens``,
``vllm:spec_decode_num_accepted_tokens`` and ``vllm:spec_decode_num_accepted_tokens_per_pos``
(label ``position``); in ``sglang`` mode SGLang's gauges ``sglang:spec_accept_length`` and
``sglang:spec_accept_rate`` (over the whole run: SGLang's own are over its last logging interval).

``--metrics-buckets`` replaces every latency histogram's buckets (to make, say, a first bucket too
wide to locate anything, as vLLM's queue-time one is on a fast engine).
``tokometer_sim_info{metrics_names="..."} 1`` says it is the simulator, and whose names it speaks.
The simulator has no queue-time truth it could export (the engine model does not stamp admission),
so no mode exports a queue-time histogram.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TypeVar

from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from tokometer.sim.speculative import Draft
from tokometer.sim.state import SimState
from tokometer.sim.trace import SendTrace

disable_created_metrics()  # type: ignore[no-untyped-call]  # *_created series only add noise

__all__ = ["CONTENT_TYPE", "SimMetrics"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

_LATENCY_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                    20.0, 40.0, 80.0)
_ITL_BUCKETS = (0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.2,
                0.3, 0.4, 0.5, 0.75, 1.0, 2.5)
_M = TypeVar("_M", Counter, Histogram)

_TOKEN_BUCKETS = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0, 8192.0, 16384.0,
                  32768.0)


@dataclass(frozen=True, slots=True)
class _Names:
    """One engine's names for the simulator's truths; None: the engine does not export it."""

    running: str
    waiting: str
    kv: str | None
    preemptions: str | None
    prompt_tokens: str | None
    generation_tokens: str | None
    success: str | None
    ttft: str | None
    itl: str | None
    e2e: str | None
    labelled: bool = True
    per_request_tpot: bool = False
    """TPOT as one observation per request (its mean), as TGI does; else one per token gap."""
    token_histograms: tuple[str, str] | None = None
    """(input, generated) per-request token histograms, as TGI counts tokens."""


_MODES: dict[str, _Names] = {
    "vllm": _Names("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
                   "vllm:num_preemptions", "vllm:prompt_tokens", "vllm:generation_tokens", "vllm:request_success",
                   "vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds",
                   "vllm:e2e_request_latency_seconds"),
    "vllm-v0": _Names("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:gpu_cache_usage_perc",
                      "vllm:num_preemptions", "vllm:prompt_tokens", "vllm:generation_tokens", "vllm:request_success",
                      "vllm:time_to_first_token_seconds", "vllm:time_per_output_token_seconds",
                      "vllm:e2e_request_latency_seconds"),
    "sglang": _Names("sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:token_usage",
                     "sglang:num_retracted_requests", "sglang:prompt_tokens", "sglang:generation_tokens",
                     "sglang:num_requests", "sglang:time_to_first_token_seconds", "sglang:inter_token_latency_seconds",
                     "sglang:e2e_request_latency_seconds"),
    "llamacpp": _Names("llamacpp:requests_processing", "llamacpp:requests_deferred", "llamacpp:kv_cache_usage_ratio",
                       None, "llamacpp:prompt_tokens", "llamacpp:tokens_predicted", None, None, None, None,
                       labelled=False),
    "tgi": _Names("tgi_batch_current_size", "tgi_queue_size", None, None, None, None, "tgi_request_success", None,
                  "tgi_request_mean_time_per_token_duration", "tgi_request_duration", labelled=False,
                  per_request_tpot=True, token_histograms=("tgi_request_input_length", "tgi_request_generated_tokens")),
}


class _LiveState(Collector):
    def __init__(self, state: SimState, model: str, names: _Names, mode: str) -> None:
        self.state = state
        self.model = model
        self.names = names
        self.mode = mode

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        engine = self.state.engine
        n = self.names
        labels = ["model_name"] if n.labelled else []
        values = [self.model] if n.labelled else []
        running = GaugeMetricFamily(n.running, "Number of requests in model execution batches.", labels=labels)
        waiting = GaugeMetricFamily(n.waiting, "Number of requests waiting to be processed.", labels=labels)
        if engine is None:
            running.add_metric(values, self.state.in_flight)
            waiting.add_metric(values, 0)
            kv_used, preemptions = 0.0, 0
        else:
            running.add_metric(values, len(engine.running))
            waiting.add_metric(values, len(engine.waiting))
            kv_used = engine.kv_used / max(1, engine.limits.kv_capacity_tokens)
            preemptions = engine.stats.preemptions
        yield from (running, waiting)
        if n.kv:
            kv = GaugeMetricFamily(n.kv, "KV-cache usage. 1 means 100 percent usage.", labels=labels)
            kv.add_metric(values, kv_used)
            yield kv
        if n.preemptions:
            preempt = CounterMetricFamily(n.preemptions, "Cumulative number of preemptions.", labels=labels)
            preempt.add_metric(values, preemptions)
            yield preempt
        cache = engine.prefix_cache if engine is not None else None
        if cache is not None and self.mode == "vllm":  # vLLM V1's counters, in prompt tokens
            for name, help_text, value in (
                    ("vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens.",
                     cache.queries),
                    ("vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.", cache.hits)):
                family = CounterMetricFamily(name, help_text, labels=labels)
                family.add_metric(values, value)
                yield family
        if self.state.draft is not None:
            yield from _spec_families(self.state.draft, self.mode, labels, values)
        info = GaugeMetricFamily("tokometer_sim_info", "This is tokometer's simulator; metrics_names: whose metric "
                                 "names it speaks.", labels=["metrics_names"])
        info.add_metric([self.mode], 1)
        yield info


def _spec_families(draft: Draft, mode: str, labels: list[str], values: list[str],
                   ) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
    """The draft's counts under vLLM V1's counters or SGLang's gauges (other engines' names have none)."""
    counts = draft.counts
    if mode == "vllm":
        for name, help_text, value in (
                ("vllm:spec_decode_num_drafts", "Number of spec decoding drafts.", counts.drafts),
                ("vllm:spec_decode_num_draft_tokens", "Number of draft tokens.", counts.draft_tokens),
                ("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.", counts.accepted_tokens)):
            family = CounterMetricFamily(name, help_text, labels=labels)
            family.add_metric(values, value)
            yield family
        per_pos = CounterMetricFamily("vllm:spec_decode_num_accepted_tokens_per_pos",
                                      "Accepted tokens per draft position.", labels=[*labels, "position"])
        for position, value in enumerate(counts.accepted_per_position):
            per_pos.add_metric([*values, str(position)], value)
        yield per_pos
    elif mode == "sglang" and counts.drafts:
        for name, help_text, ratio in (
                ("sglang:spec_accept_length", "The average acceptance length of speculative decoding.",
                 1.0 + counts.accepted_tokens / counts.drafts),
                ("sglang:spec_accept_rate", "The average acceptance rate of speculative decoding.",
                 counts.accepted_tokens / counts.draft_tokens)):
            gauge = GaugeMetricFamily(name, help_text, labels=labels)
            gauge.add_metric(values, ratio)
            yield gauge


class SimMetrics:
    """One registry per simulator app (tests run several in one process)."""

    def __init__(self, state: SimState, model: str) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.model = model
        mode = state.config.metrics_names
        n = self.names = _MODES[mode]
        labels = ["model_name"] if n.labelled else []
        r = self.registry
        r.register(_LiveState(state, model, n, mode))

        def counter(name: str | None, doc: str, extra: tuple[str, ...] = ()) -> Counter | None:
            return Counter(name, doc, [*labels, *extra], registry=r) if name else None

        def histogram(name: str | None, doc: str, buckets: tuple[float, ...]) -> Histogram | None:
            return Histogram(name, doc, labels, buckets=buckets, registry=r) if name else None

        self.prompt_tokens = counter(n.prompt_tokens, "Number of prefill tokens processed.")
        self.generation_tokens = counter(n.generation_tokens, "Number of generation tokens processed.")
        self.success = counter(n.success, "Count of successfully processed requests.",
                               ("finished_reason",) if n.running.startswith("vllm:") else ())
        given = state.config.metrics_buckets  # --metrics-buckets: the same bounds for every latency histogram
        self.ttft = histogram(n.ttft, "Histogram of time to first token in seconds.", given or _LATENCY_BUCKETS)
        self.itl = histogram(n.itl, "Histogram of inter-token latency in seconds.", given or _ITL_BUCKETS)
        self.e2e = histogram(n.e2e, "Histogram of end to end request latency.", given or _LATENCY_BUCKETS)
        self.input_length = self.generated = None
        if n.token_histograms:
            self.input_length = histogram(n.token_histograms[0], "Input token length per request.", _TOKEN_BUCKETS)
            self.generated = histogram(n.token_histograms[1], "Generated tokens per request.", _TOKEN_BUCKETS)

    def _child(self, metric: _M, *extra: str) -> _M:
        values = [self.model, *extra] if self.names.labelled else list(extra)
        return metric.labels(*values) if values else metric

    def observe(self, trace: SendTrace) -> None:
        """Account for one finished request from the simulator's own send trace."""
        if self.prompt_tokens is not None:
            self._child(self.prompt_tokens).inc(trace.prompt_tokens)
        if self.generation_tokens is not None:
            self._child(self.generation_tokens).inc(trace.completion_tokens)
        if self.input_length is not None and self.generated is not None:
            self._child(self.input_length).observe(trace.prompt_tokens)
            self._child(self.generated).observe(trace.completion_tokens)
        if trace.status != 200 or trace.disconnected or ":done" in trace.fault:
            return
        if self.success is not None:
            reason = [trace.finish or "stop"] if self.names.running.startswith("vllm:") else []
            self._child(self.success, *reason).inc()
        events = trace.event_ns
        if events:
            if self.ttft is not None:
                self._child(self.ttft).observe((events[0] - trace.received_ns) / 1e9)
            if self.itl is not None and self.names.per_request_tpot:
                if len(events) > 1 and trace.completion_tokens > trace.event_tokens[0]:
                    decode_tokens = trace.completion_tokens - trace.event_tokens[0]
                    self._child(self.itl).observe((events[-1] - events[0]) / 1e9 / decode_tokens)
            elif self.itl is not None:
                for (a, b), n in zip(itertools.pairwise(events), trace.event_tokens[1:], strict=False):
                    self._child(self.itl).observe((b - a) / 1e9 / max(n, 1))
        if self.e2e is not None:
            self._child(self.e2e).observe((trace.end_ns - trace.received_ns) / 1e9)

    def render(self) -> bytes:
        return generate_latest(self.registry)
