"""Each engine's /metrics text, as its source writes it, parsed into tokometer's vocabulary."""

from __future__ import annotations

import math

import pytest

from tokometer.gateway.prometheus import GatewayMetrics
from tokometer.observe.prometheus import merge_buckets, parse
from tokometer.observe.snapshot import COUNTERS, GAUGES, HISTOGRAMS
from tokometer.observe.vocabulary import EXTRA_GAUGES, FAMILIES, detect

# vLLM V1 (vllm/v1/metrics/loggers.py): labels model_name and engine; two data-parallel engines.
VLLM_V1 = """\
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
vllm:num_requests_running{engine="1",model_name="m"} 2.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 1.0
vllm:num_requests_waiting{engine="1",model_name="m"} 0.0
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{engine="0",model_name="m"} 0.25
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25
vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.5
# TYPE vllm:prefix_cache_queries counter
vllm:prefix_cache_queries_total{engine="0",model_name="m"} 1000.0
# TYPE vllm:prefix_cache_hits counter
vllm:prefix_cache_hits_total{engine="0",model_name="m"} 250.0
# TYPE vllm:num_preemptions counter
vllm:num_preemptions_total{engine="0",model_name="m"} 4.0
# TYPE vllm:prompt_tokens counter
vllm:prompt_tokens_total{engine="0",model_name="m"} 5000.0
vllm:prompt_tokens_total{engine="1",model_name="m"} 3000.0
# TYPE vllm:generation_tokens counter
vllm:generation_tokens_total{engine="0",model_name="m"} 700.0
# TYPE vllm:request_success counter
vllm:request_success_total{engine="0",finished_reason="stop",model_name="m"} 6.0
vllm:request_success_total{engine="0",finished_reason="length",model_name="m"} 4.0
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.1",model_name="m"} 2.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="1.0",model_name="m"} 5.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} 6.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} 6.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} 3.0
vllm:time_to_first_token_seconds_bucket{engine="1",le="0.1",model_name="m"} 1.0
vllm:time_to_first_token_seconds_bucket{engine="1",le="1.0",model_name="m"} 4.0
vllm:time_to_first_token_seconds_bucket{engine="1",le="+Inf",model_name="m"} 4.0
vllm:time_to_first_token_seconds_count{engine="1",model_name="m"} 4.0
vllm:time_to_first_token_seconds_sum{engine="1",model_name="m"} 1.0
# TYPE vllm:inter_token_latency_seconds histogram
vllm:inter_token_latency_seconds_bucket{engine="0",le="0.01",model_name="m"} 600.0
vllm:inter_token_latency_seconds_bucket{engine="0",le="+Inf",model_name="m"} 690.0
vllm:inter_token_latency_seconds_count{engine="0",model_name="m"} 690.0
vllm:inter_token_latency_seconds_sum{engine="0",model_name="m"} 6.9
# TYPE vllm:request_queue_time_seconds histogram
vllm:request_queue_time_seconds_bucket{engine="0",le="0.3",model_name="m"} 10.0
vllm:request_queue_time_seconds_bucket{engine="0",le="+Inf",model_name="m"} 10.0
vllm:request_queue_time_seconds_count{engine="0",model_name="m"} 10.0
vllm:request_queue_time_seconds_sum{engine="0",model_name="m"} 0.5
# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_bucket{engine="0",le="0.3",model_name="m"} 1.0
vllm:e2e_request_latency_seconds_bucket{engine="0",le="+Inf",model_name="m"} 10.0
vllm:e2e_request_latency_seconds_count{engine="0",model_name="m"} 10.0
vllm:e2e_request_latency_seconds_sum{engine="0",model_name="m"} 20.0
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",engine="0"} 1.0
"""

# vLLM V0 (vllm/engine/metrics.py).
VLLM_V0 = """\
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="m"} 7.0
# TYPE vllm:num_requests_swapped gauge
vllm:num_requests_swapped{model_name="m"} 0.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="m"} 2.0
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{model_name="m"} 0.8
# TYPE vllm:gpu_prefix_cache_hit_rate gauge
vllm:gpu_prefix_cache_hit_rate{model_name="m"} 0.4
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{model_name="m"} 1.0
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{model_name="m"} 100.0
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{model_name="m"} 50.0
# TYPE vllm:time_per_output_token_seconds histogram
vllm:time_per_output_token_seconds_bucket{le="0.025",model_name="m"} 40.0
vllm:time_per_output_token_seconds_bucket{le="+Inf",model_name="m"} 48.0
vllm:time_per_output_token_seconds_count{model_name="m"} 48.0
vllm:time_per_output_token_seconds_sum{model_name="m"} 0.96
"""

