"""Recurrent layers: linear attention (Gated DeltaNet: Qwen3-Next, Qwen3.5) and Mamba2 (Nemotron-H) keep a fixed
state a sequence instead of a KV cache (`tokometer.perf.model`, `tokometer.perf.hybrid`), and hybrids the estimate
does not model are refused.

The shapes are Qwen3-Next-80B-A3B's config.json (48 layers, full_attention_interval 4, 16 key and 32 value heads
of 128, kernel 4; full attention 16 heads / 2 KV heads of 256, gated) and Nemotron 3 Nano 30B-A3B's (52 blocks:
23 Mamba2, 6 attention, 23 experts); every expected number is worked by hand.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from click.testing import CliRunner

from tokometer.cli import main
from tokometer.cli.estimate import command as estimate
from tokometer.perf.catalog import BUILTIN_MODELS
from tokometer.perf.hardware import resolve_hardware
from tokometer.perf.loaders import model_from_config, model_from_gguf
from tokometer.perf.model import ModelSpec
from tokometer.perf.roofline import Deployment, decode_flops, decode_step_s
from tokometer.util.errors import ConfigError

from .test_perf_models import _write_gguf

NEXT = {"architectures": ["Qwen3NextForCausalLM"], "model_type": "qwen3_next", "full_attention_interval": 4,
        "head_dim": 256, "hidden_size": 2048, "intermediate_size": 5120, "linear_conv_kernel_dim": 4,
        "linear_key_head_dim": 128, "linear_num_key_heads": 16, "linear_num_value_heads": 32,
        "linear_value_head_dim": 128, "max_position_embeddings": 262144, "moe_intermediate_size": 512,
        "num_attention_heads": 16, "num_experts": 512, "num_experts_per_tok": 10, "num_hidden_layers": 48,
        "num_key_value_heads": 2, "shared_expert_intermediate_size": 512, "tie_word_embeddings": False,
        "torch_dtype": "bfloat16", "vocab_size": 151936}
STATE = 32 * 128 * 128 * 2 + (2 * 16 * 128 + 32 * 128) * 3 * 2  # bf16 recurrence + the convolution's last 3 inputs
KV_TOKEN_FP8 = 12 * 2 * 2 * 256  # 12 full-attention layers × K and V × 2 KV heads × 256, 1 B each


SHAPE = ("layers", "kv_layers", "recurrent_layers", "recurrent_state_bytes", "recurrent_flops_per_token", "experts",
         "experts_per_token", "kv_heads", "head_dim", "routed_expert_width")
"""What a table row and the config it was copied from must agree on."""


def _shape(model: ModelSpec) -> dict[str, object]:
    return {f: getattr(model, f) for f in SHAPE}


def h200(tp: int = 1, kv: str = "fp8") -> Deployment:
    return Deployment(BUILTIN_MODELS["qwen3-next-80b-a3b"], resolve_hardware("H200"), "fp8", kv, tp=tp)


def test_the_config_gives_the_table_row_and_its_parameters_by_hand() -> None:
    read = model_from_config(NEXT, "Qwen/Qwen3-Next-80B-A3B-Instruct")
    row = BUILTIN_MODELS["qwen3-next-80b-a3b"]
    assert _shape(read) == _shape(row)
    assert (read.kv_layers, read.recurrent_layers, read.recurrent_state_bytes) == (12, 36, STATE) == (12, 36, 1_097_728)
    attention = 2048 * 16 * 256 * 2 + 16 * 256 * 2048 + 2 * 2048 * 2 * 256  # q and its gate, o, k and v
    deltanet = 2048 * (2 * 16 * 128 + 2 * 32 * 128) + 2048 * 64 + 32 * 128 * 2048 + 8192 * 4  # in, b/a, out, conv
    moe = 512 * 3 * 2048 * 512 + 3 * 2048 * 512 + 2048 * 512  # routed experts, the shared one, the router
    total = 12 * attention + 36 * deltanet + 48 * moe + 2 * 151936 * 2048
    assert read.params == pytest.approx(total, rel=1e-9)
    assert read.params == pytest.approx(80e9, rel=0.005)  # the model card's 80 B
    assert row.params == pytest.approx(read.params, rel=0.001) and row.active == pytest.approx(read.active, rel=0.01)


def test_a_qwen3_5_layer_list_in_text_config_reads_the_same_and_fp32_state_doubles_the_recurrence() -> None:
    kinds = (["linear_attention"] * 3 + ["full_attention"]) * 12
    inner = {k: v for k, v in NEXT.items() if k != "full_attention_interval"}
    nested = {"model_type": "qwen3_5_moe", "text_config": {**inner, "layer_types": kinds, "mamba_ssm_dtype": "float32"}}
    read = model_from_config(nested, "qwen3.5")
    assert (read.kv_layers, read.recurrent_layers) == (12, 36)
    assert read.recurrent_state_bytes == 32 * 128 * 128 * 4 + 8192 * 3 * 2


def test_the_cache_is_the_full_layers_per_token_plus_the_state_a_sequence() -> None:
    d = h200()
    assert d.kv_bytes_per_token == KV_TOKEN_FP8 == 12_288
    assert d.kv_bytes_per_sequence(2000) == pytest.approx(2000 * 12_288 + 36 * STATE)
    # over TP 2: one KV head and half of each layer's state (its heads) a GPU
    assert h200(tp=2).kv_bytes_per_sequence_per_gpu(2000) == pytest.approx(2000 * 6_144 + 36 * STATE / 2)
    # the state is not in the KV cache's format: a bf16 cache doubles the KV, not the state
    assert h200(kv="bf16").kv_bytes_per_sequence(2000) == pytest.approx(2000 * 24_576 + 36 * STATE)
    # the sequences that fit count the state: (budget) / (KV of 2,000 tokens + state)
    budget = d.kv_budget_bytes(0.9)
    assert d.kv_sequences(2000) == int(budget // (2000 * 12_288 + 36 * STATE))


def test_a_decode_step_reads_and_writes_every_sequence_s_state_and_runs_its_recurrence() -> None:
    d = h200()
    # 8 sequences, 16,000 tokens cached in all: 12 layers × 16,000 tokens of KV, and 8 × 36 states in and out
    assert d.kv_read_bytes(8, 16_000) == pytest.approx(16_000 * 12_288 + 2 * 8 * 36 * STATE)
    m = d.model
    attention = 2 * 16 * (256 + 256) * 12 * 16_000  # the full layers' (query, key) pairs
    recurrence = 36 * 6 * 32 * 128 * 128 * 8
    assert decode_flops(m, 8, 16_000) == pytest.approx(2 * m.matmul_params * 8 + attention + recurrence)
    # a prefill's recurrence is once a token and layer, whatever the context before it
    assert m.prefill_attention_flops(1, 1000, 50_000) - m.prefill_attention_flops(1, 1000, 0) == pytest.approx(
        2 * 16 * 512 * 12 * 1000 * 50_000)
    # at a long context the state is a small, fixed part; a model with every layer full reads 4 × the KV
    full = Deployment(model_from_config({k: v for k, v in NEXT.items() if k != "full_attention_interval"}, "all"),
                      resolve_hardware("H200"), "fp8", "fp8")
    assert full.kv_read_bytes(1, 100_000) == pytest.approx(48 * 100_000 * 1024)
    assert full.kv_read_bytes(1, 100_000) / d.kv_read_bytes(1, 100_000) == pytest.approx(
        48 * 100_000 * 1024 / (12 * 100_000 * 1024 + 2 * 36 * STATE))  # 3.76
    assert decode_step_s(d, 1, 100_000) < decode_step_s(full, 1, 100_000)


@pytest.mark.parametrize(("extra", "named"), [
    ({"layer_types": ["mamba", "linear_attention", "full_attention"] * 16}, "mixes linear-attention and Mamba"),
    ({"ssm_state_size": 128}, "ssm_state_size"),  # Mamba fields with no Mamba layer to give them to
    ({"layer_types": ["conv"] * 40 + ["full_attention"] * 8}, "conv"),  # LFM2
    ({"attn_layer_period": 8, "mamba_d_state": 16}, "attn_layer_period"),  # Jamba
    ({"linear_attn_config": {"kda_layers": [1, 2, 3]}}, "linear_attn_config"),  # Kimi Linear
    ({"layer_types": ["linear_attention"] * 48}, "without attention layers"),
    ({"layer_types": ["full_attention"] * 3}, "lists 3 layers"),
    ({"layer_types": [{"kind": 1}] * 48}, "does not model"),
    ({"linear_num_value_heads": 10**30}, "must be from 1"),
    ({"linear_key_head_dim": 0}, "must be from 1"),
])
def test_a_hybrid_the_estimate_does_not_model_is_refused_not_counted_as_attention(extra: dict[str, object],
                                                                                   named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        model_from_config({**NEXT, **extra}, "hybrid")


def test_the_cli_shows_the_state_and_refuses_a_hybrid_in_one_line(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    shown = CliRunner().invoke(estimate, ["-m", "qwen3-next-80b-a3b", "-H", "H200", "--dtype", "fp8"])
    assert shown.exit_code == 0, shown.output
    assert "of state a sequence in its 36 recurrent layers" in shown.output
    (tmp_path / "config.json").write_text(json.dumps({**NEXT, "attn_layer_period": 8, "mamba_d_state": 16}))
    with pytest.raises(SystemExit) as exited:
        main(["estimate", "-m", str(tmp_path), "-H", "H200"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "attn_layer_period" in err and "Traceback" not in err


def _u32(key: str, value: int) -> tuple[str, int, bytes]:
    return key, 4, struct.pack("<I", value)


DELTANET_GGUF = (_u32("full_attention_interval", 4), _u32("ssm.conv_kernel", 4), _u32("ssm.state_size", 128),
                 _u32("ssm.group_count", 16), _u32("ssm.time_step_rank", 32), _u32("ssm.inner_size", 4096))
"""Qwen3-Next's linear-attention widths as llama.cpp's converter writes them."""


@pytest.mark.parametrize("arch", ["qwen3next", "qwen35", "qwen35moe"])
def test_a_llama_cpp_header_s_gated_deltanet_layers_keep_an_f32_state(tmp_path: Path, arch: str) -> None:
    path = tmp_path / "next.gguf"
    _write_gguf(path, arch, 8, DELTANET_GGUF)
    m = model_from_gguf(path)
    # all but every 4th of 8 layers; the ssm state (key dim × value channels) and 3 conv inputs, f32 in llama.cpp
    assert (m.recurrent_layers, m.kv_layers) == (6, 2)
    assert m.recurrent_state_bytes == (128 * 4096 + 3 * (4096 + 2 * 16 * 128)) * 4 == 2_195_456
    assert m.recurrent_flops_per_token == 6 * 128 * 4096
    flags = ("attention.recurrent_layers", 9, struct.pack("<IQ", 7, 8) + b"\1\1\0\1\1\1\0\0")
    _write_gguf(path, arch, 8, (*DELTANET_GGUF, flags))
    assert model_from_gguf(path).recurrent_layers == 5  # a flag a layer wins over the interval


@pytest.mark.parametrize(("extra", "said"), [
    (tuple(k for k in DELTANET_GGUF if k[0] != "ssm.inner_size"), "ssm.inner_size"),
    ((*DELTANET_GGUF[1:], _u32("full_attention_interval", 100)), "all 8 layers recurrent"),
    ((*DELTANET_GGUF, ("attention.recurrent_layers", 9, struct.pack("<IQ", 7, 2) + b"\1\0")), "one flag per layer"),
])
def test_a_gated_deltanet_header_that_does_not_add_up_is_one_error(
        tmp_path: Path, extra: tuple[tuple[str, int, bytes], ...], said: str) -> None:
    path = tmp_path / "next.gguf"
    _write_gguf(path, "qwen3next", 8, extra)
    with pytest.raises(ConfigError, match=said):
        model_from_gguf(path)


@pytest.mark.parametrize(("arch", "key"), [("nemotron_h", "ssm.conv_kernel"), ("mamba2", "ssm.state_size"),
                                           ("lfm2", "shortconv.l_cache")])
def test_a_gguf_header_with_recurrent_layers_is_refused_not_counted_as_attention(tmp_path: Path, arch: str,
                                                                                 key: str) -> None:
    path = tmp_path / "hybrid.gguf"
    _write_gguf(path, arch, 4, ((key, 4, struct.pack("<I", 128)),))
    with pytest.raises(ConfigError, match=key):
        model_from_gguf(path)


NANO = {"architectures": ["NemotronHForCausalLM"], "model_type": "nemotron_h", "vocab_size": 131072,
        "hidden_size": 2688, "intermediate_size": 1856, "num_hidden_layers": 52, "max_position_embeddings": 262144,
        "tie_word_embeddings": False, "hybrid_override_pattern": "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME",
        "num_attention_heads": 32, "num_key_value_heads": 2, "head_dim": 128, "mamba_num_heads": 64,
        "mamba_head_dim": 64, "ssm_state_size": 128, "conv_kernel": 4, "n_groups": 8, "n_routed_experts": 128,
        "n_shared_experts": 1, "num_experts_per_tok": 6, "moe_intermediate_size": 1856,
        "moe_shared_expert_intermediate_size": 3712, "mamba_ssm_cache_dtype": "float32", "torch_dtype": "bfloat16"}
MAMBA_STATE = 64 * 64 * 128 * 4 + (64 * 64 + 2 * 8 * 128) * 3 * 2  # fp32 recurrence + the convolution's last 3 inputs


def test_nemotron_h_blocks_are_read_one_kind_each_with_their_parameters_by_hand() -> None:
    read = model_from_config(NANO, "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16")
    row = BUILTIN_MODELS["nemotron-3-nano-30b-a3b"]
    assert _shape(read) == _shape(row)
    # 29 token-mixing blocks (6 attention + 23 Mamba2); the 23 expert blocks count in the parameters
    assert (read.layers, read.kv_layers, read.recurrent_layers, read.recurrent_state_bytes) == (29, 6, 23, MAMBA_STATE)
    attention = 2688 * 32 * 128 * 2 + 2 * 2688 * 2 * 128  # q and o; k and v
    mamba = 2688 * (2 * 4096 + 2 * 8 * 128 + 64) + 4096 * 2688 + 6144 * 4  # in (x, z, B, C, dt), out, conv
    expert, shared, router = 2 * 2688 * 1856, 2 * 2688 * 3712, 2688 * 128  # squared ReLU: up and down
    embeddings = 2 * 131072 * 2688
    assert read.params == pytest.approx(6 * attention + 23 * mamba + 23 * (128 * expert + shared + router) + embeddings)
    assert read.active == pytest.approx(6 * attention + 23 * mamba + 23 * (6 * expert + shared + router) + embeddings)
    assert read.params == pytest.approx(31.58e9, rel=0.001) and read.active == pytest.approx(3.58e9, rel=0.001)
    assert row.params == pytest.approx(read.params, rel=0.001) and row.active == pytest.approx(read.active, rel=0.001)
    # its KV: 6 layers × K and V × 2 heads × 128 in fp8; the state in its own fp32, whatever the cache's format
    d = Deployment(row, resolve_hardware("H100"), "fp8", "fp8")
    assert d.kv_bytes_per_token == 6 * 2 * 2 * 128 == 3072
    assert d.kv_bytes_per_sequence(2000) == pytest.approx(2000 * 3072 + 23 * MAMBA_STATE)


def test_nemotron_h_block_lists_read_as_the_pattern_and_a_bf16_state_halves_the_recurrence() -> None:
    letters = {"M": "mamba", "*": "attention", "E": "moe", "-": "mlp"}
    pattern = str(NANO["hybrid_override_pattern"])
    listed = {k: v for k, v in NANO.items() if k not in ("hybrid_override_pattern", "mamba_ssm_cache_dtype")}
    read = model_from_config({**listed, "layers_block_type": [letters[c] for c in pattern]}, "listed")
    assert (read.layers, read.kv_layers, read.recurrent_layers) == (29, 6, 23)
    assert read.recurrent_state_bytes == 64 * 64 * 128 * 2 + 6144 * 3 * 2
    assert read.params == pytest.approx(model_from_config(NANO, "pattern").params)
    # an older Nemotron-H: dense squared-ReLU MLP blocks ("-") of intermediate_size, no experts
    dense = model_from_config({**listed, "hybrid_override_pattern": "M-M*-", "num_hidden_layers": 5,
                               "n_routed_experts": 0}, "dense")
    assert not dense.is_moe and (dense.layers, dense.kv_layers) == (3, 1)
    assert dense.params == pytest.approx(
        2688 * 32 * 128 * 2 + 2 * 2688 * 2 * 128 + 2 * (2688 * (2 * 4096 + 2 * 8 * 128 + 64) + 4096 * 2688 + 6144 * 4)
        + 2 * 2 * 2688 * 1856 + 2 * 131072 * 2688)


@pytest.mark.parametrize(("extra", "named"), [
    ({"hybrid_override_pattern": "MXM*"}, "other than M"),
    ({"hybrid_override_pattern": "M*M"}, "3 blocks"),
    ({"hybrid_override_pattern": "M" * 52}, "no attention block"),
    ({"hybrid_override_pattern": None, "layers_block_type": ["mamba", "conv"] * 26}, "conv"),
    ({"mamba_num_heads": 0}, "mamba_num_heads must be from 1"),
    ({"ssm_state_size": None}, "ssm_state_size"),
])
def test_a_nemotron_h_config_that_does_not_add_up_is_refused(extra: dict[str, object], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        model_from_config({**NANO, **extra}, "nemotron")


GRANITE_KINDS = (["mamba"] * 9 + ["attention"]) * 4
GRANITE = {"model_type": "granitemoehybrid", "hidden_size": 4096, "num_hidden_layers": 40, "num_attention_heads": 32,
           "num_key_value_heads": 8, "num_local_experts": 72, "num_experts_per_tok": 10,
           "shared_intermediate_size": 1536, "intermediate_size": 768, "mamba_d_state": 128, "mamba_d_conv": 4,
           "mamba_expand": 2, "mamba_n_heads": 128, "mamba_d_head": 64, "mamba_n_groups": 1,
           "tie_word_embeddings": True, "vocab_size": 100352, "layer_types": GRANITE_KINDS}
"""Granite 4.0-H Small's shapes (36 Mamba2 and 4 attention layers, each with 10 of 72 experts and a shared MLP)."""


