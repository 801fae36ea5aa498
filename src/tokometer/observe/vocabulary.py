"""Each engine's Prometheus names, mapped into tokometer's vocabulary (`tokometer.observe.snapshot`).

Names are written as ``prometheus_client.parser`` exposes them: a counter's samples end in
``_total`` (the parser adds it where an exporter, like TGI's Rust one, leaves it off), a histogram
is named by its family (``..._bucket``/``_count``/``_sum`` samples are read by
`tokometer.observe.prometheus`). Every ratio here is 0..1 as exported (no engine below exports a
percentage, whatever the ``_perc`` in vLLM's names suggests), and every latency is in seconds.

Where the looked-up source is cited, it is the file that defines the metric:

- vLLM V1: ``vllm-project/vllm`` ``vllm/v1/metrics/loggers.py`` (``PrometheusStatLogger``);
- vLLM V0: ``vllm-project/vllm`` ``vllm/engine/metrics.py`` (``Metrics``);
- SGLang: ``sgl-project/sglang`` ``python/sglang/srt/metrics/collector.py``
  (``SchedulerMetricsCollector``, ``TokenizerMetricsCollector``);
- llama.cpp: ``ggml-org/llama.cpp`` ``tools/server/server.cpp`` (``/metrics`` handler, ``--metrics``);
- TGI: ``huggingface/text-generation-inference`` ``router/src/server.rs`` (``metrics::histogram!``
  etc.) and the metrics table of its reference documentation;
- tokometer's gateway: ``src/tokometer/gateway/prometheus.py``; its simulator:
  ``src/tokometer/sim/prometheus.py`` (it speaks one of the engines' names, ``--metrics-names``, and
  says so in ``tokometer_sim_info``).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field

__all__ = ["EXTRA_GAUGES", "FAMILIES", "SIM_AT_REQUEST_END", "SIM_INFO", "Family", "Pick", "detect", "family"]

EXTRA_GAUGES = ("prefix_cache_hit_rate", "spec_accept_length", "spec_accept_rate")
"""Gauges beyond `snapshot.GAUGES`: an engine's own prefix-cache hit rate (0..1), for engines that
export no hit/query counters (vLLM V0, SGLang); an engine's own speculative-decoding acceptance
length (tokens per step) and rate (0..1), for engines that export no draft counters (SGLang)."""

SIM_INFO = "tokometer_sim_info"
"""The simulator's marker gauge (label ``metrics_names``: the engine whose names it speaks)."""

SIM_AT_REQUEST_END = ("prompt_tokens", "generation_tokens")
"""The simulator counts a request's tokens as it ends, whichever engine's names it speaks (sim/metrics.py)."""


@dataclass(frozen=True, slots=True)
class Pick:
    """One sample name, optionally only the label sets with these label values; summed over the rest."""

    name: str
    labels: tuple[tuple[str, str], ...] = ()


def _p(*names: str) -> tuple[Pick, ...]:
    return tuple(Pick(n) for n in names)


