"""The vLLM plan: flags, the arithmetic behind them (checked by hand here), and the dry-run CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tokometer.cli.serve import command as serve
from tokometer.engines.archs import resolve_arch
from tokometer.engines.gpus import GpuInfo, gpu_for_planning
from tokometer.engines.vllm import plan_vllm
from tokometer.errors import EngineError

GIB = 2**30


def _gpu(gib: float) -> GpuInfo:
    return gpu_for_planning(gib)


def test_llama_8b_on_80gb() -> None:
    plan = plan_vllm("llama-3.1-8b", _gpu(80))
    # By hand: usable = 0.90 × 80 GiB = 77,309,411,328 B; weights = 8.03e9 × 2 B = 16,060,000,000 B;
    # reserve = 2 GiB = 2,147,483,648 B; KV budget = 59,101,927,680 B.
    # KV per token = 2 × 32 layers × 8 heads × 128 × 2 B = 131,072 B (128 KiB).
    # capacity = 59,101,927,680 // 131,072 = 450,911 tokens > 131,072 (model max) -> 131,072.
    assert plan.kv_capacity_tokens == 450_911
    assert plan.max_model_len == 131_072
    assert plan.fits
    assert plan.argv == ["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--host", "127.0.0.1", "--port", "8000",
                         "--gpu-memory-utilization", "0.90", "--max-model-len", "131072",
                         "--tensor-parallel-size", "1"]
    why = dict(plan.reasons)
    assert "0.90 × 80.00 GiB = 72.00 GiB" in why["--gpu-memory-utilization 0.90"]
    assert why["weights"] == "8.03 B params × 2 B (bfloat16) = 14.96 GiB"
    assert why["KV budget"] == "72.00 GiB − 14.96 GiB − 2.00 GiB = 55.04 GiB per GPU"
    assert "2 (K and V) × 32 layers × 8 KV heads × 128 head dim × 2 B = 131,072 B = 128.0 KiB" in why["KV per token"]
    assert why["KV capacity"].endswith("= 450,911 tokens")
    assert "min(model's max context 131,072, 450,911 rounded down to a multiple of 256 = 450,816) = 131,072" in (
        why["--max-model-len 131072"])
    assert "3.4 sequences" in why["--max-model-len 131072"]  # 450,911 / 131,072
    assert plan.verdict.startswith("fits")
    text = plan.explain()
    assert text.splitlines()[0].startswith("vllm serve meta-llama/Llama-3.1-8B-Instruct")
    assert "why:" in text and "CUDA" in text


def test_llama_8b_on_24gb_is_limited_by_the_kv_cache() -> None:
    plan = plan_vllm("meta-llama/Llama-3.1-8B-Instruct", _gpu(24))
    # usable = int(0.90 × 24 GiB) = 23,192,823,398 B; budget = 23,192,823,398 − 16,060,000,000 − 2,147,483,648
    # = 4,985,339,750 B; capacity = 4,985,339,750 // 131,072 = 38,035; rounded to 256: 148 × 256 = 37,888.
    assert plan.kv_capacity_tokens == 38_035
    assert plan.max_model_len == 37_888
    assert plan.fits
    assert "--max-model-len" in plan.argv and plan.argv[plan.argv.index("--max-model-len") + 1] == "37888"


def test_llama_8b_does_not_fit_16gb() -> None:
    plan = plan_vllm("llama-3.1-8b", _gpu(16))
    # usable = 0.90 × 16 GiB = 14.40 GiB < weights 14.96 GiB alone.
    assert not plan.fits
    assert plan.kv_capacity_tokens == 0
    assert plan.verdict.startswith("does not fit")
    assert "CUDA out of memory" in plan.verdict
    assert "--tensor-parallel-size 2" in plan.verdict  # 7.48 GiB of weights per GPU would fit
    assert "lower-bit quantisation" in plan.verdict
    assert "stopping other GPU processes" in plan.verdict


def test_max_model_len_too_large_for_the_cache() -> None:
    plan = plan_vllm("qwen2.5-7b", _gpu(24), max_model_len=200_000)
    # KV per token = 2 × 28 × 4 × 128 × 2 = 57,344 B; budget = 23,192,823,398 − 7.62e9 × 2 − 2 GiB = 5,805,339,750 B
    # capacity = 5,805,339,750 // 57,344 = 101,237 tokens < 200,000.
    assert plan.kv_capacity_tokens == 101_237
    assert not plan.fits
    assert "use --max-model-len 101,120 or less" in plan.verdict


def test_tensor_parallel_splits_weights_and_kv_heads() -> None:
    plan = plan_vllm("llama-3.1-70b", _gpu(80), tensor_parallel_size=4)
    # weights per GPU = 70.55e9 × 2 / 4 = 35,275,000,000 B; budget = 77,309,411,328 − 35,275,000,000 − 2 GiB
    # = 39,886,927,680 B; KV per token per GPU = 2 × 80 × (8 / 4) × 128 × 2 = 81,920 B -> 486,901 tokens.
    assert plan.kv_capacity_tokens == 39_886_927_680 // 81_920
    assert plan.max_model_len == 131_072 and plan.fits


def test_fp8_quantisation_and_kv_cache() -> None:
    plan = plan_vllm("llama-3.1-8b", _gpu(16), quantization="fp8", kv_cache_dtype="fp8")
    # weights = 8.03e9 × 1 B; budget = int(0.9 × 16 GiB) − 8.03e9 − 2 GiB = 5,284,398,617 B; KV/token = 65,536 B.
    assert plan.kv_capacity_tokens == (int(0.9 * 16 * GIB) - 8_030_000_000 - 2 * GIB) // 65_536
    assert plan.fits
    assert plan.argv[-4:] == ["--quantization", "fp8", "--kv-cache-dtype", "fp8"]


def test_local_config_dir(tmp_path: Path) -> None:
    config = {"hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 32,
              "max_position_embeddings": 131072, "torch_dtype": "bfloat16", "vocab_size": 128256,
              "intermediate_size": 14336}
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 16_060_000_000}}))
    arch = resolve_arch(str(tmp_path))
    assert (arch.layers, arch.kv_heads, arch.head_dim, arch.max_context) == (32, 8, 128, 131072)
    assert arch.weight_bytes == 16_060_000_000
    plan = plan_vllm(str(tmp_path), _gpu(80))
    assert plan.kv_capacity_tokens == 450_911  # same numbers as the built-in Llama-3.1-8B
    assert plan.argv[2] == str(tmp_path)


def test_unknown_model_and_bad_options() -> None:
    with pytest.raises(EngineError, match="unknown model"):
        resolve_arch("./no/such/model-xyz")
    with pytest.raises(EngineError, match="gpu-memory-utilization"):
        plan_vllm("llama-3.1-8b", _gpu(80), gpu_memory_utilization=1.5)
    with pytest.raises(EngineError, match="gpu-memory-gb"):
        gpu_for_planning(0)


def test_dry_run_cli() -> None:
    runner = CliRunner()
    result = runner.invoke(serve, ["--engine", "vllm", "--model", "llama-3.1-8b", "--gpu-memory-gb", "80",
                                   "--dry-run"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("vllm serve meta-llama/Llama-3.1-8B-Instruct --host 127.0.0.1 --port 8000 "
                                    "--gpu-memory-utilization 0.90 --max-model-len 131072 --tensor-parallel-size 1\n")
    assert "KV capacity" in result.output and "fits:" in result.output
    small = runner.invoke(serve, ["--engine", "vllm", "--model", "llama-3.1-8b", "--gpu-memory-gb", "16",
                                  "--dry-run"])
    assert small.exit_code == 1
    assert "does not fit" in small.output
