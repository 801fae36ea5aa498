"""The settings a tune varies: known names checked before anything starts, mapped onto the launcher's keywords or
the engine's flags, unknown names passed through as ``--name value``."""

from __future__ import annotations

import string
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tokometer.tune.settings import (
    GGUF_TYPES,
    MAX_VALUE_CHARS,
    check_settings,
    engine_settings,
    known_settings,
)
from tokometer.util.errors import ConfigError
from tokometer.util.limits import MAX_CONCURRENCY, MAX_THREADS, MAX_TOKENS


def _refusal(engine: str, given_settings: dict[str, str]) -> str:
    with pytest.raises(ConfigError) as caught:
        check_settings(engine, given_settings)
    message = str(caught.value)
    assert "\n" not in message and message
    return message


@pytest.fixture
def gguf(tmp_path: Path) -> Path:
    path = tmp_path / "other.gguf"
    path.write_bytes(b"GGUF" + bytes(60))
    return path


def test_llamacpp_settings_map_onto_the_launchers_fields_and_the_servers_flags() -> None:
    mapped = engine_settings("llamacpp", {
        "parallel": "2", "ctx-size": "8192", "threads": "3", "batch-size": "512", "ubatch-size": "128",
        "flash-attn": "on", "cache-type-k": "Q8_0", "cache-type-v": "q4_0", "cont-batching": "false",
        "threads-batch": "2", "quantization": "q2_k"})
    assert mapped.keywords == {"parallel": 2, "ctx_size": 8192, "threads": 3, "quantization": "Q2_K"}
    assert mapped.argv == ("--batch-size", "512", "--ubatch-size", "128", "--flash-attn", "on",
                           "--cache-type-k", "q8_0", "--cache-type-v", "q4_0", "--no-cont-batching",
                           "--threads-batch", "2")


@pytest.mark.parametrize(("text", "flag"), [("on", "on"), ("OFF", "off"), ("auto", "auto"), ("true", "on"),
                                            ("False", "off")])
def test_flash_attention_takes_llamacpps_words_and_booleans(text: str, flag: str) -> None:
    assert engine_settings("llamacpp", {"flash-attn": text}).argv == ("--flash-attn", flag)


def test_a_model_file_is_the_launchers_model_path(gguf: Path) -> None:
    assert engine_settings("llamacpp", {"model": str(gguf)}).keywords == {"model_path": gguf}


def test_vllm_settings_on_its_cpu_build_map_onto_the_cpu_planner_and_flags() -> None:
    mapped = engine_settings("vllm", {
        "max-num-seqs": "2", "max-num-batched-tokens": "1024", "enable-chunked-prefill": "off",
        "enable-prefix-caching": "on", "max-model-len": "2048", "kv-cache-gb": "1.5", "dtype": "BFloat16",
        "kv-cache-dtype": "fp8", "gpu-memory-utilization": "0.5"})
    assert mapped.keywords == {"max_model_len": 2048, "kv_cache_gib": 1.5}
    assert mapped.argv == ("--max-num-seqs", "2", "--max-num-batched-tokens", "1024", "--no-enable-chunked-prefill",
                           "--enable-prefix-caching", "--dtype", "bfloat16", "--kv-cache-dtype", "fp8",
                           "--gpu-memory-utilization", "0.5")


def test_vllm_settings_on_a_gpu_are_the_gpu_planners_keywords() -> None:
    mapped = engine_settings("vllm", {"kv-cache-dtype": "fp8", "gpu-memory-utilization": "0.85",
                                      "tensor-parallel-size": "2", "quantization": "awq", "max-model-len": "4096"},
                             device="gpu")
    assert mapped.keywords == {"kv_cache_dtype": "fp8", "gpu_memory_utilization": 0.85, "tensor_parallel_size": 2,
                               "quantization": "awq", "max_model_len": 4096}
    assert mapped.argv == ()


def test_a_vllm_model_is_an_existing_checkpoint(tmp_path: Path) -> None:
    assert engine_settings("vllm", {"model": str(tmp_path)}).keywords == {"model": tmp_path}
    assert "model takes an existing checkpoint" in _refusal("vllm", {"model": str(tmp_path / "none")})


