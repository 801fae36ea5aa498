"""ModelSpec from the built-in table, config.json and GGUF headers; names and their errors."""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path

import pytest

from tokometer.perf import resolve_model
from tokometer.perf.catalog import BUILTIN_MODELS
from tokometer.perf.loaders import model_from_config, model_from_gguf
from tokometer.util.errors import ConfigError

LLAMA_8B_CONFIG = {"hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 32,
                   "max_position_embeddings": 131072, "torch_dtype": "bfloat16", "vocab_size": 128256,
                   "intermediate_size": 14336, "tie_word_embeddings": False}


@pytest.mark.parametrize("name", ["llama-3.1-8b", "Llama-3.1-8B-Instruct", "meta-llama/Llama-3.1-8B-Instruct",
                                  "llama3.1:8b", "LLAMA_3.1_8B"])
def test_spellings_of_one_model(name: str) -> None:
    assert resolve_model(name) is BUILTIN_MODELS["llama-3.1-8b"]


def test_unknown_model_lists_close_matches() -> None:
    with pytest.raises(ConfigError, match=r"unknown model 'llama-3.1-9b': did you mean .*llama-3.1-8b"):
        resolve_model("llama-3.1-9b")
    with pytest.raises(ConfigError, match=r"did you mean qwen2.5-7b"):
        resolve_model("qwen2.5-7")
    with pytest.raises(ConfigError, match=r"built-in names: llama-3\.1-8b"):
        resolve_model("zzzz")
    with pytest.raises(ConfigError, match="no GGUF file"):
        resolve_model("/no/such/model.gguf")


def _config_of(name: str) -> dict[str, object]:
    m = BUILTIN_MODELS[name]
    cfg: dict[str, object] = {
        "hidden_size": m.hidden, "num_attention_heads": m.heads, "num_key_value_heads": m.kv_heads,
        "num_hidden_layers": m.layers, "vocab_size": m.vocab, "intermediate_size": m.intermediate,
        "head_dim": m.head_dim, "tie_word_embeddings": m.tied_embeddings}
    if m.experts:
        cfg.update(num_local_experts=m.experts, num_experts_per_tok=m.experts_per_token)
    return cfg


# the mixtures of experts of 2025 need their own configs' MoE fields: test_perf_moe_models.py checks them (and
# test_perf_recurrent_layers.py Qwen3-Next's and Nemotron 3 Nano's, with their recurrent layers' fields)
@pytest.mark.parametrize("name", [n for n in BUILTIN_MODELS
                                  if not n.startswith(("deepseek", "gemma-3-4b", "gemma-3-12b", "gemma-3-27b",
                                                       "gpt-oss", "qwen3-30b", "qwen3-235b", "llama-4", "kimi",
                                                       "qwen3-next", "nemotron", "glm-4.", "minimax",
                                                       "qwen3-coder"))])
def test_builtin_shapes_add_up_to_the_published_parameter_counts(name: str) -> None:
    # a typo in a shape shows up here; the published counts also hold norms and biases (< 2 %)
    m = BUILTIN_MODELS[name]
    counted = model_from_config(_config_of(name), name)
    assert counted.params == pytest.approx(m.params, rel=0.02)
    assert counted.active == pytest.approx(m.active, rel=0.02)


def test_config_json_dir_with_safetensors_size(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(LLAMA_8B_CONFIG))
    m = resolve_model(str(tmp_path))
    # shapes: 32 × (2·4096·32·128 + 2·4096·8·128 + 3·4096·14336) + 2 × 128,256 × 4096 = 8,029,995,008
    assert m.params == 8_029_995_008
    assert (m.layers, m.kv_heads, m.head_dim, m.vocab, m.max_context) == (32, 8, 128, 128256, 131072)
    assert m.native_dtype == "bf16" and m.weight_bytes is None
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 16_060_000_000}}))
    exact = resolve_model(str(tmp_path / "config.json"))
    assert exact.weight_bytes == 16_060_000_000 and exact.params == pytest.approx(8.03e9)
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ConfigError, match=r"config\.json: not JSON"):
        resolve_model(str(tmp_path))


