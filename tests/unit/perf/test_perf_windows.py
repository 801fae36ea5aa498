"""Sliding-window and chunked attention: what a step reads and multiplies in its window layers, worked by hand.

A window layer attends to at most W of a sequence's cached tokens (Gemma 3's five layers in six, Llama 4's
chunked three in four, gpt-oss's every other layer), so its KV read and its attention FLOPs stop growing with the
context past W, and so does its cache, unless the engine keeps the whole of it (`Deployment.full_window_cache`),
or plans its memory as if it did while reading only the window (`Deployment.window_memory_whole`).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from tokometer.cli.estimate import command as estimate_command
from tokometer.perf import Deployment, resolve_hardware
from tokometer.perf.catalog import BUILTIN_MODELS
from tokometer.perf.closedloop import kv_room
from tokometer.perf.loaders import model_from_config
from tokometer.perf.maxload import max_load
from tokometer.perf.model import ModelSpec
from tokometer.perf.roofline import decode_flops, decode_step_s, prefill_flops_split

TINY = ModelSpec(name="tiny", params=1e6, layers=4, hidden=64, heads=2, kv_heads=1, head_dim=32, vocab=100,
                 max_context=1024, sliding_window=2, sliding_layers=3)
"""One full layer and three with a 2-token window."""


def test_window_layers_attend_to_at_most_their_window_a_sequence() -> None:
    m = BUILTIN_MODELS["gemma-3-27b"]
    assert (m.window_layers, m.sliding_window) == (52, 1024)  # 62 layers, every sixth full
    # two sequences of 5,000 cached tokens: 10 full layers read 10,000, 52 window layers 2 × 1,024
    assert m.attended_tokens(2, 10_000) == 10 * 10_000 + 52 * 2 * 1024
    # within the window every layer reads the whole context, as full attention
    assert m.attended_tokens(4, 4 * 1000) == 62 * 4000
    # a model without windows: every layer, the whole context
    assert BUILTIN_MODELS["llama-3.1-8b"].attended_tokens(3, 9000) == 32 * 9000


def test_the_kv_read_and_the_attention_flops_follow_the_window() -> None:
    d = Deployment(BUILTIN_MODELS["gemma-3-27b"], resolve_hardware("H100-SXM"))
    per_layer = 2 * 16 * 128 * 2  # K and V × 16 KV heads × 128 dims × 2 B (bf16): 8,192 B a token a layer
    assert d.kv_read_bytes(2, 10_000) == per_layer * (10 * 10_000 + 52 * 2 * 1024)  # 1.69 GB, not 5.08 GB
    attention = 2 * 32 * (128 + 128) * (10 * 10_000 + 52 * 2 * 1024)
    assert decode_flops(d.model, 2, 10_000) == 2 * d.model.matmul_params * 2 + attention
    # the step at a long context is faster than the same model read as full attention would be
    full = Deployment(replace(d.model, sliding_window=0, sliding_layers=0), d.hardware)
    assert decode_step_s(d, 8, 8 * 32_000) < 0.5 * decode_step_s(full, 8, 8 * 32_000)
    assert decode_step_s(d, 8, 8 * 512) == pytest.approx(decode_step_s(full, 8, 8 * 512))


def test_a_prefill_s_window_layers_count_min_of_position_and_window() -> None:
    # 3 new tokens, nothing cached: the full layer 1 + 2 + 3 = 6 pairs; each window layer 1 + 2 + 2 = 5
    assert TINY.attended_pairs(1, 3) == 6 + 3 * 5
    # 1 cached, 2 new: full 2 + 3 = 5; window min(2, 2) + min(3, 2) = 4
    assert TINY.attended_pairs(1, 2, 1) == 5 + 3 * 4
    # two sequences split the tokens and the cache evenly
    assert TINY.attended_pairs(2, 6) == 2 * (6 + 3 * 5)
    _, attention = prefill_flops_split(TINY, 3)
    assert attention == 2 * 2 * (32 + 32) * (6 + 3 * 5)


def test_configs_say_which_layers_have_a_window() -> None:
    base = {"hidden_size": 640, "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 256,
            "num_hidden_layers": 18, "vocab_size": 262144, "intermediate_size": 2048}
    # Gemma 3's older configs: a pattern, every sixth layer full
    gemma = model_from_config({**base, "model_type": "gemma3_text", "sliding_window": 512,
                               "sliding_window_pattern": 6}, "gemma")
    assert (gemma.sliding_window, gemma.window_layers) == (512, 15)
    # Llama 4: chunks on the RoPE layers (no_rope_layers 1), global attention on the rest
    llama4 = model_from_config({**base, "model_type": "llama4_text", "attention_chunk_size": 8192,
                                "no_rope_layers": [1, 1, 1, 0] * 4 + [1, 1]}, "llama4")
    assert (llama4.sliding_window, llama4.window_layers) == (8192, 14)
    assert llama4.chunked_windows and not gemma.chunked_windows  # chunks, not a sliding window
    assert BUILTIN_MODELS["llama-4-scout"].chunked_windows and not BUILTIN_MODELS["gpt-oss-20b"].chunked_windows
    typed = model_from_config({**base, "model_type": "llama4_text", "attention_chunk_size": 8192,
                               "layer_types": ["chunked_attention"] * 3 + ["full_attention"]
                               + ["chunked_attention"] * 14}, "llama4")
    assert (typed.sliding_window, typed.window_layers) == (8192, 17)
    # a bare sliding_window says nothing (Qwen2's configs carry one with use_sliding_window false)
    qwen = model_from_config({**base, "model_type": "qwen2", "sliding_window": 32768,
                              "use_sliding_window": False}, "qwen")
    assert qwen.window_layers == 0


def test_a_window_layer_keeps_at_most_its_window_of_each_sequence() -> None:
    d = Deployment(BUILTIN_MODELS["gemma-3-27b"], resolve_hardware("H100-SXM"))
    per_layer = 2 * 16 * 128 * 2  # 8,192 B a token a layer (bf16)
    assert d.kv_bytes_per_token == 10 * per_layer  # the 10 full layers grow with the context
    assert d.kv_bytes_per_sequence(33_000) == per_layer * (10 * 33_000 + 52 * 1024)  # 3.14 GB, not 16.8 GB
    assert d.kv_bytes_per_sequence(500) == per_layer * 62 * 500  # within the window: every layer
    budget = d.kv_budget_bytes()
    assert d.kv_sequences(33_000) == budget // (per_layer * (10 * 33_000 + 52 * 1024))
    # an engine that keeps and reads the whole cache (llama.cpp's --swa-full, TensorRT-LLM): every layer full
    whole = Deployment(BUILTIN_MODELS["gemma-3-27b"], resolve_hardware("H100-SXM"), full_window_cache=True)
    assert whole.model.window_layers == 0 and whole.kv_bytes_per_token == 62 * per_layer
    assert whole.kv_sequences(33_000) == budget // (62 * per_layer * 33_000) < d.kv_sequences(33_000) / 4
    assert "window layers' caches whole" in whole.describe()


def test_a_window_planned_whole_and_read_within() -> None:
    """TensorRT-LLM's pools: gpt-oss's window layers take as much memory as its full ones, and a step reads 128
    tokens of them."""
    model = BUILTIN_MODELS["gpt-oss-120b"]  # 36 layers, 18 of them with a 128-token window
    windowed = Deployment(model, resolve_hardware("H200-SXM"), "bf16", "fp8")
    pooled = replace(windowed, window_memory_whole=True)
    whole = replace(windowed, full_window_cache=True)
    per_layer = 2 * 8 * 64  # 1,024 B a token a layer: 8 KV heads of 64, fp8
    assert pooled.kv_bytes_per_sequence(2048) == whole.kv_bytes_per_sequence(2048) == 36 * per_layer * 2048
    assert windowed.kv_bytes_per_sequence(2048) == per_layer * (18 * 2048 + 18 * 128)
    assert pooled.kv_sequences(2048) == whole.kv_sequences(2048) < windowed.kv_sequences(2048)
    assert pooled.kv_capacity_tokens() == whole.kv_capacity_tokens() == whole.kv_budget_bytes() // (36 * per_layer)
    # a step reads as the windowed one: 18 layers × 2,048 + 18 × 128 layer-tokens a sequence, not 36 × 2,048
    assert pooled.kv_read_bytes(1, 2048) == windowed.kv_read_bytes(1, 2048) == per_layer * (18 * 2048 + 18 * 128)
    assert whole.kv_read_bytes(1, 2048) == per_layer * 36 * 2048
    assert decode_step_s(pooled, 64, 64 * 2048) == decode_step_s(windowed, 64, 64 * 2048)
    assert "window layers planned whole, read within" in pooled.describe()


def test_max_load_and_the_closed_loop_hold_the_sequences_that_fit() -> None:
    d = Deployment(BUILTIN_MODELS["gemma-3-27b"], resolve_hardware("H100-SXM"))
    load = max_load(d, 32_000, 1000)
    assert load is not None and load.batch == d.kv_sequences(33_000)
    assert kv_room(d, 32_000, 1000) == d.kv_sequences(33_000)
    whole = Deployment(d.model, d.hardware, full_window_cache=True)
    held = max_load(whole, 32_000, 1000)
    assert held is not None and held.batch == whole.kv_sequences(33_000) < load.batch


def test_the_command_says_what_a_sequence_holds(tmp_path: Path) -> None:
    out = tmp_path / "e.json"
    args = ["-m", "gemma-3-27b", "-H", "H100-SXM", "-b", "4", "--input-tokens", "32000", "--output-tokens", "1000"]
    result = CliRunner().invoke(estimate_command, [*args, "--json", str(out)])
    assert result.exit_code == 0, result.output
    assert "+ at most 436.2 MB a sequence in its 52 1,024-token window layers" in result.output
    d = Deployment(BUILTIN_MODELS["gemma-3-27b"], resolve_hardware("H100-SXM"))
    assert json.loads(out.read_text())["estimate"]["max_sequences"] == d.kv_sequences(33_000)
    whole = CliRunner().invoke(estimate_command, [*args, "--swa-full", "--json", str(out)])
    assert whole.exit_code == 0 and "window layers' caches whole" in whole.output
    whole_d = Deployment(d.model, d.hardware, full_window_cache=True)
    assert json.loads(out.read_text())["estimate"]["max_sequences"] == whole_d.kv_sequences(33_000)


def test_the_command_plans_windows_as_pooled(tmp_path: Path) -> None:
    """--swa-pooled: sequences fit as with --swa-full, the batch rows' steps read as without."""
    args = ["-m", "gpt-oss-120b", "-H", "H200", "-b", "64", "--input-tokens", "2000", "--output-tokens", "1000"]
    docs = {}
    for name, extra in (("window", []), ("pooled", ["--swa-pooled"]), ("whole", ["--swa-full"])):
        out = tmp_path / f"{name}.json"
        result = CliRunner().invoke(estimate_command, [*args, *extra, "--json", str(out)])
        assert result.exit_code == 0, result.output
        docs[name] = json.loads(out.read_text())["estimate"]
    assert docs["pooled"]["window_memory_whole"] and not docs["window"]["window_memory_whole"]
    assert docs["pooled"]["max_sequences"] == docs["whole"]["max_sequences"] < docs["window"]["max_sequences"]
    assert docs["pooled"]["batches"][0]["decode_step_ms"] == docs["window"]["batches"][0]["decode_step_ms"]
    assert docs["pooled"]["batches"][0]["decode_step_ms"] != docs["whole"]["batches"][0]["decode_step_ms"]
    both = CliRunner().invoke(estimate_command, [*args, "--swa-full", "--swa-pooled"])
    assert both.exit_code == 2 and "two plans for the window layers' caches: give one" in both.output
