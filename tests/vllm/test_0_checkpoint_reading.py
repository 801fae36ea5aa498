"""A checkpoint's quantisation config is read as the real vLLM reads it: each config below is given to vLLM's own
code in its venv and to `tokometer.perf.checkpointquant`, and the two must agree. The KV-cache format it takes when
``--kv-cache-dtype`` is ``auto`` (the ModelOpt resolution its engine arguments call, and the compressed-tensors KV
scheme check its attention layers run, after which they take fp8), the modules a ``modules_to_not_convert``
list leaves unquantised (``is_layer_skipped``, as its fp8 and AWQ configs call it), and the ``config_groups``
scheme each module takes (``find_matched_target``). No server is started."""

from __future__ import annotations

import fnmatch
import json
import subprocess
from typing import Any

from tests.vllm.conftest import require_vllm
from tokometer.perf.checkpointquant import checkpoint_format

FP8_KV = {"num_bits": 8, "type": "float", "strategy": "tensor", "dynamic": False, "symmetric": True}
W4A16 = {"quant_method": "compressed-tensors", "format": "pack-quantized", "ignore": ["lm_head"],
         "config_groups": {"group_0": {"targets": ["Linear"], "weights": {
             "num_bits": 4, "type": "int", "strategy": "group", "group_size": 128, "symmetric": True}}}}
CONFIGS: list[dict[str, Any]] = [
    {"quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_quant_algo": "FP8"},
    {"quant_method": "modelopt", "quant_algo": "NVFP4", "kv_cache_quant_algo": "NVFP4"},
    {"quant_method": "modelopt", "quant_algo": "NVFP4", "kv_cache_quant_algo": "nvfp4"},
    {"quant_method": "modelopt", "quant_algo": "NVFP4", "kv_cache_quant_algo": "INT4"},
    {"quant_method": "modelopt", "quant_algo": "NVFP4"},
    {"quant_method": "modelopt", "quant_algo": "NVFP4", "kv_cache_scheme": FP8_KV},
    {"quant_method": "modelopt", "quant_algo": "NVFP4", "kv_cache_scheme": {**FP8_KV, "dynamic": True}},
    {"quant_method": "modelopt", "quant_algo": "NVFP4", "kv_cache_scheme": {"num_bits": 8, "type": "float"}},
    {"quant_method": "modelopt", "quant_algo": "NVFP4", "kv_cache_scheme": {"num_bits": 4, "type": "float"}},
    {"quant_method": "modelopt", "quant_algo": "NVFP4", "kv_cache_scheme": {"num_bits": 8, "type": "int"}},
    {"quant_method": "modelopt", "quant_algo": "FP8", "kv_cache_scheme": FP8_KV, "kv_cache_quant_algo": "NVFP4"},
    {"quant_method": "modelopt_fp4", "quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8"},
    W4A16,
    {**W4A16, "kv_cache_scheme": FP8_KV},
    {**W4A16, "kv_cache_scheme": {**FP8_KV, "strategy": "attn_head"}},
    {**W4A16, "kv_cache_scheme": {**FP8_KV, "dynamic": True}},
    {**W4A16, "kv_cache_scheme": {**FP8_KV, "type": "int"}},
    {**W4A16, "kv_cache_scheme": {**FP8_KV, "num_bits": 4}},
    {**W4A16, "kv_cache_scheme": {**FP8_KV, "symmetric": False}},
    {**W4A16, "kv_cache_scheme": {**FP8_KV, "strategy": "channel"}},
    {**W4A16, "kv_cache_scheme": {"num_bits": 8, "type": "float", "symmetric": True}},
]