def test_moe_and_mla_configs() -> None:
    mixtral = model_from_config({**LLAMA_8B_CONFIG, "vocab_size": 32000, "num_local_experts": 8,
                                 "num_experts_per_tok": 2}, "mixtral")
    assert mixtral.params == pytest.approx(46.70e9, rel=0.01) and mixtral.active == pytest.approx(12.88e9, rel=0.02)
    deepseek = model_from_config({
        "hidden_size": 7168, "num_attention_heads": 128, "num_key_value_heads": 128, "num_hidden_layers": 61,
        "vocab_size": 129280, "intermediate_size": 18432, "moe_intermediate_size": 2048, "n_routed_experts": 256,
        "n_shared_experts": 1, "num_experts_per_tok": 8, "first_k_dense_replace": 3, "q_lora_rank": 1536,
        "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128,
        "max_position_embeddings": 163840, "quantization_config": {"quant_method": "fp8"}}, "deepseek")
    assert deepseek.params == pytest.approx(671e9, rel=0.01)
    assert deepseek.active == pytest.approx(37e9, rel=0.02)
    assert deepseek.kv_elements_per_token == 61 * (512 + 64) and deepseek.native_dtype == "fp8"
    with pytest.raises(ConfigError, match="lacks a field"):
        model_from_config({"hidden_size": 64}, "broken")


@pytest.mark.parametrize(("key", "value", "shown"), [
    ("hidden_size", True, "true"), ("num_hidden_layers", 32.5, "32.5"), ("num_key_value_heads", "8", "'8'"),
    ("intermediate_size", [14336], "[14336]"), ("vocab_size", float("nan"), "nan"),
    ("num_local_experts", {"n": 8}, "{'n': 8}")])
def test_a_count_that_is_not_a_whole_number_is_refused_by_name(key: str, value: object, shown: str) -> None:
    """A count in config.json is a JSON whole number: true, 32.5 or "8" is refused naming the field and the value
    (int() would have read them as 1, 32 and 8), and so is one in a multimodal config's text_config."""
    with pytest.raises(ConfigError, match=rf"{key} must be a whole number \(got {re.escape(shown)}\)"):
        model_from_config({**LLAMA_8B_CONFIG, key: value}, "hostile")
    with pytest.raises(ConfigError, match=rf"{key} must be a whole number"):
        model_from_config({"text_config": {**LLAMA_8B_CONFIG, key: value}}, "hostile")
    whole = model_from_config({**LLAMA_8B_CONFIG, "num_hidden_layers": 32.0}, "whole")  # 32.0 is a whole number
    assert whole.layers == 32


_DEEPSEEK_LIKE = {**LLAMA_8B_CONFIG, "model_type": "deepseek_v3", "n_routed_experts": 64, "num_experts_per_tok": 6,
                  "moe_intermediate_size": 1408, "first_k_dense_replace": 1}


@pytest.mark.parametrize(("key", "value"), [
    ("first_k_dense_replace", -3), ("first_k_dense_replace", -(2**70)), ("interleave_moe_layer_step", -2),
    ("moe_intermediate_size", -1408), ("num_local_experts", -8)])
def test_a_negative_count_is_refused_by_name_before_layers_are_counted_from_it(key: str, value: int) -> None:
    """A count is not negative: a first_k_dense_replace of -2**70 once made a set of 2**70 layer numbers (the
    process was killed for memory); now one error naming the field, at once."""
    with pytest.raises(ConfigError, match=rf"{key} must not be negative"):
        model_from_config({**_DEEPSEEK_LIKE, key: value}, "hostile")


def test_a_huge_layer_count_is_refused_before_the_layers_are_counted() -> None:
    with pytest.raises(ConfigError, match="num_hidden_layers must be from 1 to"):
        model_from_config({**_DEEPSEEK_LIKE, "num_hidden_layers": 10**15}, "hostile")


def test_a_first_dense_count_past_the_layers_makes_every_layer_dense_and_minus_one_is_no_window() -> None:
    dense = model_from_config({**_DEEPSEEK_LIKE, "first_k_dense_replace": 10**12}, "all dense")
    assert dense.params == pytest.approx(model_from_config({**_DEEPSEEK_LIKE, "first_k_dense_replace": 32}, "x").params)
    assert model_from_config({**LLAMA_8B_CONFIG, "sliding_window": -1}, "no window").sliding_window == 0


