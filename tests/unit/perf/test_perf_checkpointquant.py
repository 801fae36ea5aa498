"""A checkpoint's own quantisation config as `estimate` reads it (`tokometer.perf.checkpointquant`): the weights',
the experts' and the KV cache's formats that ModelOpt (``quantization_config`` or ``hf_quant_config.json``) and
compressed-tensors checkpoints declare, in the shapes those tools write them; anything else said as not read, the
weights then in ``torch_dtype``; a hostile field never a traceback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tokometer.perf import hardware_table
from tokometer.perf.checkpointquant import checkpoint_format
from tokometer.perf.loaders import model_from_config, resolve_model
from tokometer.perf.quant import default_kv_dtype
from tokometer.perf.questions import EstimateSpec, _deployment
from tokometer.util.errors import ConfigError

LLAMA = {"architectures": ["LlamaForCausalLM"], "hidden_size": 8192, "num_attention_heads": 64,
         "num_key_value_heads": 8, "num_hidden_layers": 80, "intermediate_size": 28672, "vocab_size": 128256,
         "max_position_embeddings": 131072, "torch_dtype": "bfloat16"}
MOE = {"architectures": ["Qwen3MoeForCausalLM"], "hidden_size": 2048, "num_attention_heads": 32,
       "num_key_value_heads": 4, "head_dim": 128, "num_hidden_layers": 48, "moe_intermediate_size": 768,
       "num_experts": 128, "num_experts_per_tok": 8, "vocab_size": 151936, "max_position_embeddings": 40960,
       "torch_dtype": "bfloat16"}
MODELOPT_SIDECAR = {"producer": {"name": "modelopt", "version": "0.23.0"},
                    "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8", "group_size": 16,
                                     "exclude_modules": ["lm_head"]}}
"""The ``hf_quant_config.json`` TensorRT Model Optimizer writes beside an NVFP4 export's config.json."""


def _ct(weights: dict[str, Any], activations: dict[str, Any] | None, fmt: str, kv: Any = None) -> dict[str, Any]:
    """A compressed-tensors ``quantization_config`` as llm-compressor writes one: one scheme over the Linear layers."""
    return {"quant_method": "compressed-tensors", "format": fmt, "ignore": ["lm_head"], "kv_cache_scheme": kv,
            "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights,
                                          "input_activations": activations}}}


FP8_DYNAMIC = _ct({"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": True, "dynamic": False},
                  {"num_bits": 8, "type": "float", "strategy": "token", "dynamic": True}, "float-quantized")