def test_unknown_names_pass_through_as_the_engines_own_flags() -> None:
    mapped = engine_settings("llamacpp", {"parallel": "1", "no-mmap": "", "n-predict": "-1", "rope-scale": "0.5",
                                          "override-kv": "a=int:1"})
    assert mapped.argv == ("--no-mmap", "--n-predict", "-1", "--rope-scale", "0.5", "--override-kv", "a=int:1")
    assert engine_settings("vllm", {"enforce-eager": ""}).argv == ("--enforce-eager",)


@pytest.mark.parametrize(("engine", "name", "value", "allowed"), [
    ("llamacpp", "parallel", "0", f"a whole number from 1 to {MAX_CONCURRENCY}"),
    ("llamacpp", "parallel", "2.5", "a whole number"),
    ("llamacpp", "parallel", "+2", "a whole number"),
    ("llamacpp", "parallel", " 2", "a whole number"),
    ("llamacpp", "parallel", "\u0663", "a whole number"),  # an Arabic-Indic three: int() reads it, tune does not
    ("llamacpp", "parallel", "1" * 30, "a whole number"),
    ("llamacpp", "ctx-size", str(MAX_TOKENS + 1), f"from 1 to {MAX_TOKENS}"),
    ("llamacpp", "threads", str(MAX_THREADS + 1), f"from 1 to {MAX_THREADS}"),
    ("llamacpp", "batch-size", "", "a whole number"),
    ("llamacpp", "flash-attn", "yes", "one of on, off, auto"),
    ("llamacpp", "cache-type-k", "q9_0", "one of f32, f16"),
    ("llamacpp", "cont-batching", "1", "on, off, true or false"),
    ("llamacpp", "quantization", "Q9_K", "a type llama-quantize knows"),
    ("llamacpp", "quantization", "COPY", "a type llama-quantize knows"),
    ("llamacpp", "model", "/no/such/model.gguf", "an existing GGUF model file"),
    ("vllm", "max-num-seqs", "-1", "a whole number from 1"),
    ("vllm", "enable-chunked-prefill", "enabled", "on, off, true or false"),
    ("vllm", "gpu-memory-utilization", "1", "a number from 0.05 to 0.99"),
    ("vllm", "gpu-memory-utilization", "nan", "a number from 0.05 to 0.99"),
    ("vllm", "kv-cache-gb", "0", "a number above 0"),
    ("vllm", "kv-cache-gb", "1e3", "a number above 0"),
    ("vllm", "kv-cache-dtype", "int3", "one of auto, bfloat16, float16, fp8, fp8_e4m3, fp8_e5m2, nvfp4"),
    ("vllm", "dtype", "fp4", "one of auto, bfloat16"),
    ("vllm", "quantization", "Q8_0", "one of fp8, awq, gptq"),
])
def test_a_known_setting_outside_what_it_takes_is_refused_naming_it_the_value_and_what_is_allowed(
        engine: str, name: str, value: str, allowed: str) -> None:
    message = _refusal(engine, {name: value})
    assert f"setting {name}={value!r} is not allowed" in message
    assert allowed in message


def test_a_file_that_is_not_gguf_is_not_a_llamacpp_model(tmp_path: Path) -> None:
    other = tmp_path / "model.gguf"
    other.write_bytes(b"PK\x03\x04")
    assert "an existing GGUF model file" in _refusal("llamacpp", {"model": str(other)})
    assert "an existing GGUF model file" in _refusal("llamacpp", {"model": str(tmp_path)})


def test_a_context_too_small_for_the_slots_is_refused_as_the_launcher_would() -> None:
    message = _refusal("llamacpp", {"parallel": "8", "ctx-size": "1024"})
    assert "ctx-size 1024 is too small for 8 slots" in message and "256 tokens per slot" in message
    assert "for 4 slots" in _refusal("llamacpp", {"ctx-size": "512"})  # the launcher's default slots
    check_settings("llamacpp", {"parallel": "2", "ctx-size": "512"})


