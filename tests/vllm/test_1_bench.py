"""`tokometer bench` against a real vLLM (CPU build): closed and open loop, the server's own account
(its /metrics) against the client's, and vLLM's prefix cache seen through cached tokens."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import run_cli
from tests.vllm.conftest import VllmServer


def bench_json(vllm: VllmServer, tmp_path: Path, *args: str, timeout: float = 900) -> dict[str, Any]:
    """Run ``tokometer bench`` against ``vllm`` with ``args``; the JSON result (it must succeed)."""
    out = tmp_path / "run.json"
    done = run_cli("bench", "--url", vllm.openai_url, "--model", vllm.model, *vllm.key_args(), "--no-store", "-q",
                   "--json", str(out), *args, timeout=timeout)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def test_closed_loop_with_the_servers_account(vllm: VllmServer, tmp_path: Path) -> None:
    result = bench_json(vllm, tmp_path, "-c", "1,2", "-n", "4", "--input-tokens", "64", "--output-tokens", "16",
                        "--ignore-eos", "--seed", "1")
    assert result["status"] == "completed"
    for step in result["steps"]:
        summary = step["summary"]
        assert summary["requests_completed"] == 4 and summary["requests_failed"] == 0
        # every answer was asked for 16 tokens with EOS ignored, and vLLM's usage says so
        assert summary["output_tokens"]["total"] == 4 * 16
        server = step["server"]
        assert server["source"] == "vllm"
        # vLLM's own counters over the step: the same requests, the same generated tokens
        assert server["counters"]["requests_finished"] == 4
        assert server["counters"]["generation_tokens"] == 4 * 16
        # its TTFT histogram counted every request. vLLM stamps TTFT inside the engine, from the request's
        # arrival there, the client at its socket: the server's can only be shorter (measured here: 109 ms
        # against 268 ms on a busy 2-core host, the rest is vLLM's HTTP front end, template and tokenizer)
        ttft = server["histograms"]["ttft"]
        assert ttft["count"] == 4
        client_ttft_mean_s = summary["ttft_ms"]["mean"] / 1000
        assert 0 < ttft["mean"] <= client_ttft_mean_s + 0.002


def test_open_loop(vllm: VllmServer, tmp_path: Path) -> None:
    result = bench_json(vllm, tmp_path, "-r", "2", "-n", "6", "--input-tokens", "32", "--output-tokens", "8",
                        "--arrival", "constant", "--seed", "2")
    step = result["steps"][0]
    assert step["summary"]["requests_completed"] == 6 and step["summary"]["requests_failed"] == 0
    assert step["load"]["rate"] == 2


def test_prefix_cache_seen_through_cached_tokens(vllm: VllmServer, tmp_path: Path) -> None:
    # 8 prompts sharing one 512-token prefix, one at a time: after the first, vLLM's prefix cache holds the
    # prefix, which its prefix_cache_hits counter and the usage's cached tokens both say.
    result = bench_json(vllm, tmp_path, "-c", "1", "-n", "8", "--prefix-tokens", "512", "--input-tokens", "544",
                        "--output-tokens", "4", "--seed", "3")
    step = result["steps"][0]
    assert step["summary"]["requests_completed"] == 8
    counters = step["server"]["counters"]
    assert counters["prefix_cache_hits"] >= 7 * 448  # vLLM caches whole blocks (16 tokens on CPU) of the prefix
    assert step["server"]["prefix_cache_hit_rate"] > 0.5
