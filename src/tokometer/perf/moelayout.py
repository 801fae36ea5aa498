"""Which layers of a mixture of experts hold its experts, and the widths of its dense MLPs and shared experts, as a
Hugging Face config says: DeepSeek's first ``first_k_dense_replace`` layers are dense; Llama 4 has a dense layer
(``intermediate_size_mlp``) between MoE layers when ``interleave_moe_layer_step`` is 2 (its MoE layers are every
step-th, the first at step − 1), and one shared expert of ``intermediate_size``; a shared expert is
``shared_expert_intermediate_size`` (Qwen) or ``n_shared_experts`` × ``moe_intermediate_size`` (DeepSeek) wide.

The one rule the parameter count (`tokometer.perf.loaders`) and the match of a checkpoint's unquantised modules
(`tokometer.perf.unquantized`) both read. The config's whole numbers are checked by its reader first (not negative);
the MoE layers are a `range`, whatever the number of layers: its size and membership take no memory or time.
"""

from __future__ import annotations

from typing import Any

__all__ = ["moe_layout"]


def moe_layout(cfg: dict[str, Any], layers: int, inter: int) -> tuple[range, int, int]:
    """(the MoE layers' indices, a dense layer's MLP width, a MoE layer's shared-expert width) of a mixture of experts
    of ``layers`` layers whose ``intermediate_size`` is ``inter`` (module docstring)."""
    moe_inter = int(cfg.get("moe_intermediate_size") or 0)
    shared = (int(cfg.get("shared_expert_intermediate_size") or cfg.get("shared_intermediate_size") or 0)
              or int(cfg.get("n_shared_experts") or 0) * moe_inter)
    if str(cfg.get("model_type", "")).startswith("llama4"):
        step = max(1, int(cfg.get("interleave_moe_layer_step") or 1))
        return range(step - 1, layers, step), int(cfg.get("intermediate_size_mlp") or inter), shared or inter
    first_moe = min(max(int(cfg.get("first_k_dense_replace") or 0), 0), max(layers, 0))
    return range(first_moe, layers), inter, shared
