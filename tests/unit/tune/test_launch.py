"""What a failed start quotes of the engine's log, and the vLLM plans a variant's settings make (the starts
themselves: tests/integration/test_tune_launch.py, tests/vllm/test_tune_vllm.py)."""

from __future__ import annotations

import json
from pathlib import Path

from tokometer.tune.launch import LAST_WORDS_LINE_CHARS, LAST_WORDS_LINES, LaunchOptions, _vllm_plan, last_words
from tokometer.tune.settings import engine_settings


def test_the_last_words_are_the_logs_last_lines_after_the_error_line_before_them() -> None:
    usage = "\n".join(f"  --flag-{i} N   what flag {i} does" for i in range(30))
    log = f'error while handling argument "--cache-type-k": Unsupported cache type: q9\n\nusage:\n{usage}\n\n'
    words = last_words(log).splitlines()
    assert words[0] == 'error while handling argument "--cache-type-k": Unsupported cache type: q9'
    assert words[-1] == "  --flag-29 N   what flag 29 does"
    assert len(words) <= LAST_WORDS_LINES and "" not in words


def test_the_last_words_of_a_short_or_empty_log_are_all_of_it() -> None:
    assert last_words("error: invalid argument: --no-such-flag\n") == "error: invalid argument: --no-such-flag"
    assert last_words("") == ""
    assert last_words("a\nb\nc", lines=1) == "c"


def test_a_long_line_is_cut() -> None:
    words = last_words("x" * 10_000)
    assert len(words) == LAST_WORDS_LINE_CHARS + 1 and words.endswith("…")


def test_a_second_start_is_timed_by_default_for_llamacpp_only() -> None:
    assert LaunchOptions().times_second_start
    assert not LaunchOptions(engine="vllm").times_second_start
    assert LaunchOptions(engine="vllm", second_start=True).times_second_start
    assert not LaunchOptions(second_start=False).times_second_start


def _llama_dir(tmp_path: Path) -> Path:
    """A checkpoint directory shaped like Llama 3.1 8B (its config and its safetensors' size)."""
    config = {"hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 32,
              "max_position_embeddings": 131072, "torch_dtype": "bfloat16", "vocab_size": 128256,
              "intermediate_size": 14336}
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 16_060_000_000}}))
    return tmp_path


def test_a_vllm_variant_on_a_gpu_is_planned_by_the_gpu_planner_with_its_settings(tmp_path: Path) -> None:
    # No GPU here: the plan for a stated 80 GiB GPU is what a start would run (the start itself is not tested).
    mapped = engine_settings("vllm", {"model": str(_llama_dir(tmp_path)), "kv-cache-dtype": "fp8",
                                      "gpu-memory-utilization": "0.8", "max-model-len": "8192",
                                      "max-num-seqs": "8"}, device="gpu")
    keywords = dict(mapped.keywords)
    model = str(keywords.pop("model"))
    plan = _vllm_plan(model, None, keywords, mapped.argv,
                      LaunchOptions(engine="vllm", device="gpu", gpu_memory_gb=80))
    argv = plan.argv
    assert argv[2] == model and plan.fits and plan.device == "gpu"
    for flag, value in (("--gpu-memory-utilization", "0.80"), ("--max-model-len", "8192"),
                        ("--kv-cache-dtype", "fp8"), ("--max-num-seqs", "8")):
        assert argv[argv.index(flag) + 1] == value
    assert argv[argv.index("--port") + 1] != "8000"  # a free port


def test_a_vllm_variant_on_the_cpu_sizes_its_kv_cache_from_its_setting(tmp_path: Path) -> None:
    mapped = engine_settings("vllm", {"kv-cache-gb": "2", "max-model-len": "4096", "kv-cache-dtype": "fp8"})
    plan = _vllm_plan(str(_llama_dir(tmp_path)), "served", dict(mapped.keywords), mapped.argv,
                      LaunchOptions(engine="vllm"))
    assert plan.env["VLLM_CPU_KVCACHE_SPACE"] == "2" and plan.max_model_len == 4096
    assert plan.argv[-2:] == ["--kv-cache-dtype", "fp8"] and "--served-model-name" in plan.argv