NVFP4_CT = _ct({"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16},
               {"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16, "dynamic": "local"},
               "nvfp4-pack-quantized")
W4A16 = _ct({"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128, "symmetric": True}, None,
            "pack-quantized")
W8A8 = _ct({"num_bits": 8, "type": "int", "strategy": "channel"}, {"num_bits": 8, "type": "int", "dynamic": True},
           "int-quantized")


def _write(tmp_path: Path, cfg: dict[str, Any], sidecar: Any = None) -> str:
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    if sidecar is not None:
        (tmp_path / "hf_quant_config.json").write_text(sidecar if isinstance(sidecar, str) else json.dumps(sidecar))
    return str(tmp_path)


def test_a_modelopt_nvfp4_export_is_nvfp4_with_the_fp8_cache_its_sidecar_declares(tmp_path: Path) -> None:
    model = resolve_model(_write(tmp_path, LLAMA, MODELOPT_SIDECAR))
    assert model.native_dtype == "nvfp4" and model.native_kv_dtype == "fp8"
    assert "hf_quant_config.json: ModelOpt NVFP4, KV cache fp8" in model.source
    d = _deployment(EstimateSpec(), str(tmp_path), "B200")
    assert d.weight_dtype == "nvfp4" and d.kv_dtype == "fp8" and d.compute_dtype == "fp4"
    # the cache named on the command line wins; another weight format is not the checkpoint's
    assert _deployment(EstimateSpec(kv_dtype="bf16"), str(tmp_path), "B200").kv_dtype == "bf16"
    assert _deployment(EstimateSpec(dtype="bf16"), str(tmp_path), "B200").kv_dtype == "bf16"


def test_the_files_size_is_the_exact_size_in_the_declared_format(tmp_path: Path) -> None:
    (tmp_path / "model-00001.safetensors").write_bytes(b"\0" * 4096)
    model = resolve_model(_write(tmp_path, LLAMA, MODELOPT_SIDECAR))
    assert model.weight_bytes == 4096.0 and model.native_dtype == "nvfp4"


@pytest.mark.parametrize(("quant", "weights", "kv"), [
    ({"quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}, "fp8", "fp8"),
    ({"quant_method": "modelopt", "quant_algo": "FP8_PER_CHANNEL_PER_TOKEN"}, "fp8", ""),
    ({"quant_method": "modelopt", "quant_algo": "NVFP4", "kv_cache_quant_algo": "NVFP4"}, "nvfp4", "nvfp4"),
    ({"quant_method": "modelopt_fp4", "quant_algo": "NVFP4", "kv_cache_quant_algo": None}, "nvfp4", ""),
    ({"quant_method": "modelopt", "quant_algo": "W4A8_AWQ"}, "awq", ""),
    ({"quant_method": "modelopt", "quant_algo": "W8A8_SQ_PER_CHANNEL"}, "int8", ""),
    ({"quant_method": "fbgemm_fp8"}, "fp8", ""),
    ({"quant_method": "gptq_marlin"}, "gptq", ""),
    ({"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True, "version": "gemm"}, "awq", ""),
    (FP8_DYNAMIC, "fp8", ""),
    (NVFP4_CT, "nvfp4", ""),
    (W4A16, "int4", ""),
    (W8A8, "int8", ""),
])
def test_each_declared_format_is_read(quant: dict[str, Any], weights: str, kv: str) -> None:
    fmt = checkpoint_format({**LLAMA, "quantization_config": quant})
    assert (fmt.weights, fmt.experts, fmt.kv) == (weights, "", kv)
    model = model_from_config({**LLAMA, "quantization_config": quant}, "x")
    assert model.native_dtype == weights and model.default_kv(weights) == (kv or default_kv_dtype(weights))


def test_nvfp4_and_fp8_weights_default_to_an_fp8_cache_and_other_formats_to_bf16() -> None:
    assert [default_kv_dtype(f) for f in ("fp8", "nvfp4", "fp4", "mxfp4", "bf16", "awq", "int8")] == \
        ["fp8", "fp8", "fp8", "bf16", "bf16", "bf16", "bf16"]


FP8_KV = {"num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": False, "symmetric": True}
"""The ``kv_cache_scheme`` llm-compressor writes for an FP8 KV cache."""


def test_a_compressed_tensors_kv_scheme_is_the_cache_vllm_takes_by_default(tmp_path: Path) -> None:
    fmt = checkpoint_format({**LLAMA, "quantization_config": {**W4A16, "kv_cache_scheme": FP8_KV}})
    assert (fmt.weights, fmt.kv) == ("int4", "fp8")
    assert fmt.note == "compressed-tensors int4, groups of 128 (4.125 bits), KV cache fp8 (kv_cache_scheme)"
    model = resolve_model(_write(tmp_path, {**LLAMA, "quantization_config": {**W4A16, "kv_cache_scheme": FP8_KV}}))
    assert model.native_kv_dtype == "fp8" and model.default_kv("int4") == "fp8"
    assert _deployment(EstimateSpec(), str(tmp_path), "H100").kv_dtype == "fp8"
    assert _deployment(EstimateSpec(kv_dtype="bf16"), str(tmp_path), "H100").kv_dtype == "bf16"  # the flag wins


def test_a_checkpoint_of_its_cache_alone_keeps_its_weights_in_torch_dtype(tmp_path: Path) -> None:
    """llm-compressor's KV-cache recipe: a ``kv_cache_scheme`` and no ``config_groups``; the files' size still
    scales the parameters, as for any 16-bit checkpoint."""
    quant = {"quant_method": "compressed-tensors", "format": "dense", "kv_cache_scheme": FP8_KV, "ignore": []}
    (tmp_path / "model-00001.safetensors").write_bytes(b"\0" * 4096)
    model = resolve_model(_write(tmp_path, {**LLAMA, "quantization_config": quant}))
    assert (model.native_dtype, model.native_kv_dtype, model.weight_bytes) == ("bf16", "fp8", 4096.0)
    assert "compressed-tensors: the weights in torch_dtype, KV cache fp8 (kv_cache_scheme)" in model.source
    assert "safetensors sizes" in model.source


@pytest.mark.parametrize("scheme", [
    {**FP8_KV, "type": "int"}, {**FP8_KV, "num_bits": 4}, {**FP8_KV, "symmetric": False},
    {**FP8_KV, "strategy": "channel"}, {}, "fp8", [8], {"num_bits": [8] * 10, "type": {"float": 1}},
])
def test_a_kv_scheme_vllm_does_not_load_is_said_and_the_cache_taken_in_16_bits(scheme: Any) -> None:
    fmt = checkpoint_format({**LLAMA, "quantization_config": {**W4A16, "kv_cache_scheme": scheme}})
    assert (fmt.weights, fmt.kv) == ("int4", "")
    assert "is not one vLLM loads (float, num_bits 8, symmetric, per tensor or attention head)" in fmt.note


@pytest.mark.parametrize(("kv_fields", "kv"), [
    ({"kv_cache_scheme": FP8_KV}, "fp8"),
    ({"kv_cache_scheme": {"num_bits": 4, "type": "float", "dynamic": False}}, "nvfp4"),
    ({"kv_cache_scheme": {**FP8_KV, "dynamic": True}}, ""),  # vLLM wants dynamic false
    ({"kv_cache_scheme": {"num_bits": 8, "type": "float"}}, ""),  # and written, not left out
    ({"kv_cache_scheme": FP8_KV, "kv_cache_quant_algo": "NVFP4"}, "fp8"),  # the object first, as vLLM reads it
    ({"kv_cache_scheme": None, "kv_cache_quant_algo": "NVFP4"}, "nvfp4"),
])
def test_a_modelopt_config_json_declares_its_cache_as_vllm_reads_it(kv_fields: dict[str, Any], kv: str) -> None:
    quant = {"quant_method": "modelopt", "quant_algo": "NVFP4", "ignore": ["lm_head"], **kv_fields}
    fmt = checkpoint_format({**LLAMA, "quantization_config": quant})
    assert (fmt.weights, fmt.kv) == ("nvfp4", kv)
    assert kv or "is one vLLM keeps in 16 bits (give --kv-dtype)" in fmt.note


def test_a_weight_format_not_read_still_takes_the_cache_it_declares(tmp_path: Path) -> None:
    groups = {"a": {"targets": ["Linear"], "weights": {"num_bits": 8, "type": "float"}},
              "b": {"targets": ["re:.*down_proj"], "weights": {"num_bits": 4, "type": "int", "group_size": 128}}}
    quant = {"quant_method": "compressed-tensors", "config_groups": groups, "kv_cache_scheme": FP8_KV}
    (tmp_path / "model-00001.safetensors").write_bytes(b"\0" * 4096)
    model = resolve_model(_write(tmp_path, {**LLAMA, "quantization_config": quant}))
    assert (model.native_dtype, model.native_kv_dtype, model.weight_bytes) == ("bf16", "fp8", None)
    assert "compressed-tensors config_groups give attention fp8 and the dense MLP fp8 or int4 by module: formats " \
        "mixed beyond the experts' and the rest's: sized in its torch_dtype; give --dtype for its format; KV cache " \
        "fp8, as it declares" in model.source


def test_a_mixed_modelopt_moe_is_its_experts_format_beside_the_rest() -> None:
    layers = {f"model.layers.{i}.{part}": {"quant_algo": algo}
              for i in range(2) for part, algo in (("self_attn.q_proj", "FP8"), ("mlp.experts", "NVFP4"))}
    quant = {"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION", "kv_cache_quant_algo": "FP8",
             "quantized_layers": layers}
    model = model_from_config({**MOE, "quantization_config": quant}, "mixed")
    assert model.native_dtype == "fp8" and model.expert_dtype == "nvfp4" and model.native_kv_dtype == "fp8"
    assert model.expert_format("fp8") == "nvfp4" and model.expert_format("bf16") == "bf16"
    # one format throughout is that format; three formats are not read
    nvfp4 = {"a.experts": {"quant_algo": "NVFP4"}, "b.q_proj": {"quant_algo": "NVFP4"}}
    same = {"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION", "quantized_layers": nvfp4}
    assert (checkpoint_format({"quantization_config": same}, moe=True).weights,
            checkpoint_format({"quantization_config": same}, moe=True).experts) == ("nvfp4", "")
    three = {**same, "quantized_layers": {**nvfp4, "c.k_proj": {"quant_algo": "FP8"}}}
    assert not checkpoint_format({"quantization_config": three}, moe=True).read


def test_gpt_oss_mxfp4_covers_its_experts_and_a_dense_models_all_weights() -> None:
    moe = checkpoint_format({"quantization_config": {"quant_method": "mxfp4"}}, moe=True)
    dense = checkpoint_format({"quantization_config": {"quant_method": "mxfp4"}})
    assert (moe.weights, moe.experts) == ("", "mxfp4") and (dense.weights, dense.experts) == ("mxfp4", "")


@pytest.mark.parametrize(("quant", "said"), [
    ({"quant_method": "bitsandbytes", "load_in_4bit": True}, "quant_method 'bitsandbytes' is not read"),
    ({"quant_method": "gptq", "bits": 8, "group_size": 128}, "quant_method gptq with bits 8"),
    ({"quant_method": "awq", "bits": "4"}, "quant_method awq with bits '4'"),
    ({"quant_method": "modelopt", "quant_algo": "W4A8_MXFP4_FP8"}, "quant_algo 'W4A8_MXFP4_FP8' is not read"),
    ({"quant_method": "modelopt", "quant_algo": 7}, "quant_algo 7 is not read"),
    ({"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION", "quantized_layers": [1]}, "is not read"),
    ({"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION", "quantized_layers": {"a": 1}}, "is not read"),
    ({"quant_method": "compressed-tensors", "config_groups": [1]}, "config_groups of a format not read"),
    ({"quant_method": "compressed-tensors", "config_groups": {}}, "config_groups of a format not read"),
    ({"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": "fp8"}}}, "format not read"),
    (_ct({"num_bits": 8, "type": "int"}, None, "pack-quantized"), "format not read"),
    (_ct({"num_bits": 4, "type": "float", "group_size": 64}, None, "x"), "format not read"),
    (_ct({"num_bits": True, "type": "float"}, None, "x"), "format not read"),
    ({"quant_method": "compressed-tensors", "config_groups": {
        "a": FP8_DYNAMIC["config_groups"]["group_0"],
        "b": {**W4A16["config_groups"]["group_0"], "targets": ["re:.*mlp.*"]}}},
     "give attention fp8 and the dense MLP int4: formats mixed beyond the experts' and the rest's"),
    ({"quant_method": "\x1b[2Jevil\u202e" + "x" * 500}, "is not read"),
    ("not an object", "quantization_config is not an object"),
])
def test_a_format_not_read_is_said_and_sized_in_torch_dtype(tmp_path: Path, quant: Any, said: str) -> None:
    (tmp_path / "model-00001.safetensors").write_bytes(b"\0" * 4096)
    model = resolve_model(_write(tmp_path, {**LLAMA, "quantization_config": quant}))
    assert said in model.source and "give --dtype for its format" in model.source
    assert model.native_dtype == "bf16" and model.weight_bytes is None and model.native_kv_dtype == ""
    assert "\x1b" not in model.source and "\u202e" not in model.source and len(model.source) < 600


def test_a_kv_format_not_modelled_is_said_and_the_weights_still_read() -> None:
    fmt = checkpoint_format({"quantization_config": {"quant_method": "modelopt", "quant_algo": "NVFP4",
                                                     "kv_cache_quant_algo": "NVFP4_AFFINE"}})
    assert fmt.weights == "nvfp4" and fmt.kv == ""
    assert "its KV cache 'NVFP4_AFFINE' is not modelled (give --kv-dtype)" in fmt.note


def test_the_sidecar_is_read_only_where_config_json_declares_nothing(tmp_path: Path) -> None:
    model = resolve_model(_write(tmp_path, {**LLAMA, "quantization_config": FP8_DYNAMIC}, MODELOPT_SIDECAR))
    assert model.native_dtype == "fp8" and model.native_kv_dtype == ""


@pytest.mark.parametrize(("sidecar", "read"), [
    ({"quantization": [1]}, False), ([1], False), ({"producer": {}}, False), ({"quantization": {}}, False),
])
def test_a_sidecar_without_a_usable_quantization_object(tmp_path: Path, sidecar: Any, read: bool) -> None:
    model = resolve_model(_write(tmp_path, LLAMA, sidecar))
    assert model.native_dtype == ("nvfp4" if read else "bf16")


@pytest.mark.parametrize(("text", "said"), [("{bad", "not JSON"), ("[" * 100_000, "nested deeper than 64")])
def test_a_sidecar_that_is_not_json_is_one_error_naming_it(tmp_path: Path, text: str, said: str) -> None:
    with pytest.raises(ConfigError, match=said) as caught:
        resolve_model(_write(tmp_path, LLAMA, text))
    assert "hf_quant_config.json" in str(caught.value)


def test_a_built_in_model_in_nvfp4_on_b200_gets_an_fp8_cache() -> None:
    d = _deployment(EstimateSpec(dtype="nvfp4"), "llama-3.3-70b", "B200")
    assert d.kv_dtype == "fp8" and "B200" in hardware_table()


def test_a_declared_nvfp4_cache_is_the_default_on_blackwell_and_refused_by_name_elsewhere(tmp_path: Path) -> None:
    sidecar = {"quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": "NVFP4", "exclude_modules": ["lm_head"]}}
    path = _write(tmp_path, LLAMA, sidecar)
    assert resolve_model(path).native_kv_dtype == "nvfp4"
    d = _deployment(EstimateSpec(), path, "B200")
    assert d.kv_dtype == "nvfp4" and d.kv_element_bytes == 4.5 / 8 and d.attention_compute_dtype == "fp8"
    with pytest.raises(ConfigError, match=r"checkpoint declares a KV cache in nvfp4, the default while it runs in its "
                                          r"own weights: an NVFP4 KV cache needs .* H100-SXM has none; give --kv-dtype "
                                          r"fp8"):
        _deployment(EstimateSpec(), path, "H100")
    assert _deployment(EstimateSpec(kv_dtype="fp8"), path, "H100").kv_dtype == "fp8"


def _int4_group(size: Any, symmetric: bool = True, strategy: str = "group") -> dict[str, Any]:
    return {"targets": ["Linear"], "weights": {"num_bits": 4, "type": "int", "strategy": strategy,
                                               "group_size": size, "symmetric": symmetric}}


@pytest.mark.parametrize(("quant", "bits", "said"), [
    ({"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True}, 4 + 20 / 128,
     "groups of 128 with zero points (4.156 bits)"),
    ({"quant_method": "awq", "bits": 4, "group_size": 64, "zero_point": False}, 4 + 16 / 64, "groups of 64 (4.250"),
    ({"quant_method": "gptq", "bits": 4, "group_size": 32, "sym": True}, 4 + 20 / 32, "groups of 32 with zero"),
    ({"quant_method": "gptq", "bits": 4, "group_size": -1}, 4 + 20 / 8192, "groups of a row (4.002 bits)"),
    ({"quant_method": "compressed-tensors", "config_groups": {"g": _int4_group(32, symmetric=False)}},
     4 + 20 / 32, "compressed-tensors int4, groups of 32 with zero points (4.625 bits)"),
    ({"quant_method": "compressed-tensors", "config_groups": {"g": _int4_group(None, strategy="channel")}},
     4 + 16 / 8192, "groups of a row"),
    ({"quant_method": "compressed-tensors", "config_groups": {"g": _int4_group(None, strategy="tensor")}}, 4.0,
     "one scale a matrix (4.000 bits)"),
])
def test_a_4_bit_checkpoints_groups_size_its_weights(quant: dict[str, Any], bits: float, said: str) -> None:
    """AutoAWQ and GPTQ store an fp16 scale and a 4-bit zero point (packed eight to an int32) for each group of a
    row's weights, compressed-tensors a 16-bit scale and, asymmetric, a packed 4-bit zero point: the bits a weight
    follow the config's group size, not the format's 128."""
    fmt = checkpoint_format({**LLAMA, "quantization_config": quant})
    assert fmt.bits == pytest.approx(bits) and said in fmt.note
    model = model_from_config({**LLAMA, "quantization_config": quant}, "x")
    embeddings = 2 * 128256 * 8192
    assert model.weight_bytes_for(model.native_dtype) == pytest.approx(
        (model.params - embeddings) * bits / 8 + embeddings * 2)
    # another format than its own takes that format's bits
    other = "gptq" if model.native_dtype == "awq" else "awq"
    assert model.bits_for(other) == 4 + 20 / 128


@pytest.mark.parametrize(("quant", "said"), [
    ({"quant_method": "awq", "group_size": "128"}, "its group_size '128' is not read: groups of 128 taken"),
    ({"quant_method": "gptq", "group_size": 0}, "its group_size 0 is not read"),
    ({"quant_method": "gptq", "group_size": True}, "its group_size true is not read"),
    ({"quant_method": "awq", "group_size": 1 << 40}, "is not read: groups of 128 taken"),
    ({"quant_method": "compressed-tensors", "config_groups": {
        "a": _int4_group(128), "b": {**_int4_group(32), "targets": ["re:.*mlp.*"]}}},
     "its schemes' groups differ: groups of 128 taken"),
])
def test_a_group_size_not_read_is_said_and_the_formats_own_taken(quant: dict[str, Any], said: str) -> None:
    fmt = checkpoint_format({**LLAMA, "quantization_config": quant})
    assert fmt.bits == 0 and said in fmt.note and fmt.weights in ("awq", "gptq", "int4")


def test_the_weights_arithmetic_gives_the_checkpoints_own_bits(tmp_path: Path) -> None:
    from tokometer.perf.explain import weights_arithmetic

    quant = {"quant_method": "gptq", "bits": 4, "group_size": 32, "desc_act": True}
    d = _deployment(EstimateSpec(), _write(tmp_path, {**LLAMA, "quantization_config": quant}), "H100")
    text = weights_arithmetic(d)
    assert "× 4.625 bits / 8" in text and "the groups its config declares" in text
    assert "× 4.156 bits / 8" in weights_arithmetic(_deployment(EstimateSpec(dtype="awq"), "llama-3.1-70b", "H100"))