def test_a_count_out_of_range_is_quoted_short() -> None:
    with pytest.raises(ConfigError, match=r"num_hidden_layers must be from 1 to 16,777,216 \(got 1e\+308\)\)$"):
        model_from_config({**LLAMA_8B_CONFIG, "num_hidden_layers": 1e308}, "huge")


@pytest.mark.parametrize("key", ["intermediate_size", "shared_expert_intermediate_size", "q_lora_rank",
                                 "experts_per_token", "vocab_size"])
def test_a_width_past_its_bound_is_refused_before_it_is_multiplied(key: str) -> None:
    """A width of 1e300 had given 1.1e307 parameters (finite) and an infinite step time from them (found by the
    fuzz suite's thorough profile)."""
    with pytest.raises(ConfigError, match=rf"{key} must be at most 16,777,216 \(got 1e\+300\)"):
        model_from_config({**LLAMA_8B_CONFIG, key: 1e300}, "wide")


def test_more_experts_a_token_than_experts_is_said_so() -> None:
    """Nine of eight experts a token had been refused as 'its shapes give ... of them active (at most 1e+14)'."""
    with pytest.raises(ConfigError, match=r"num_experts_per_tok \(9\) is more than the model's 8 routed experts"):
        model_from_config({**LLAMA_8B_CONFIG, "num_local_experts": 8, "num_experts_per_tok": 9}, "greedy")


def test_shapes_within_their_bounds_that_give_past_100_t_parameters_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"its shapes give .* parameters, .* of them active \(at most 1e\+14\)"):
        model_from_config({**LLAMA_8B_CONFIG, "hidden_size": 1 << 24, "vocab_size": 1 << 24}, "vast")


def _gguf_string(text: str) -> bytes:
    raw = text.encode()
    return struct.pack("<Q", len(raw)) + raw


def _write_gguf(path: Path, arch: str = "llama", blocks: int = 2,
                extra: tuple[tuple[str, int, bytes], ...] = ()) -> None:
    kv = [("general.architecture", 8, _gguf_string(arch)), ("general.name", 8, _gguf_string("tiny")),
          (f"{arch}.block_count", 4, struct.pack("<I", blocks)), (f"{arch}.embedding_length", 4, struct.pack("<I", 64)),
          (f"{arch}.attention.head_count", 4, struct.pack("<I", 4)),
          (f"{arch}.attention.head_count_kv", 4, struct.pack("<I", 2)),
          (f"{arch}.context_length", 4, struct.pack("<I", 2048)), ("general.file_type", 4, struct.pack("<I", 15)),
          ("tokenizer.ggml.tokens", 9, struct.pack("<IQ", 8, 3) + b"".join(_gguf_string(t) for t in "abc")),
          *((f"{arch}.{key}", kind, value) for key, kind, value in extra)]
    tensors = [("token_embd.weight", (64, 100)), ("blk.0.attn_q.weight", (64, 64)), ("blk.1.ffn_up.weight", (64, 32))]
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kv))
    for key, kind, value in kv:
        out += _gguf_string(key) + struct.pack("<I", kind) + value
    for name, dims in tensors:
        out += _gguf_string(name) + struct.pack("<I", len(dims)) + struct.pack(f"<{len(dims)}Q", *dims)
        out += struct.pack("<IQ", 12, 0)
    out += b"\0" * (-len(out) % 32)
    path.write_bytes(out + b"\1" * 5000)


def test_gguf_header_gives_exact_params_and_bytes(tmp_path: Path) -> None:
    path = tmp_path / "tiny-Q4_K_M.gguf"
    _write_gguf(path)
    m = resolve_model(str(path))
    assert m.params == 64 * 100 + 64 * 64 + 64 * 32  # 12,544: the sum of the tensors' elements
    assert m.weight_bytes == 5000  # the tensor data after the aligned header
    assert (m.name, m.layers, m.hidden, m.heads, m.kv_heads, m.head_dim, m.vocab) == ("tiny", 2, 64, 4, 2, 16, 100)
    assert m.tied_embeddings  # no output.weight: the LM head is the embedding table
    assert m.native_dtype == "Q4_K_M" and m.weight_bytes_for("Q4_K_M") == 5000
    assert m.weight_bytes_for("bf16") == 2 * m.params
    path.write_bytes(b"nope")
    with pytest.raises(ConfigError, match="cannot read the GGUF header"):
        model_from_gguf(path)


