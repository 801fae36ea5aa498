"""Model architecture facts that engine settings depend on: parameters, layers, KV heads, head size.

A thin view over `tokometer.perf`, the one home of model facts: a `ModelArch` is the part of a
`tokometer.perf.ModelSpec` the vLLM planner needs, plus the name to pass to the engine. Found, in
order, from: a local model directory's ``config.json`` (plus its safetensors files for the exact
weight size); the built-in model table (so planning works offline); the Hugging Face Hub
(``config.json`` only, if ``huggingface_hub`` is installed and the hub reachable).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tokometer.errors import ConfigError, EngineError
from tokometer.perf.catalog import BUILTIN_MODELS
from tokometer.perf.loaders import model_from_config, resolve_model, weights_on_disk
from tokometer.perf.model import ModelSpec

__all__ = ["BUILTIN_ARCHS", "DTYPE_BYTES", "ModelArch", "arch_from_config", "arch_from_spec", "resolve_arch"]

DTYPE_BYTES = {"float32": 4.0, "float16": 2.0, "bfloat16": 2.0, "fp8": 1.0}
_TORCH_NAMES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "fp8": "fp8"}


@dataclass(frozen=True)
class ModelArch:
    """What memory planning needs to know about a transformer."""

    name: str  # what to pass to the engine (a HF id or a local path)
    params: float  # parameter count
    layers: int
    kv_heads: int
    head_dim: int
    max_context: int
    dtype: str = "bfloat16"
    weight_bytes: float | None = None  # exact size of the weights on disk, when known
    source: str = "built-in table"


def arch_from_spec(spec: ModelSpec, name: str | None = None, dtype: str | None = None) -> ModelArch:
    """The planner's view of a `ModelSpec` (multi-head latent attention is not modelled by the planner)."""
    if spec.is_mla:
        raise EngineError(f"{spec.name} uses multi-head latent attention, whose KV cache the vLLM planner does not "
                          "model yet; pass --max-model-len yourself")
    return ModelArch(name or spec.hf_id or spec.name, spec.params, spec.layers, spec.kv_heads, spec.head_dim,
                     spec.max_context, dtype or _TORCH_NAMES.get(spec.native_dtype, "bfloat16"), spec.weight_bytes,
                     spec.source)


# The built-in table of `tokometer.perf.catalog` (its MLA models left out), by short name.
BUILTIN_ARCHS: dict[str, ModelArch] = {key: arch_from_spec(spec) for key, spec in BUILTIN_MODELS.items()
                                       if not spec.is_mla}


def arch_from_config(cfg: dict[str, Any], name: str, weight_bytes: float | None = None,
                     source: str = "config.json") -> ModelArch:
    """A ModelArch from a Hugging Face ``config.json`` (a multimodal one's ``text_config`` is used)."""
    merged = {**cfg, **cfg.get("text_config", {})}
    try:
        spec = model_from_config(cfg, name, weight_bytes, source)
    except ConfigError as exc:
        raise EngineError(f"{name}: config.json lacks what memory planning needs ({exc}); "
                          "pass --max-model-len yourself") from exc
    dtype = str(merged.get("torch_dtype") or merged.get("dtype") or "bfloat16")
    return replace(arch_from_spec(spec, name, dtype), source=source)


def resolve_arch(model: str) -> ModelArch:
    """The architecture of ``model``: a local dir with config.json, a built-in alias or HF id, or the Hub."""
    directory = Path(model).expanduser()
    if (directory / "config.json").is_file():
        try:
            cfg = json.loads((directory / "config.json").read_text("utf-8"))
        except (OSError, ValueError) as exc:
            raise EngineError(f"cannot read {directory / 'config.json'}: {exc}") from exc
        return arch_from_config(cfg, str(directory), weights_on_disk(directory), f"{directory / 'config.json'}")
    try:
        spec = resolve_model(model)
    except ConfigError as exc:
        raise EngineError(str(exc)) from exc
    if spec.name in BUILTIN_MODELS:
        arch = arch_from_spec(spec)
        return arch if "/" not in model else replace(arch, name=model)
    return arch_from_spec(spec, model)