# SGLang (python/sglang/srt/metrics/collector.py), as docs/references/production_metrics.md shows it.
SGLANG = """\
# HELP sglang:prompt_tokens_total Number of prefill tokens processed.
# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{model_name="meta-llama/Llama-3.1-8B-Instruct"} 8.128902e+06
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{model_name="meta-llama/Llama-3.1-8B-Instruct"} 7.557572e+06
# TYPE sglang:num_requests_total counter
sglang:num_requests_total{model_name="meta-llama/Llama-3.1-8B-Instruct"} 2000.0
# TYPE sglang:num_retracted_requests_total counter
sglang:num_retracted_requests_total{model_name="meta-llama/Llama-3.1-8B-Instruct"} 3.0
# TYPE sglang:token_usage gauge
sglang:token_usage{model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.28
# TYPE sglang:cache_hit_rate gauge
sglang:cache_hit_rate{model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.007507552643049313
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="meta-llama/Llama-3.1-8B-Instruct"} 32.0
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="meta-llama/Llama-3.1-8B-Instruct"} 5.0
# TYPE sglang:time_to_first_token_seconds histogram
sglang:time_to_first_token_seconds_sum{model_name="meta-llama/Llama-3.1-8B-Instruct"} 2.0
sglang:time_to_first_token_seconds_bucket{le="0.04",model_name="meta-llama/Llama-3.1-8B-Instruct"} 1.0
sglang:time_to_first_token_seconds_bucket{le="0.06",model_name="meta-llama/Llama-3.1-8B-Instruct"} 3.0
sglang:time_to_first_token_seconds_bucket{le="+Inf",model_name="meta-llama/Llama-3.1-8B-Instruct"} 4.0
sglang:time_to_first_token_seconds_count{model_name="meta-llama/Llama-3.1-8B-Instruct"} 4.0
# TYPE sglang:time_per_output_token_seconds histogram
sglang:time_per_output_token_seconds_bucket{le="0.01",model_name="meta-llama/Llama-3.1-8B-Instruct"} 4.0
sglang:time_per_output_token_seconds_bucket{le="+Inf",model_name="meta-llama/Llama-3.1-8B-Instruct"} 4.0
sglang:time_per_output_token_seconds_count{model_name="meta-llama/Llama-3.1-8B-Instruct"} 4.0
sglang:time_per_output_token_seconds_sum{model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.02
# TYPE sglang:queue_time_seconds histogram
sglang:queue_time_seconds_bucket{le="0.0",model_name="meta-llama/Llama-3.1-8B-Instruct"} 2.0
sglang:queue_time_seconds_bucket{le="0.1",model_name="meta-llama/Llama-3.1-8B-Instruct"} 4.0
sglang:queue_time_seconds_bucket{le="+Inf",model_name="meta-llama/Llama-3.1-8B-Instruct"} 4.0
sglang:queue_time_seconds_count{model_name="meta-llama/Llama-3.1-8B-Instruct"} 4.0
sglang:queue_time_seconds_sum{model_name="meta-llama/Llama-3.1-8B-Instruct"} 0.1
"""

# llama.cpp (tools/server/server.cpp, llama-server --metrics): no labels, no histograms.
LLAMACPP = """\
# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total 6886
# HELP llamacpp:prompt_seconds_total Prompt process time
# TYPE llamacpp:prompt_seconds_total counter
llamacpp:prompt_seconds_total 2903.63
# HELP llamacpp:tokens_predicted_total Number of generation tokens processed.
# TYPE llamacpp:tokens_predicted_total counter
llamacpp:tokens_predicted_total 3469
# HELP llamacpp:tokens_predicted_seconds_total Predict process time
# TYPE llamacpp:tokens_predicted_seconds_total counter
llamacpp:tokens_predicted_seconds_total 3544.27
# HELP llamacpp:prompt_tokens_seconds Average prompt throughput in tokens/s.
# TYPE llamacpp:prompt_tokens_seconds gauge
llamacpp:prompt_tokens_seconds 2.37151
# HELP llamacpp:kv_cache_usage_ratio KV-cache usage. 1 means 100 percent usage.
# TYPE llamacpp:kv_cache_usage_ratio gauge
llamacpp:kv_cache_usage_ratio 0.125
# HELP llamacpp:requests_processing Number of requests processing.
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing 2
# HELP llamacpp:requests_deferred Number of requests deferred.
# TYPE llamacpp:requests_deferred gauge
llamacpp:requests_deferred 1
"""

