"""The attention as the engines run it: in the KV cache's format (never at a 4-bit peak), and, with attention
data parallelism, each GPU with its own sequences and every head (`tokometer.perf.roofline`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tokometer.cli.estimate import command as estimate
from tokometer.perf import Deployment, resolve_hardware, resolve_model
from tokometer.perf.collective import ACTIVATION_BYTES, all_reduce_s, communication
from tokometer.perf.maxload import max_load
from tokometer.perf.roofline import prefill_flops_split, prefill_s, weight_bytes_read
from tokometer.util.errors import ConfigError


@pytest.mark.parametrize(("hardware", "weights", "kv", "dtype", "tflops"), [
    ("B200", "nvfp4", "fp8", "fp8", 4500),  # fp4 matmuls, the attention on the fp8 units
    ("B200", "nvfp4", "bf16", "bf16", 2250),
    ("H100-SXM", "fp8", "fp8", "fp8", 1979),
    ("H100-SXM", "bf16", "bf16", "bf16", 989),
    ("H100-SXM", "awq", "bf16", "bf16", 989),  # weight-only: 16-bit compute throughout
    ("A100-80GB-SXM", "fp8", "fp8", "bf16", 312),  # no fp8 units: the attention in 16 bits too
])
def test_the_attention_multiplies_in_the_caches_format(hardware: str, weights: str, kv: str, dtype: str,
                                                       tflops: float) -> None:
    d = Deployment(resolve_model("llama-3.1-8b"), resolve_hardware(hardware), weights, kv)
    assert d.attention_compute_dtype == dtype and d.attention_flops == tflops * 1e12


def test_a_long_prompt_on_nvfp4_weights_runs_its_attention_at_the_fp8_peak() -> None:
    d = Deployment(resolve_model("llama-3.3-70b"), resolve_hardware("B200"), "nvfp4", "fp8")
    matmuls, attention = prefill_flops_split(d.model, 20_000)
    assert attention > 0.1 * matmuls  # 20,000 tokens: the causal pairs weigh
    assert prefill_s(d, 20_000) == pytest.approx(matmuls / 9000e12 + attention / 4500e12, rel=1e-12)


def _qwen235(attention_dp: bool) -> Deployment:
    return Deployment(resolve_model("qwen3-235b-a22b"), resolve_hardware("H200"), "fp8", "fp8", tp=8,
                      expert_parallel=True, attention_dp=attention_dp)


def test_attention_data_parallel_copies_the_rest_and_splits_the_sequences() -> None:
    tp, dp = _qwen235(False), _qwen235(True)
    m = dp.model
    assert dp.ranks == 8 and tp.ranks == 1
    # memory: the weights outside the routed experts whole on every GPU, the experts split
    assert dp.weight_bytes_per_gpu == pytest.approx(dp.other_weight_bytes + dp.expert_weight_bytes / 8)
    assert tp.weight_bytes_per_gpu == pytest.approx(tp.weight_bytes / 8)
    # KV: 4 KV heads over 8 GPUs are copied twice under TP (⌈4 / 8⌉ = 1 a GPU); with attention DP each GPU
    # holds its own sequences' every head, 1/8 of the whole: 2 × 94 × 4 × 128 × 1 B / 8 = 12,032 B a token
    assert tp.kv_bytes_per_token_per_gpu == 2 * 94 * 1 * 128
    assert dp.kv_bytes_per_token_per_gpu == 2 * 94 * 4 * 128 / 8 == 12_032
    # a step's bytes: every GPU reads the rest whole (W_read counts it 8 times, so / TP is one GPU's)
    assert weight_bytes_read(dp, 1) - weight_bytes_read(tp, 1) == pytest.approx(7 * dp.other_weight_bytes)
    # communication: no attention all-reduce; a gather before and a scatter after each experts' layer
    c = communication(dp, 100)
    ring = 2 * 7 / 8 * 100 * m.hidden * ACTIVATION_BYTES
    assert (c.kind, c.collectives) == ("all-gather + reduce-scatter", 2 * m.layers)
    assert c.bytes_per_gpu == pytest.approx(m.layers * ring)
    # each gather or scatter moves half an all-reduce's bytes: timed as an all-reduce of half the message
    assert c.message_bytes == 100 * m.hidden * ACTIVATION_BYTES / 2
    assert c.seconds == pytest.approx(2 * m.layers * all_reduce_s(c.message_bytes, 8, 900))
    assert "attention DP 8" in dp.describe()


def test_the_batch_limit_is_each_ranks() -> None:
    tp, dp = _qwen235(False), _qwen235(True)
    assert (load := max_load(tp, 100, 100, max_batch=16)) is not None and load.batch == 16
    assert (load := max_load(dp, 100, 100, max_batch=16)) is not None and load.batch == 128
    assert load.limited_by == "batch limit"


def test_attention_data_parallel_needs_a_mixture_of_experts(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a mixture of experts"):
        Deployment(resolve_model("llama-3.1-8b"), resolve_hardware("H100"), tp=2, attention_dp=True)
    out = tmp_path / "e.json"
    runner = CliRunner(env={"COLUMNS": "200"})
    done = runner.invoke(estimate, ["-m", "qwen3-235b-a22b", "-H", "H200", "--dtype", "fp8", "--tp", "8", "--ep",
                                    "--attention-dp", "-b", "64", "--json", str(out)])
    assert done.exit_code == 0, done.output
    assert "attention DP 8" in done.output and "all-gather + reduce-scatter a layer" in done.output
    payload = json.loads(out.read_text())["estimate"]
    assert payload["attention_dp"] is True and payload["kv_bytes_per_token_per_gpu"] == 12_032
    refused = runner.invoke(estimate, ["-m", "llama-3.1-8b", "-H", "H100-SXM", "--tp", "2", "--attention-dp"])
    assert isinstance(refused.exception, ConfigError)  # the entry point makes it one line and exit status 2
    assert "--attention-dp" in str(refused.exception)