def test_the_bundled_gguf() -> None:
    from tokometer.engines import bundled_model_path

    m = resolve_model(str(bundled_model_path()))  # the engine extra is part of the test set-up
    # Gemma 3 270M Q4_K_M: 268,098,176 parameters, 246.6 MB of tensor data (7.36 bits per weight:
    # the 168 M-entry embedding table, which is also the LM head, is kept at higher precision)
    assert m.params == 268_098_176 and m.weight_bytes == 246_587_904
    assert (m.layers, m.hidden, m.heads, m.kv_heads, m.head_dim, m.vocab) == (18, 640, 4, 1, 256, 262144)
    # its header's window (512) on llama.cpp's Gemma 3 pattern: five layers in six, 15 of 18; the cache that
    # grows with the context is the other 3 layers', the window layers' stops at 512 tokens
    assert (m.sliding_window, m.window_layers, m.kv_layers) == (512, 15, 3)
    assert m.kv_elements_per_token == 2 * 3 * 1 * 256
    assert m.cached_layer_tokens(4096) == 3 * 4096 + 15 * 512


def _window(n: int) -> tuple[str, int, bytes]:
    return ("attention.sliding_window", 4, struct.pack("<I", n))


@pytest.mark.parametrize(("arch", "blocks", "extra", "expected"), [
    ("gemma3", 12, (_window(1024),), (1024, 10)),  # llama.cpp's default: every 6th layer full
    ("gemma2", 12, (_window(4096),), (4096, 6)),  # every other layer
    ("gpt-oss", 24, (_window(128),), (128, 12)),
    ("gemma3", 12, (_window(1024), ("attention.sliding_window_pattern", 4, struct.pack("<I", 3))), (1024, 8)),
    ("gemma3", 4, (_window(1024), ("attention.sliding_window_pattern", 9, struct.pack("<IQ", 7, 4) + b"\1\0\1\0")),
     (1024, 2)),  # one flag per layer
    ("gemma3", 12, (_window(0),), (0, 0)),  # no window: every layer full
    ("llama", 12, (_window(4096),), (0, 0)),  # llama.cpp ignores a window on an architecture without one
    ("llama4", 8, (), (8192, 6)),  # chunks of 8,192 whatever the header says, three layers in four
    ("llama4", 8, (_window(0),), (0, 0)),  # ... unless its window is 0
])
def test_a_gguf_header_s_window_layers_as_llama_cpp_reads_them(
        tmp_path: Path, arch: str, blocks: int, extra: tuple[tuple[str, int, bytes], ...],
        expected: tuple[int, int]) -> None:
    path = tmp_path / "w.gguf"
    _write_gguf(path, arch, blocks, extra)
    m = model_from_gguf(path)
    assert (m.sliding_window, m.sliding_layers) == expected


@pytest.mark.parametrize("pattern", [
    ("attention.sliding_window_pattern", 9, struct.pack("<IQ", 7, 2) + b"\1\0"),  # 2 flags for 12 layers
    ("attention.sliding_window_pattern", 8, _gguf_string("six")),
    ("attention.sliding_window_pattern", 6, struct.pack("<f", 2.5)),
])
def test_a_gguf_window_pattern_that_is_not_one_is_a_config_error(
        tmp_path: Path, pattern: tuple[str, int, bytes]) -> None:
    path = tmp_path / "w.gguf"
    _write_gguf(path, "gemma3", 12, (_window(1024), pattern))
    with pytest.raises(ConfigError, match="sliding_window_pattern"):
        model_from_gguf(path)