@dataclass(frozen=True, slots=True)
class Family:
    """One engine's names. Each normalised name maps to candidates: the first one present wins."""

    source: str
    prefixes: tuple[str, ...]
    """A sample name starting with one of these is this family's (checked in `FAMILIES` order)."""
    markers: tuple[str, ...] = ()
    """When set, at least one of these sample names must be present too."""
    gauges: dict[str, tuple[Pick, ...]] = field(default_factory=dict)
    counters: dict[str, tuple[Pick, ...]] = field(default_factory=dict)
    histograms: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Normalised name -> candidate histogram family names."""
    averaged: tuple[str, ...] = ()
    """Gauges that are ratios: averaged over their label sets (per tp/dp rank), not summed."""
    per_label: dict[str, tuple[str, str]] = field(default_factory=dict)
    """Normalised prefix -> (counter sample, label): one counter per label value, named prefix + value
    (vLLM's accepted tokens per draft position: ``spec_accepted_at_0``, ``spec_accepted_at_1``...)."""
    at_request_end: tuple[str, ...] = ()
    """Normalised counters the engine adds to only when a request ends (a request's tokens in one jump):
    over a window shorter than a request they stand still while tokens stream (`observe.server_window`)."""


# vLLM V1, vllm/v1/metrics/loggers.py: gauges vllm:num_requests_running, vllm:num_requests_waiting,
# vllm:kv_cache_usage_perc ("KV-cache usage. 1 means 100 percent usage.", a 0..1 fraction); the
# deprecated vllm:gpu_cache_usage_perc is still exported beside it for a while. Counters
# vllm:prefix_cache_queries / vllm:prefix_cache_hits (tokens), vllm:num_preemptions,
# vllm:prompt_tokens, vllm:generation_tokens, vllm:request_success{finished_reason}. Histograms
# vllm:time_to_first_token_seconds, vllm:inter_token_latency_seconds (newer; older V1 releases and
# V0 call the same per-token gap vllm:time_per_output_token_seconds), vllm:request_queue_time_seconds,
# vllm:e2e_request_latency_seconds. Labels model_name and engine (one series per data-parallel
# engine): summed. Speculative decoding, vllm/v1/spec_decode/metrics.py (SpecDecodingProm): counters
# vllm:spec_decode_num_drafts (one per request per step that drafted), vllm:spec_decode_num_draft_tokens,
# vllm:spec_decode_num_accepted_tokens, vllm:spec_decode_num_accepted_tokens_per_pos{position}.
VLLM = Family(
    source="vllm",
    prefixes=("vllm:",),
    markers=("vllm:kv_cache_usage_perc", "vllm:prefix_cache_queries_total", "vllm:inter_token_latency_seconds_count"),
    gauges={
        "requests_running": _p("vllm:num_requests_running"),
        "requests_waiting": _p("vllm:num_requests_waiting"),
        "kv_cache_usage": _p("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
    },
    counters={
        "prompt_tokens": _p("vllm:prompt_tokens_total"),
        "generation_tokens": _p("vllm:generation_tokens_total"),
        "preemptions": _p("vllm:num_preemptions_total"),
        "prefix_cache_queries": _p("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total"),
        "prefix_cache_hits": _p("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"),
        "requests_finished": _p("vllm:request_success_total"),
        "spec_drafts": _p("vllm:spec_decode_num_drafts_total"),
        "spec_draft_tokens": _p("vllm:spec_decode_num_draft_tokens_total"),
        "spec_accepted_tokens": _p("vllm:spec_decode_num_accepted_tokens_total"),
    },
    histograms={
        "ttft": ("vllm:time_to_first_token_seconds",),
        "tpot": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
        "queue": ("vllm:request_queue_time_seconds",),
        "e2e": ("vllm:e2e_request_latency_seconds",),
    },
    per_label={"spec_accepted_at_": ("vllm:spec_decode_num_accepted_tokens_per_pos_total", "position")},
)

# vLLM V0, vllm/engine/metrics.py: vllm:gpu_cache_usage_perc (0..1, "1 means 100 percent usage"),
# vllm:gpu_prefix_cache_hit_rate (0..1 gauge: V0 has no hit/query counters), vllm:num_preemptions,
# vllm:prompt_tokens, vllm:generation_tokens, vllm:request_success, and the histograms
# vllm:time_to_first_token_seconds, vllm:time_per_output_token_seconds (per decode iteration),
# vllm:request_queue_time_seconds, vllm:e2e_request_latency_seconds. Speculative decoding (V0's
# spec_decode/metrics.py): counters vllm:spec_decode_num_draft_tokens, vllm:spec_decode_num_accepted_tokens
# (no count of drafts: no acceptance length), gauge vllm:spec_decode_draft_acceptance_rate.
VLLM_V0 = Family(
    source="vllm-v0",
    prefixes=("vllm:",),
    gauges={
        "requests_running": _p("vllm:num_requests_running"),
        "requests_waiting": _p("vllm:num_requests_waiting"),
        "kv_cache_usage": _p("vllm:gpu_cache_usage_perc"),
        "prefix_cache_hit_rate": _p("vllm:gpu_prefix_cache_hit_rate"),
        "spec_accept_rate": _p("vllm:spec_decode_draft_acceptance_rate"),
    },
    counters={
        "prompt_tokens": _p("vllm:prompt_tokens_total"),
        "generation_tokens": _p("vllm:generation_tokens_total"),
        "preemptions": _p("vllm:num_preemptions_total"),
        "requests_finished": _p("vllm:request_success_total"),
        "spec_draft_tokens": _p("vllm:spec_decode_num_draft_tokens_total"),
        "spec_accepted_tokens": _p("vllm:spec_decode_num_accepted_tokens_total"),
    },
    histograms={
        "ttft": ("vllm:time_to_first_token_seconds",),
        "tpot": ("vllm:time_per_output_token_seconds",),
        "queue": ("vllm:request_queue_time_seconds",),
        "e2e": ("vllm:e2e_request_latency_seconds",),
    },
)

# SGLang, python/sglang/srt/metrics/collector.py (--enable-metrics). SchedulerMetricsCollector:
# gauges sglang:num_running_reqs, sglang:num_queue_reqs, sglang:token_usage (used / max total KV
# tokens, 0..1), sglang:cache_hit_rate (radix prefix cache, 0..1); counter
# sglang:num_retracted_requests (a retraction is SGLang's preemption: the request goes back to the
# queue and its KV is freed). TokenizerMetricsCollector: counters sglang:prompt_tokens,
# sglang:generation_tokens, sglang:num_requests; histograms sglang:time_to_first_token_seconds,
# sglang:inter_token_latency_seconds (older releases: sglang:time_per_output_token_seconds),
# sglang:queue_time_seconds, sglang:e2e_request_latency_seconds. Labels model_name (and
# tp_rank/dp_rank where set): summed, but for the ratios (averaged). Speculative decoding: gauges
# sglang:spec_accept_length (tokens per verify step, the bonus token counted) and sglang:spec_accept_rate
# (0..1), each over the scheduler's last logging interval; no draft counters.
SGLANG = Family(
    source="sglang",
    prefixes=("sglang:",),
    gauges={
        "requests_running": _p("sglang:num_running_reqs"),
        "requests_waiting": _p("sglang:num_queue_reqs"),
        "kv_cache_usage": _p("sglang:token_usage"),
        "prefix_cache_hit_rate": _p("sglang:cache_hit_rate"),
        "spec_accept_length": _p("sglang:spec_accept_length"),
        "spec_accept_rate": _p("sglang:spec_accept_rate"),
    },
    averaged=("prefix_cache_hit_rate", "spec_accept_length", "spec_accept_rate"),
    counters={
        "prompt_tokens": _p("sglang:prompt_tokens_total"),
        "generation_tokens": _p("sglang:generation_tokens_total"),
        "preemptions": _p("sglang:num_retracted_requests_total"),
        "requests_finished": _p("sglang:num_requests_total"),
    },
    histograms={
        "ttft": ("sglang:time_to_first_token_seconds",),
        "tpot": ("sglang:inter_token_latency_seconds", "sglang:time_per_output_token_seconds"),
        "queue": ("sglang:queue_time_seconds",),
        "e2e": ("sglang:e2e_request_latency_seconds",),
    },
)

# llama.cpp, tools/server/server.cpp (llama-server --metrics): gauges llamacpp:requests_processing,
# llamacpp:requests_deferred, llamacpp:kv_cache_usage_ratio (0..1; recent builds dropped it, the
# b11434 the embedded engine uses among them); counters llamacpp:prompt_tokens_total,
# llamacpp:tokens_predicted_total. No labels, no histograms; no preemption or finished-request count.
LLAMACPP = Family(
    source="llamacpp",
    prefixes=("llamacpp:",),
    gauges={
        "requests_running": _p("llamacpp:requests_processing"),
        "requests_waiting": _p("llamacpp:requests_deferred"),
        "kv_cache_usage": _p("llamacpp:kv_cache_usage_ratio"),
    },
    counters={
        "prompt_tokens": _p("llamacpp:prompt_tokens_total"),
        "generation_tokens": _p("llamacpp:tokens_predicted_total"),
    },
    # metrics_on_prediction() adds a slot's tokens as it is released; its /slots has the live count
    # (tokometer.observe.llamacpp_slots). Prompt tokens are counted after each decode.
    at_request_end=("generation_tokens",),
)

# TGI, router/src/server.rs and router/src/infer (metrics crate, Prometheus exporter): gauges
# tgi_queue_size, tgi_batch_current_size (requests in the running batch); counter tgi_request_success;
# per-request histograms tgi_request_input_length and tgi_request_generated_tokens (tokens: their
# ``_sum`` is the token total, counted when a request ends), tgi_request_queue_duration,
# tgi_request_mean_time_per_token_duration (the request's mean decode time per token),
# tgi_request_duration (end to end); all durations in seconds. TGI has no TTFT histogram and no
# KV-cache gauge.
TGI = Family(
    source="tgi",
    prefixes=("tgi_",),
    gauges={
        "requests_running": _p("tgi_batch_current_size"),
        "requests_waiting": _p("tgi_queue_size"),
    },
    counters={
        "prompt_tokens": _p("tgi_request_input_length_sum"),
        "generation_tokens": _p("tgi_request_generated_tokens_sum"),
        "requests_finished": _p("tgi_request_success_total"),
    },
    histograms={
        "tpot": ("tgi_request_mean_time_per_token_duration",),
        "queue": ("tgi_request_queue_duration",),
        "e2e": ("tgi_request_duration",),
    },
    at_request_end=("prompt_tokens", "generation_tokens"),  # per-request histograms' _sum
)

# tokometer's gateway, src/tokometer/gateway/prometheus.py: OpenTelemetry GenAI histograms
# gen_ai_server_time_to_first_token_seconds, gen_ai_server_time_per_output_token_seconds,
# gen_ai_server_request_duration_seconds; tokometer_gateway_in_flight / _waiting (per upstream),
# tokometer_gateway_tokens{type="input"|"output"}, tokometer_gateway_requests{status}.
GATEWAY = Family(
    source="tokometer-gateway",
    prefixes=("tokometer_gateway_", "gen_ai_server_"),
    gauges={
        "requests_running": _p("tokometer_gateway_in_flight"),
        "requests_waiting": _p("tokometer_gateway_waiting"),
    },
    counters={
        "prompt_tokens": (Pick("tokometer_gateway_tokens_total", (("type", "input"),)),),
        "generation_tokens": (Pick("tokometer_gateway_tokens_total", (("type", "output"),)),),
        "requests_finished": (Pick("tokometer_gateway_requests_total", (("status", "200"),)),),
    },
    histograms={
        "ttft": ("gen_ai_server_time_to_first_token_seconds",),
        "tpot": ("gen_ai_server_time_per_output_token_seconds",),
        "e2e": ("gen_ai_server_request_duration_seconds",),
    },
    at_request_end=("prompt_tokens", "generation_tokens"),  # counted as each answer ends (gateway/app.py)
)

FAMILIES: tuple[Family, ...] = (VLLM, VLLM_V0, SGLANG, LLAMACPP, TGI, GATEWAY)
"""In detection order: vLLM V1 (its markers present) before V0 (any other ``vllm:`` names)."""

_BY_SOURCE = {f.source: f for f in FAMILIES}


def family(source: str) -> Family | None:
    """The family called ``source`` (``vllm``, ``sglang``, ...), or None."""
    return _BY_SOURCE.get(source)


def detect(names: Collection[str]) -> Family | None:
    """The engine family whose names these sample names are; None for an unknown exporter."""
    for fam in FAMILIES:
        if not any(n.startswith(fam.prefixes) for n in names):
            continue
        if fam.markers and not any(m in names for m in fam.markers):
            continue
        return fam
    return None
