"""The simulator as a modelled deployment: its throughput/latency curve bends where the estimator says.

Llama-3.1-8B with AWQ int4 weights on one H100-SXM: a decode step reads ~5.8 GB of weights, so
at small batches it is bandwidth bound (~2.9 ms a step whatever the batch) and from about sixty
sequences on compute bound (the step grows with the batch: 58 at the typical efficiencies). The simulator plays it ten
times slower (--time-scale 10) so that a Python server keeps exact time.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.conftest import SimServer
from tests.helpers import bench
from tokometer.perf import Deployment, Efficiency, decode_step_s, resolve_hardware, resolve_model
from tokometer.perf.roofline import compute_bound_batch

SCALE = 10.0
INPUT, OUTPUT = 8, 40


def test_sweep_bends_where_the_estimator_says(sim_factory: Callable[..., SimServer]) -> None:
    sim = sim_factory("--model", "llama-3.1-8b", "--hardware", "H100-SXM", "--dtype", "awq",
                      "--time-scale", str(SCALE))
    d = Deployment(resolve_model("llama-3.1-8b"), resolve_hardware("H100-SXM"), weight_dtype="awq")
    knee = compute_bound_batch(d, INPUT + OUTPUT / 2, Efficiency())
    assert knee is not None and 48 < knee < 192
    eff = Efficiency()
    context = INPUT + OUTPUT // 2  # mean tokens in a sequence's KV cache while it decodes
    measured: dict[int, float] = {}
    expected: dict[int, float] = {}
    for c in (8, 48, 192):
        result = bench(sim.openai_url, concurrency=[c], requests=c, input_tokens=INPUT, output_tokens=OUTPUT,
                       ignore_eos=True)
        summary = result.steps[0].summary
        assert summary.requests_failed == 0 and summary.tpot_ms.p50 is not None
        step_s = SCALE * decode_step_s(d, c, c * context, eff)
        assert summary.tpot_ms.p50 == pytest.approx(1e3 * step_s, rel=0.10), c
        measured[c] = c / (summary.tpot_ms.p50 / 1e3)  # aggregate decode tokens/s (scaled time)
        expected[c] = c / step_s
    # Below the knee the aggregate grows with the batch (8 -> 48: ~6x); past it, much less (48 -> 192: ~1.8x).
    assert measured[48] / measured[8] == pytest.approx(expected[48] / expected[8], rel=0.10)
    assert measured[192] / measured[48] == pytest.approx(expected[192] / expected[48], rel=0.10)
    assert expected[48] / expected[8] > 5 and expected[192] / expected[48] < 2


def test_faults_and_metrics_in_the_modelled_engine(sim_factory: Callable[..., SimServer]) -> None:
    sim = sim_factory("--model", "llama-3.1-8b", "--hardware", "H100-SXM", "--dtype", "awq", "--time-scale", "2",
                      "--fault-schedule", "none,reset,malformed,stall,error_event,http_503", "--stall-s", "30")
    result = bench(sim.openai_url, concurrency=[2], requests=12, input_tokens=8, output_tokens=12,
                   idle_timeout_s=1.0)
    summary = result.steps[0].summary
    assert summary.requests_completed == 2
    assert summary.errors == {"reset": 2, "malformed_stream": 2, "timeout": 2, "server_error_event": 2,
                              "http_5xx": 2}
    import urllib.request

    with urllib.request.urlopen(sim.root + "/metrics", timeout=10) as response:
        text = response.read().decode()
    assert 'vllm:num_requests_running{model_name="llama-3.1-8b"} 0.0' in text
    assert 'vllm:request_success_total{finished_reason="length",model_name="llama-3.1-8b"} 2.0' in text
    assert "vllm:kv_cache_usage_perc" in text and "vllm:num_preemptions_total" in text
