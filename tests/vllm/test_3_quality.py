"""`tokometer quality` with the bundled model on llama.cpp (Q4_K_M) against the same weights on vLLM (bf16),
teacher forcing included: vLLM's /tokenize gives the same ids as llama.cpp's, so past each divergence
vLLM is asked for its distribution on llama.cpp's tokens."""

from __future__ import annotations

import json

from tests.conftest import require_llama_server, run_cli
from tests.vllm.conftest import VllmServer


def test_quality_llamacpp_q4_against_vllm_bf16_with_teacher_forcing(vllm: VllmServer) -> None:
    require_llama_server()
    # 4 items of 12 tokens: 48 positions compared. Measured on the 2-core host: top-1 agreement 0.96 (4 items) and
    # 0.98 (8), mean KL 0.0035 both; 0.8 is 10 of 48 positions disagreeing, far from the ~1 this pair gives and
    # far above what a misaligned path gives. 8 items took 74 s, 4 take 50 s
    items = 4
    done = run_cli("quality", "engine:bundled", vllm.openai_url, "--model-b", vllm.model, *vllm.key_args(),
                   "--api", "openai-completions", "--limit", str(items), "--max-tokens", "12", "--concurrency", "1",
                   "--json", timeout=1200)
    assert done.returncode in (0, 1), done.stderr[-3000:]  # 1: a verdict of "worse" is an answer, not a failure
    summary = json.loads(done.stdout)
    assert summary["items"] == items and summary["compared"] == items, summary
    assert "teacher-forced" in summary["kl_method"], summary["kl_method"]
    # the same weights, quantised against not: the greedy paths mostly agree token by token...
    assert summary["top1_agreement"] is not None and summary["top1_agreement"] >= 0.8, summary
    # ...and the distributions are close (measured here: ~0.003 nats)
    assert summary["mean_kl"] is not None and 0 <= summary["mean_kl"] < 0.2, summary
