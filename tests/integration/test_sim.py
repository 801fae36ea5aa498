"""The simulator's own surface: /metrics in vLLM's names, agreeing with what was sent."""

from __future__ import annotations

import urllib.request
from collections.abc import Callable

from tests.conftest import SimServer
from tests.helpers import bench


def _metrics(sim: SimServer) -> dict[str, float]:
    with urllib.request.urlopen(sim.root + "/metrics", timeout=10) as response:
        text = response.read().decode()
    values: dict[str, float] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            values[name] = float(value)
    return values


def test_metrics_agree_with_what_the_client_saw(sim_factory: Callable[..., SimServer]) -> None:
    sim = sim_factory("--ttft-ms", "20", "--itl-ms", "2", "--model", "m")
    result = bench(sim.openai_url, concurrency=[3], requests=9, input_tokens=12, output_tokens=16)
    summary = result.steps[0].summary
    values = _metrics(sim)
    label = '{model_name="m"}'
    assert values[f"vllm:generation_tokens_total{label}"] == summary.output_tokens_total == 9 * 16
    assert values[f"vllm:prompt_tokens_total{label}"] == 9 * 12
    assert values['vllm:request_success_total{finished_reason="length",model_name="m"}'] == 9
    assert values[f"vllm:time_to_first_token_seconds_count{label}"] == 9
    ttft_mean = values[f"vllm:time_to_first_token_seconds_sum{label}"] / 9
    assert abs(ttft_mean * 1000 - summary.ttft_ms.mean) < 3  # type: ignore[operator]
    assert values[f"vllm:num_requests_running{label}"] == 0
    assert values[f"vllm:e2e_request_latency_seconds_count{label}"] == 9