@pytest.mark.parametrize(("name", "hint"), [("ctx_size", "write ctx-size"), ("--ctx-size", "write ctx-size"),
                                            ("Ctx-Size", "write ctx-size"), ("ctx size", "e.g. ctx-size"),
                                            ("", "e.g. ctx-size"), ("a" * 65, "e.g. ctx-size")])
def test_a_name_not_spelled_as_a_flag_without_dashes_is_refused_with_the_spelling_to_use(name: str,
                                                                                          hint: str) -> None:
    message = _refusal("llamacpp", {name: "4096"})
    assert "is not allowed" in message and hint in message


@pytest.mark.parametrize(("engine", "name"), [("llamacpp", "port"), ("llamacpp", "host"), ("llamacpp", "alias"),
                                              ("vllm", "port"), ("vllm", "served-model-name"),
                                              ("vllm", "device-memory-utilization")])
def test_what_tune_sets_itself_cannot_be_set(engine: str, name: str) -> None:
    assert f"setting {name} is not allowed" in _refusal(engine, {name: "1"})


def test_the_negative_of_a_known_switch_is_written_as_the_switch_off() -> None:
    assert "write enable-prefix-caching=off" in _refusal("vllm", {"no-enable-prefix-caching": ""})
    assert "write cont-batching=off" in _refusal("llamacpp", {"no-cont-batching": ""})


@pytest.mark.parametrize("value", ["--port=9", "--host", "-p", "x\ny", "a\x00b", "tab\there"])
def test_a_passed_through_value_cannot_smuggle_another_flag_or_a_control_character(value: str) -> None:
    assert "is not allowed" in _refusal("vllm", {"some-flag": value})


def test_a_value_is_bounded_in_length() -> None:
    assert f"at most {MAX_VALUE_CHARS} characters" in _refusal("llamacpp", {"chat-template": "x" * 5000})


def test_only_the_engines_tune_knows_have_settings() -> None:
    assert "not of 'ollama'" in _refusal("ollama", {})
    assert set(known_settings("llamacpp")) >= {"parallel", "ctx-size", "batch-size", "ubatch-size", "flash-attn",
                                               "threads", "cache-type-k", "cache-type-v", "model", "quantization"}
    assert set(known_settings("vllm")) >= {"max-num-seqs", "max-num-batched-tokens", "enable-chunked-prefill",
                                           "enable-prefix-caching", "kv-cache-dtype", "gpu-memory-utilization",
                                           "max-model-len", "model", "quantization", "dtype"}


def test_the_quantisation_types_are_upper_case_and_unique() -> None:
    assert len(set(GGUF_TYPES)) == len(GGUF_TYPES) and all(t == t.upper() for t in GGUF_TYPES)


_NAMES = st.sampled_from(["parallel", "ctx-size", "flash-attn", "cache-type-k", "quantization", "cont-batching",
                          "max-num-seqs", "kv-cache-gb", "enable-prefix-caching", "gpu-memory-utilization",
                          "rope-scale", "no-mmap", "port", "ctx_size"]) | st.text(string.ascii_letters + "-_ ",
                                                                                   max_size=12)
_VALUES = st.text(max_size=24) | st.sampled_from(["1", "0", "2048", "on", "off", "Q8_0", "auto", "-1", "0.5", ""])


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(engine=st.sampled_from(["llamacpp", "vllm"]), given_settings=st.dictionaries(_NAMES, _VALUES, max_size=4))
def test_any_setting_text_is_either_mapped_or_refused_in_one_line(engine: str,
                                                                  given_settings: dict[str, str]) -> None:
    try:
        mapped = engine_settings(engine, given_settings)
    except ConfigError as exc:
        message = str(exc)
        assert "\n" not in message and ("not allowed" in message or "too small" in message)
        return
    known = known_settings(engine)
    for item in mapped.argv:
        assert all(ord(char) >= 32 for char in item)
    flags = [item for item in mapped.argv if item.startswith("--")]
    passed = [name for name in given_settings if name not in known]
    assert all(f"--{name}" in flags for name in passed)
    assert not any(flag in ("--port", "--host") for flag in flags)
    for name, value in mapped.keywords.items():
        if isinstance(value, int) and not isinstance(value, bool):
            assert 1 <= value <= MAX_TOKENS, name