# TGI (router/src/server.rs; the metrics crate's Prometheus exporter writes counters without _total).
TGI = """\
# TYPE tgi_queue_size gauge
tgi_queue_size 3
# TYPE tgi_batch_current_size gauge
tgi_batch_current_size 8
# TYPE tgi_request_success counter
tgi_request_success 12
# TYPE tgi_request_input_length histogram
tgi_request_input_length_bucket{le="100"} 10
tgi_request_input_length_bucket{le="+Inf"} 12
tgi_request_input_length_sum 1500
tgi_request_input_length_count 12
# TYPE tgi_request_generated_tokens histogram
tgi_request_generated_tokens_bucket{le="100"} 12
tgi_request_generated_tokens_bucket{le="+Inf"} 12
tgi_request_generated_tokens_sum 600
tgi_request_generated_tokens_count 12
# TYPE tgi_request_queue_duration histogram
tgi_request_queue_duration_bucket{le="0.01"} 6
tgi_request_queue_duration_bucket{le="+Inf"} 12
tgi_request_queue_duration_sum 0.3
tgi_request_queue_duration_count 12
# TYPE tgi_request_mean_time_per_token_duration histogram
tgi_request_mean_time_per_token_duration_bucket{le="0.05"} 12
tgi_request_mean_time_per_token_duration_bucket{le="+Inf"} 12
tgi_request_mean_time_per_token_duration_sum 0.24
tgi_request_mean_time_per_token_duration_count 12
# TYPE tgi_request_duration histogram
tgi_request_duration_bucket{le="1"} 2
tgi_request_duration_bucket{le="+Inf"} 12
tgi_request_duration_sum 30
tgi_request_duration_count 12
"""


def test_vllm_v1_sums_engines_and_merges_histograms() -> None:
    snap = parse(VLLM_V1, at_ns=123)
    assert snap.source == "vllm" and snap.at_ns == 123
    assert snap.gauges == {"requests_running": 5.0, "requests_waiting": 1.0, "kv_cache_usage": 0.75}
    assert snap.counters == {"prompt_tokens": 8000.0, "generation_tokens": 700.0, "preemptions": 4.0,
                             "prefix_cache_queries": 1000.0, "prefix_cache_hits": 250.0, "requests_finished": 10.0}
    ttft = snap.histograms["ttft"]
    assert ttft.buckets == ((0.1, 3.0), (1.0, 9.0), (math.inf, 10.0))
    assert (ttft.count, ttft.sum) == (10.0, 4.0)
    assert set(snap.histograms) == {"ttft", "tpot", "queue", "e2e"}
    assert snap.histograms["tpot"].count == 690.0
    assert snap.raw['vllm:num_requests_running{engine="1",model_name="m"}'] == 2.0
    assert snap.raw['vllm:cache_config_info{block_size="16",engine="0"}'] == 1.0  # unmapped, kept raw
    assert len(snap.raw) == VLLM_V1.count("\n") - VLLM_V1.count("#")


def test_vllm_v0_names_and_the_hit_rate_gauge() -> None:
    snap = parse(VLLM_V0, at_ns=0)
    assert snap.source == "vllm-v0"
    assert snap.gauges == {"requests_running": 7.0, "requests_waiting": 2.0, "kv_cache_usage": 0.8,
                           "prefix_cache_hit_rate": 0.4}
    assert snap.counters == {"prompt_tokens": 100.0, "generation_tokens": 50.0, "preemptions": 1.0}
    assert snap.histograms["tpot"].buckets == ((0.025, 40.0), (math.inf, 48.0))


def test_sglang() -> None:
    snap = parse(SGLANG, at_ns=0)
    assert snap.source == "sglang"
    assert snap.gauges == {"requests_running": 32.0, "requests_waiting": 5.0, "kv_cache_usage": 0.28,
                           "prefix_cache_hit_rate": 0.007507552643049313}
    assert snap.counters == {"prompt_tokens": 8128902.0, "generation_tokens": 7557572.0, "preemptions": 3.0,
                             "requests_finished": 2000.0}
    assert snap.histograms["ttft"].buckets == ((0.04, 1.0), (0.06, 3.0), (math.inf, 4.0))
    assert snap.histograms["tpot"].sum == 0.02  # the older name, time_per_output_token_seconds
    assert snap.histograms["queue"].buckets[0] == (0.0, 2.0)


def test_llamacpp() -> None:
    snap = parse(LLAMACPP, at_ns=0)
    assert snap.source == "llamacpp"
    assert snap.gauges == {"requests_running": 2.0, "requests_waiting": 1.0, "kv_cache_usage": 0.125}
    assert snap.counters == {"prompt_tokens": 6886.0, "generation_tokens": 3469.0}
    assert snap.histograms == {}
    # builds without the KV gauge (b11434, the embedded engine's) still map the rest
    without = "\n".join(line for line in LLAMACPP.splitlines() if "kv_cache" not in line) + "\n"
    assert "kv_cache_usage" not in parse(without, 0).gauges


def test_tgi_counts_tokens_from_its_per_request_histograms() -> None:
    snap = parse(TGI, at_ns=0)
    assert snap.source == "tgi"
    assert snap.gauges == {"requests_running": 8.0, "requests_waiting": 3.0}
    assert snap.counters == {"prompt_tokens": 1500.0, "generation_tokens": 600.0, "requests_finished": 12.0}
    assert set(snap.histograms) == {"tpot", "queue", "e2e"}  # TGI has no TTFT histogram
    assert snap.histograms["e2e"].sum == 30.0