@pytest.mark.parametrize(("name", "base", "dtype"), [
    ("nvidia/Llama-3.3-70B-Instruct-FP4", "llama-3.3-70b", "nvfp4"),
    ("nvidia/Llama-3.1-8B-Instruct-FP8", "llama-3.1-8b", "fp8"),
    ("RedHatAI/Mistral-7B-Instruct-v0.3-FP8-dynamic", "mistral-7b", "fp8"),
    ("Qwen/Qwen3-30B-A3B-FP8", "qwen3-30b-a3b", "fp8"),
    ("hugging-quants/Meta-Llama-3.1-70B-Instruct-AWQ-INT4", None, ""),  # "AWQ-INT4": not a suffix read here
    ("Qwen/Qwen2.5-7B-Instruct-AWQ", "qwen2.5-7b", "awq"),
    ("Qwen/Qwen2.5-7B-Instruct-GPTQ-Int4", "qwen2.5-7b", "gptq"),
    ("Qwen/Qwen2.5-7B-Instruct-GPTQ-Int8", "qwen2.5-7b", "int8"),
    ("RedHatAI/Llama-3.1-8B-Instruct-quantized.w4a16", "llama-3.1-8b", "int4"),
    ("openai/gpt-oss-120b-NVFP4", "gpt-oss-120b", "nvfp4"),
    ("llama-3.1-8b-fp8", "llama-3.1-8b", "fp8"),
    ("llama-9.9-8b-fp8", None, ""),  # no such base: unknown, with what it may have meant
    ("llama-3.1-8b\x1b[2J-fp8", None, ""),  # not a name: it would be shown as given (a terminal's escape)
    ("llama-3.1-8b\u202e-fp8", None, ""),
])
def test_a_quantised_checkpoints_name_takes_its_base_row_in_its_format(monkeypatch: pytest.MonkeyPatch, name: str,
                                                                      base: str | None, dtype: str) -> None:
    """A quantised checkpoint named as its base model and its format (NVIDIA's ``-FP4``/``-FP8``, Red Hat's
    ``-FP8-dynamic`` and ``.w4a16``, Qwen's ``-AWQ``, ``-GPTQ-Int4``/``-Int8``) is the base model's row in that
    format, and says it read it so; the Hub is not asked here (offline)."""
    from tokometer.perf import loaders

    monkeypatch.setattr(loaders, "_from_hub", lambda _model: None)
    if base is None:
        with pytest.raises(ConfigError, match="unknown model"):
            resolve_model(name)
        return
    m = resolve_model(name)
    row = BUILTIN_MODELS[base]
    assert m.native_dtype == dtype and m.name == name and m.expert_dtype == ""
    assert (m.params, m.active, m.layers, m.hidden, m.kv_heads, m.experts) == (
        row.params, row.active, row.layers, row.hidden, row.kv_heads, row.experts)
    assert f"read as the {base} row in {dtype}, from the name's" in m.source and "config.json is not read" in m.source


def test_an_unreachable_hub_is_not_asked_for_a_model(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """With the Hub's endpoint refusing connections (a loopback port nothing listens on), a Hub id not built in is
    looked up in the local cache alone (huggingface_hub asked with ``local_files_only``: over the network it would
    retry for about 23 s): not cached, it is unknown at once, and a quantised checkpoint's name still takes its base
    row; cached, its config is read."""
    import socket

    import huggingface_hub
    from huggingface_hub import constants

    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    for proxy in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(proxy, raising=False)

    cache = {("someone/cached-model", "config.json"): tmp_path / "config.json"}
    cache[("someone/cached-model", "config.json")].write_text(json.dumps(LLAMA_8B_CONFIG))

    def cached_only(repo: str, filename: str, **kwargs: object) -> str:
        assert kwargs.get("local_files_only") is True, "the network was asked although the Hub refuses connections"
        if (repo, filename) not in cache:
            raise FileNotFoundError(f"{repo}/{filename} is not in the cache")
        return str(cache[repo, filename])

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", cached_only)
    with pytest.raises(ConfigError, match="unknown model 'someone/not-a-built-in-model'"):
        resolve_model("someone/not-a-built-in-model")
    assert resolve_model("nvidia/Llama-3.1-8B-Instruct-FP8").native_dtype == "fp8"
    assert resolve_model("someone/cached-model").params == 8_029_995_008
