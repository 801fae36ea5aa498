"""Model architecture facts that engine settings depend on: parameters, layers, KV heads, head size.

Found, in order, from: a local model directory's ``config.json`` (plus its safetensors index for
the exact weight size); a small built-in table of common models (so planning works offline); the
Hugging Face Hub (``config.json`` only, if ``huggingface_hub`` is installed and the hub reachable).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tokometer.errors import EngineError

__all__ = ["BUILTIN_ARCHS", "DTYPE_BYTES", "ModelArch", "arch_from_config", "resolve_arch"]

DTYPE_BYTES = {"float32": 4.0, "float16": 2.0, "bfloat16": 2.0, "fp8": 1.0}


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


def _arch(name: str, params: float, layers: int, kv_heads: int, head_dim: int, max_context: int) -> ModelArch:
    return ModelArch(name, params, layers, kv_heads, head_dim, max_context)


# From each model's config.json on the Hugging Face Hub; params from its safetensors metadata.
BUILTIN_ARCHS: dict[str, ModelArch] = {
    "llama-3.1-8b": _arch("meta-llama/Llama-3.1-8B-Instruct", 8.03e9, 32, 8, 128, 131072),
    "llama-3.1-70b": _arch("meta-llama/Llama-3.1-70B-Instruct", 70.55e9, 80, 8, 128, 131072),
    "llama-3.2-1b": _arch("meta-llama/Llama-3.2-1B-Instruct", 1.24e9, 16, 8, 64, 131072),
    "llama-3.2-3b": _arch("meta-llama/Llama-3.2-3B-Instruct", 3.21e9, 28, 8, 128, 131072),
    "qwen2.5-0.5b": _arch("Qwen/Qwen2.5-0.5B-Instruct", 0.49e9, 24, 2, 64, 32768),
    "qwen2.5-7b": _arch("Qwen/Qwen2.5-7B-Instruct", 7.62e9, 28, 4, 128, 32768),
    "mistral-7b": _arch("mistralai/Mistral-7B-Instruct-v0.3", 7.25e9, 32, 8, 128, 32768),
}


def _key(name: str) -> str:
    key = name.strip().lower().rsplit("/", 1)[-1].replace("-instruct", "")
    for suffix in ("-it", "-chat", "-v0.3"):
        key = key.removesuffix(suffix)
    return key


def _estimate_params(cfg: dict[str, Any], head_dim: int, kv_heads: int) -> float:
    hidden = int(cfg["hidden_size"])
    heads = int(cfg.get("num_attention_heads", hidden // head_dim))
    layers = int(cfg["num_hidden_layers"])
    vocab = int(cfg.get("vocab_size", 32000))
    inter = int(cfg.get("intermediate_size", 4 * hidden))
    attention = hidden * heads * head_dim * 2 + hidden * kv_heads * head_dim * 2  # q, o; k, v
    mlp = 3 * hidden * inter  # gate, up, down
    embeddings = vocab * hidden * (1 if cfg.get("tie_word_embeddings") else 2)
    return float(layers * (attention + mlp) + embeddings)


def arch_from_config(cfg: dict[str, Any], name: str, weight_bytes: float | None = None,
                     source: str = "config.json") -> ModelArch:
    """A ModelArch from a Hugging Face ``config.json`` (a multimodal one's ``text_config`` is used)."""
    cfg = {**cfg, **cfg.get("text_config", {})}
    try:
        heads = int(cfg["num_attention_heads"])
        head_dim = int(cfg.get("head_dim") or int(cfg["hidden_size"]) // heads)
        kv_heads = int(cfg.get("num_key_value_heads") or heads)
        layers = int(cfg["num_hidden_layers"])
        max_context = int(cfg.get("max_position_embeddings") or cfg.get("max_seq_len") or 4096)
        dtype = str(cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16")
        params = _estimate_params(cfg, head_dim, kv_heads)
    except (KeyError, TypeError, ValueError) as exc:
        raise EngineError(f"{name}: config.json lacks what memory planning needs ({exc}); "
                          "pass --max-model-len yourself") from exc
    if weight_bytes:
        params = weight_bytes / DTYPE_BYTES.get(dtype, 2.0)
    return ModelArch(name, params, layers, kv_heads, head_dim, max_context, dtype, weight_bytes, source)


def _weights_on_disk(directory: Path) -> float | None:
    index = directory / "model.safetensors.index.json"
    if index.is_file():
        try:
            total = json.loads(index.read_text("utf-8")).get("metadata", {}).get("total_size")
            if total:
                return float(total)
        except (OSError, ValueError):
            pass
    sizes = [p.stat().st_size for p in directory.glob("*.safetensors")]
    return float(sum(sizes)) if sizes else None


def _from_hub(model: str) -> ModelArch | None:
    try:
        from huggingface_hub import hf_hub_download
    except ImportError:
        return None
    try:
        path = hf_hub_download(model, "config.json")
        cfg = json.loads(Path(path).read_text("utf-8"))
    except Exception:  # offline, gated, missing: the caller explains what to do instead
        return None
    return arch_from_config(cfg, model, source="config.json from the Hugging Face Hub (params estimated)")


def resolve_arch(model: str) -> ModelArch:
    """The architecture of ``model``: a local dir with config.json, a built-in alias or HF id, or the Hub."""
    directory = Path(model).expanduser()
    if (directory / "config.json").is_file():
        try:
            cfg = json.loads((directory / "config.json").read_text("utf-8"))
        except (OSError, ValueError) as exc:
            raise EngineError(f"cannot read {directory / 'config.json'}: {exc}") from exc
        return arch_from_config(cfg, str(directory), _weights_on_disk(directory), f"{directory / 'config.json'}")
    key = _key(model)
    for alias, arch in BUILTIN_ARCHS.items():
        if key in (alias, _key(arch.name)):
            return arch if "/" not in model else replace(arch, name=model)
    found = _from_hub(model)
    if found is not None:
        return found
    known = ", ".join(sorted(BUILTIN_ARCHS))
    raise EngineError(f"unknown model {model!r}: pass a local directory with config.json, a Hub id reachable with "
                      f"huggingface_hub installed, or one of the built-in names ({known})")