VLLM_SIDE = """
import json, sys
from vllm.utils.torch_utils import get_kv_cache_quant_algo_string
from vllm.model_executor.layers.quantization.compressed_tensors.compressed_tensors import (
    CompressedTensorsKVCacheMethod)
out = []
for quant in json.load(sys.stdin):
    if quant["quant_method"].startswith("modelopt"):
        out.append({"fp8_e4m3": "fp8", "nvfp4": "nvfp4"}.get(get_kv_cache_quant_algo_string(quant) or "", ""))
        continue
    scheme = quant.get("kv_cache_scheme")
    try:
        CompressedTensorsKVCacheMethod.validate_kv_cache_scheme(scheme)
    except Exception:
        out.append("refused")
        continue
    out.append("" if scheme is None else "fp8")  # attention.py: a scheme makes an auto cache fp8
print(json.dumps(out))
"""


def test_the_cache_a_checkpoint_declares_is_the_one_vllm_takes() -> None:
    require_vllm()
    from tokometer.engines.vllm_env import find_prepared_env

    venv = find_prepared_env()
    assert venv is not None
    done = subprocess.run([str(venv / "bin" / "python"), "-c", VLLM_SIDE], input=json.dumps(CONFIGS),
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    vllm = json.loads(done.stdout.strip().splitlines()[-1])
    ours = []
    for quant in CONFIGS:
        fmt = checkpoint_format({"torch_dtype": "bfloat16", "quantization_config": quant})
        ours.append("refused" if "is not one vLLM loads" in fmt.note else fmt.kv)
    assert ours == vllm
    assert {"fp8", "nvfp4", "", "refused"} <= set(vllm)  # every outcome is among the cases


MODULES = ["lm_head", "model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.o_proj",
           "model.layers.0.mlp.down_proj", "model.layers.1.block_sparse_moe.gate", "model.layers.1.mlp.gate_proj",
           "model.layers.10.mlp.up_proj", "model.language_model.layers.2.self_attn.k_proj",
           "model.layers.1.mlp.experts", "model.layers.10.mlp.experts", "model.layers.1.block_sparse_moe.experts"]
"""Module names as vLLM's layers see them (``prefix``): a fused expert layer is one name, ``….experts``, as
`tokometer.perf.unquantized` matches a ``modules_to_not_convert`` list against it."""
KEYS = [["gate", "e_score_correction_bias", "lm_head"], ["self_attn"], ["model.layers.0.self_attn.q_proj"],
        ["q_proj", "mlp"], ["model.layers.1.mlp.experts.3.gate_proj"], ["model.layers.1.block_sparse_moe.experts.0.w1"],
        ["model.layers.1"], ["layers.1.mlp"], ["experts"], ["model.language_model.layers.2.self_attn.k_proj", "[*?"]]

VLLM_SKIPS = """
import json, sys
from vllm.model_executor.layers.quantization.utils.quant_utils import is_layer_skipped
cases = json.load(sys.stdin)
print(json.dumps([[is_layer_skipped(name, keys, match_mode=mode) for name in cases["names"]]
                  for keys in cases["keys"] for mode in ("exact", "substring")]))
"""


def _ours(keys: list[str], method: str, name: str) -> bool:
    patterns = checkpoint_format({"quantization_config": {"quant_method": method, "modules_to_not_convert": keys}},
                                 moe=True).exclude
    assert isinstance(patterns, list)
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def test_the_modules_a_list_keeps_are_the_ones_vllm_skips() -> None:
    """vLLM's fp8 takes ``modules_to_not_convert`` as whole names ("exact"), its AWQ as parts of names
    ("substring"); a name under a layer's experts skips that fused layer."""
    require_vllm()
    from tokometer.engines.vllm_env import find_prepared_env

    venv = find_prepared_env()
    assert venv is not None
    names = MODULES
    done = subprocess.run([str(venv / "bin" / "python"), "-c", VLLM_SKIPS],
                          input=json.dumps({"names": names, "keys": KEYS}), capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    vllm = json.loads(done.stdout.strip().splitlines()[-1])
    ours = [[_ours(keys, method, name) for name in names]
            for keys in KEYS for method in ("fp8", "awq")]
    assert ours == vllm
    assert any(any(row) for row in vllm) and not all(all(row) for row in vllm)


IGNORES = [["lm_head", "re:.*self_attn.*"], ["re:.*mlp\\.(gate|up|gate_up|down)_proj.*", "re:.*shared_experts.*"],
           ["model.layers.0.self_attn.q_proj"], ["re:^model\\.layers\\.1\\..*"],
           ["re:model.layers.1.mlp.(?:gate|up)_proj$"], ["re:.*(mlp|self_attn)\\.(gate|q)_proj"],
           ["re:.*block_sparse_moe.gate|lm_head"], ["re:.*gate(_proj)?$"]]
CT_NAMES = [*MODULES, "model.layers.1.mlp.up_proj", "model.layers.3.mlp.shared_experts.down_proj",
            "model.layers.3.mlp.experts.7.gate_proj", "model.layers.1.mlp.gate", "model.layers.11.mlp.gate_proj"]

VLLM_IGNORES = """
import json, sys
from vllm.model_executor.layers.quantization.compressed_tensors.utils import should_ignore_layer
cases = json.load(sys.stdin)
print(json.dumps([[should_ignore_layer(name, ignore) for name in cases["names"]] for ignore in cases["ignores"]]))
"""


def test_a_compressed_tensors_ignore_list_leaves_out_what_vllm_does() -> None:
    """compressed-tensors' ``ignore``: exact names and ``re:`` expressions (matched from the name's start),
    alternatives included, read as the fnmatch patterns that leave out the modules vLLM leaves out."""
    require_vllm()
    from tokometer.engines.vllm_env import find_prepared_env

    venv = find_prepared_env()
    assert venv is not None
    done = subprocess.run([str(venv / "bin" / "python"), "-c", VLLM_IGNORES],
                          input=json.dumps({"names": CT_NAMES, "ignores": IGNORES}), capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    vllm = json.loads(done.stdout.strip().splitlines()[-1])
    ours = []
    for ignore in IGNORES:
        fmt = checkpoint_format({"quantization_config": {**W4A16, "ignore": ignore}})
        assert isinstance(fmt.exclude, list) and not fmt.exclude_problem, ignore
        ours.append([any(fnmatch.fnmatchcase(name, p) for p in fmt.exclude) for name in CT_NAMES])
    assert ours == vllm


def _groups(*groups: tuple[list[str], int]) -> dict[str, Any]:
    """compressed-tensors ``config_groups`` of ``groups`` (targets, a group size that tells each group's scheme
    apart), weights only (vLLM then reads no activations)."""
    return {f"group_{i}": {"targets": targets, "weights": {"num_bits": 4, "type": "int", "strategy": "group",
                                                           "group_size": size, "symmetric": True}}
            for i, (targets, size) in enumerate(groups)}


EXPERTS_RE = "re:.*mlp.experts.*"
GROUPS = [_groups(([EXPERTS_RE], 16), (["Linear"], 128)), _groups((["Linear"], 128), ([EXPERTS_RE], 16)),
          _groups((["Linear"], 128), (["Linear"], 32)), _groups((["re:.*self_attn.*"], 64), (["re:.*mlp.*"], 32)),
          _groups((["re:.*mlp.experts.*down_proj"], 32), ([EXPERTS_RE], 16), (["Linear"], 128)),
          _groups((["model.layers.0.self_attn.q_proj", "re:.*k_proj$"], 32), (["Linear"], 128)),
          _groups(([EXPERTS_RE], 16)), _groups((["LlamaAttention"], 64), (["Linear"], 128)),
          _groups((["re:.*Linear"], 64), (["re:.*self_attn.*"], 32)), _groups((["linear"], 64)),
          _groups((["re:.*block_sparse_moe.experts.*"], 16), (["Linear"], 128)),
          _groups((["re:model.layers.1.mlp.experts.*"], 16), (["RoutedExperts"], 32), (["Linear"], 128)),
          _groups((["re:.*mlp\\.(gate|up)_proj", "re:.*(q|o)_proj$"], 32), (["Linear"], 128))]
"""Groups of distinct schemes (told by their group size) whose targets take the modules in other ways: name before
class in either order, a target written twice, exact names, an attention group vLLM drops, a class by ``re:``,
``linear`` in small letters (no ``RoutedExperts`` then), Mixtral's experts, one layer's experts, alternatives."""
SHAPES = [{"model_type": "qwen3_moe", "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
           "head_dim": 16, "num_hidden_layers": 2, "moe_intermediate_size": 32, "num_experts": 4,
           "num_experts_per_tok": 2},
          {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2,
           "intermediate_size": 128},
          {"model_type": "mixtral", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2,
           "intermediate_size": 128, "num_local_experts": 4, "num_experts_per_tok": 2},
          {"model_type": "qwen2_moe", "hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2,
           "moe_intermediate_size": 32, "shared_expert_intermediate_size": 64, "num_experts": 4,
           "num_experts_per_tok": 2}]
"""Models whose modules `tokometer.perf.unquantized.linear_modules` names: routed experts in each spelling, dense
MLPs and a shared expert."""

VLLM_SCHEMES = """
import copy, json, sys
import torch
from compressed_tensors.quantization import QuantizationArgs
from vllm.model_executor.layers.fused_moe.routed_experts import RoutedExperts as VllmRoutedExperts
from vllm.model_executor.layers.quantization.compressed_tensors.compressed_tensors import CompressedTensorsConfig
from vllm.model_executor.layers.quantization.compressed_tensors.utils import find_matched_target

RoutedExperts = type(VllmRoutedExperts.__name__, (torch.nn.Module,), {})  # the name is what vLLM matches
cases = json.load(sys.stdin)
out = []
for groups in cases["groups"]:
    quant = {"quant_method": "compressed-tensors", "format": "pack-quantized", "config_groups": groups}
    config = CompressedTensorsConfig.from_config(copy.deepcopy(quant))
    config._add_fused_moe_to_target_scheme_map()  # as the first MoE layer's get_moe_method does
    targets = list(config.target_scheme_map)
    row = []
    for name, experts in cases["names"]:
        module = RoutedExperts() if experts else torch.nn.Linear(1, 1)
        target = find_matched_target(name, module, targets)
        weights = None if target is None else config.target_scheme_map[target]["weights"]
        row.append(next((key for key, group in groups.items()
                         if QuantizationArgs.model_validate(group["weights"]) == weights), None))
    out.append(row)
print(json.dumps(out))
"""


def test_each_module_takes_the_compressed_tensors_group_vllm_gives_it() -> None:
    """``config_groups`` targets resolved module by module as vLLM's ``find_matched_target`` resolves them (a
    name or ``re:`` target before a class name, ``Linear`` reaching the routed experts through ``RoutedExperts``),
    over the names `tokometer.perf.unquantized` gives each kind of module."""
    require_vllm()
    from tokometer.engines.vllm_env import find_prepared_env
    from tokometer.perf.schemetargets import module_group, scheme_targets
    from tokometer.perf.unquantized import ROUTED_EXPERTS, linear_modules

    venv = find_prepared_env()
    assert venv is not None
    names = list(dict.fromkeys((name, kind == ROUTED_EXPERTS) for cfg in SHAPES
                               for kind, spellings in linear_modules(cfg) for name in spellings))
    done = subprocess.run([str(venv / "bin" / "python"), "-c", VLLM_SCHEMES],
                          input=json.dumps({"groups": GROUPS, "names": names}), capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    vllm = json.loads(done.stdout.strip().splitlines()[-1])
    ours = [[module_group(scheme_targets(groups), name, experts) for name, experts in names] for groups in GROUPS]
    for groups, mine, theirs in zip(GROUPS, ours, vllm, strict=True):
        differ = [(name, a, b) for (name, _), a, b in zip(names, mine, theirs, strict=True) if a != b]
        assert not differ, (groups, differ[:5])
    assert None in vllm[6] and {"group_0", "group_1", "group_2"} <= {g for row in vllm for g in row}
