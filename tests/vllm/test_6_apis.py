"""`bench --api openai-responses` and `--api anthropic-messages` against a real vLLM (CPU build), which serves
``/v1/responses`` and ``/v1/messages`` beside its chat API: the same requests measured, counted by the
server's usage in each protocol's own shape, and vLLM's /metrics agreeing on the tokens generated.

vLLM checks its key in ``Authorization: Bearer`` only, also on ``/v1/messages``; an Anthropic client sends
``x-api-key``, so the Anthropic run adds the bearer header (``--header``) as a user of vLLM would."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.vllm.conftest import VllmServer
from tests.vllm.test_1_bench import bench_json


@pytest.mark.parametrize("api", ["openai-responses", "anthropic-messages"])
def test_both_apis_measured_with_the_servers_usage(vllm: VllmServer, tmp_path: Path, api: str) -> None:
    extra = ["--header", f"Authorization: Bearer {vllm.api_key}"] if api == "anthropic-messages" and vllm.api_key \
        else []
    result = bench_json(vllm, tmp_path, "--api", api, *extra, "-c", "2", "-n", "4", "--input-tokens", "32",
                        "--output-tokens", "8", "--ignore-eos", "--seed", "6")
    step = result["steps"][0]
    summary = step["summary"]
    assert summary["requests_completed"] == 4 and summary["requests_failed"] == 0, summary["error_examples"]
    assert summary["output_tokens"]["source"] == {"usage": 4} and summary["input_tokens"]["source"] == {"usage": 4}
    assert summary["output_tokens"]["total"] <= 4 * 8  # max_output_tokens / max_tokens held
    assert summary["ttft_ms"]["p50"] > 0 and summary["tpot_ms"]["count"] > 0
    assert step["server"]["source"] == "vllm"
    # vLLM's own counters over the step say what the usage blocks said (Anthropic's input_tokens included)
    assert step["server"]["counters"]["generation_tokens"] == summary["output_tokens"]["total"]
    assert step["server"]["counters"]["prompt_tokens"] == summary["input_tokens"]["total"]