def test_granite_4_h_layers_are_mamba2_or_attention_each_with_its_experts_and_shared_mlp() -> None:
    m = model_from_config(GRANITE, "ibm-granite/granite-4.0-h-small")
    assert (m.layers, m.kv_layers, m.recurrent_layers) == (40, 4, 36)
    assert m.recurrent_state_bytes == 128 * 64 * 128 * 2 + (8192 + 2 * 128) * 3 * 2  # bf16: no fp32 key
    attention = 4096 * 32 * 128 * 2 + 2 * 4096 * 8 * 128
    mamba = 4096 * (2 * 8192 + 2 * 128 + 128) + 8192 * 4096 + (8192 + 256) * 4
    expert, shared, router = 3 * 4096 * 768, 3 * 4096 * 1536, 4096 * 72  # gated (SwiGLU) MLPs
    table = 100352 * 4096  # tied
    assert m.params == pytest.approx(4 * attention + 36 * mamba + 40 * (72 * expert + shared + router) + table)
    assert m.active == pytest.approx(4 * attention + 36 * mamba + 40 * (10 * expert + shared + router) + table)
    assert m.params == pytest.approx(32e9, rel=0.01) and m.active == pytest.approx(9e9, rel=0.03)  # its card
    # the head dim from expand × hidden over the heads where the config leaves it out
    implied = model_from_config({k: v for k, v in GRANITE.items() if k != "mamba_d_head"}, "implied")
    assert implied.recurrent_state_bytes == m.recurrent_state_bytes
    # a dense Granite 4.0-H: its MLP is the shared one
    dense = model_from_config({**GRANITE, "num_local_experts": 0}, "dense")
    assert not dense.is_moe and dense.params == pytest.approx(
        4 * attention + 36 * mamba + 40 * 3 * 4096 * 1536 + table)