def test_tokometer_gateway_from_its_own_registry() -> None:
    metrics = GatewayMetrics(live=lambda: {"a": {"in_flight": 2, "waiting": 1, "up": 1},
                                           "b": {"in_flight": 1, "waiting": 0, "up": 1}}, gpu=False)
    metrics.tokens.labels("r", "a", "input").inc(30)
    metrics.tokens.labels("r", "a", "output").inc(12)
    metrics.tokens.labels("r", "b", "output").inc(8)
    metrics.requests.labels("r", "a", "200").inc(3)
    metrics.requests.labels("r", "a", "500").inc()
    metrics.ttft.labels("r", "a").observe(0.2)
    metrics.tpot.labels("r", "a").observe(0.01)
    metrics.duration.labels("r", "a").observe(1.5)
    snap = parse(metrics.render().decode(), at_ns=0)
    assert snap.source == "tokometer-gateway"
    assert snap.gauges == {"requests_running": 3.0, "requests_waiting": 1.0}
    assert snap.counters == {"prompt_tokens": 30.0, "generation_tokens": 20.0, "requests_finished": 3.0}
    assert {k: h.count for k, h in snap.histograms.items()} == {"ttft": 1.0, "tpot": 1.0, "e2e": 1.0}


def test_the_simulator_says_whose_names_it_speaks() -> None:
    text = VLLM_V0 + '# TYPE tokometer_sim_info gauge\ntokometer_sim_info{metrics_names="vllm-v0"} 1.0\n'
    snap = parse(text, 0)
    assert snap.source == "tokometer-sim"
    assert snap.gauges == parse(VLLM_V0, 0).gauges  # mapped as the engine it imitates


def test_unknown_exporters_are_kept_raw() -> None:
    text = '# TYPE http_requests counter\nhttp_requests_total{code="200"} 5\nprocess_cpu_seconds_total 1.5\n'
    snap = parse(text, at_ns=9)
    assert snap.source == "unknown"
    assert snap.gauges == {} and snap.counters == {} and snap.histograms == {}
    assert snap.raw == {'http_requests_total{code="200"}': 5.0, "process_cpu_seconds_total": 1.5}
    assert parse("", 0).source == "unknown"


@pytest.mark.parametrize("junk", ["<html><body>Not Found</body></html>\n", '{"error": "no metrics"}\n',
                                  "vllm:num_requests_running{model_name=\"m\" 3\n", "a_metric not-a-number\n"])
def test_junk_is_a_value_error(junk: str) -> None:
    with pytest.raises(ValueError, match="not Prometheus text exposition format"):
        parse(junk, 0)


def test_label_values_are_escaped_in_raw_keys() -> None:
    snap = parse('x{path="a\\"b"} 1\n', 0)
    assert snap.raw == {'x{path="a\\"b"}': 1.0}


def test_detection_order() -> None:
    def source(*names: str) -> str | None:
        found = detect(set(names))
        return found.source if found else None

    assert source("vllm:num_requests_running", "vllm:gpu_cache_usage_perc", "vllm:kv_cache_usage_perc") == "vllm"
    assert source("vllm:num_requests_running", "vllm:gpu_cache_usage_perc") == "vllm-v0"
    assert source("process_cpu_seconds_total") is None


def test_declared_families_without_samples_yet_count_zero() -> None:
    text = ("# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc{model_name=\"m\"} 0.0\n"
            "# TYPE vllm:generation_tokens counter\n# TYPE vllm:time_to_first_token_seconds histogram\n"
            "# TYPE vllm:num_requests_running gauge\n")
    snap = parse(text, 0)
    assert snap.counters == {"generation_tokens": 0.0}
    assert snap.histograms["ttft"].count == 0 and snap.histograms["ttft"].buckets == ((math.inf, 0.0),)
    assert snap.gauges == {"kv_cache_usage": 0.0}  # a gauge without a sample is not exported


def test_every_mapping_uses_the_vocabulary() -> None:
    for fam in FAMILIES:
        assert set(fam.gauges) <= set(GAUGES) | set(EXTRA_GAUGES), fam.source
        assert set(fam.counters) <= set(COUNTERS), fam.source
        assert set(fam.histograms) <= set(HISTOGRAMS), fam.source


def test_merge_buckets_over_different_bounds() -> None:
    a = [(0.1, 1.0), (1.0, 3.0), (math.inf, 4.0)]
    b = [(0.5, 2.0), (math.inf, 2.0)]
    assert merge_buckets([a, b]) == ((0.1, 1.0), (0.5, 3.0), (1.0, 5.0), (math.inf, 6.0))
