"""Built-in model table: common open models, so estimates work offline and without a download.

Shapes are copied from each model's ``config.json`` on the Hugging Face Hub; parameter counts are
the published totals (safetensors metadata). Gemma 3 4B/12B/27B counts include their ~0.4 B vision
tower, which a text-only request does not run; DeepSeek-V3/R1 counts leave out the 14 B
multi-token-prediction module. Add a model by giving ``tokometer estimate`` its config.json or GGUF
instead.
"""

from __future__ import annotations

from typing import Any

from tokometer.perf.model import ModelSpec

__all__ = ["BUILTIN_MODELS", "MODEL_ALIASES"]


def _m(name: str, hf_id: str, params: float, layers: int, hidden: int, heads: int, kv_heads: int,
       head_dim: int, vocab: int, max_context: int, intermediate: int, *, tied: bool = False,
       **extra: Any) -> ModelSpec:
    return ModelSpec(name=name, params=params, layers=layers, hidden=hidden, heads=heads, kv_heads=kv_heads,
                     head_dim=head_dim, vocab=vocab, max_context=max_context, intermediate=intermediate,
                     tied_embeddings=tied, hf_id=hf_id, **extra)


_DEEPSEEK: dict[str, Any] = {"active_params": 37e9, "experts": 256, "experts_per_token": 8, "v_head_dim": 128,
             "kv_lora_rank": 512, "qk_rope_head_dim": 64, "native_dtype": "fp8"}

BUILTIN_MODELS: dict[str, ModelSpec] = {m.name: m for m in (
    _m("llama-3.1-8b", "meta-llama/Llama-3.1-8B-Instruct", 8.03e9, 32, 4096, 32, 8, 128, 128256, 131072, 14336),
    _m("llama-3.1-70b", "meta-llama/Llama-3.1-70B-Instruct", 70.55e9, 80, 8192, 64, 8, 128, 128256, 131072,
       28672),
    _m("llama-3.1-405b", "meta-llama/Llama-3.1-405B-Instruct", 405.85e9, 126, 16384, 128, 8, 128, 128256, 131072,
       53248),
    _m("llama-3.2-1b", "meta-llama/Llama-3.2-1B-Instruct", 1.24e9, 16, 2048, 32, 8, 64, 128256, 131072, 8192,
       tied=True),
    _m("llama-3.2-3b", "meta-llama/Llama-3.2-3B-Instruct", 3.21e9, 28, 3072, 24, 8, 128, 128256, 131072, 8192,
       tied=True),
    _m("llama-3.3-70b", "meta-llama/Llama-3.3-70B-Instruct", 70.55e9, 80, 8192, 64, 8, 128, 128256, 131072, 28672),
    _m("qwen2.5-0.5b", "Qwen/Qwen2.5-0.5B-Instruct", 0.49e9, 24, 896, 14, 2, 64, 151936, 32768, 4864, tied=True),
    _m("qwen2.5-7b", "Qwen/Qwen2.5-7B-Instruct", 7.62e9, 28, 3584, 28, 4, 128, 152064, 32768, 18944),
    _m("qwen2.5-14b", "Qwen/Qwen2.5-14B-Instruct", 14.77e9, 48, 5120, 40, 8, 128, 152064, 32768, 13824),
    _m("qwen2.5-72b", "Qwen/Qwen2.5-72B-Instruct", 72.71e9, 80, 8192, 64, 8, 128, 152064, 32768, 29568),
    _m("mistral-7b", "mistralai/Mistral-7B-Instruct-v0.3", 7.25e9, 32, 4096, 32, 8, 128, 32768, 32768, 14336),
    _m("mixtral-8x7b", "mistralai/Mixtral-8x7B-Instruct-v0.1", 46.70e9, 32, 4096, 32, 8, 128, 32000, 32768, 14336,
       active_params=12.88e9, experts=8, experts_per_token=2),
    _m("gemma-3-270m", "google/gemma-3-270m-it", 0.268e9, 18, 640, 4, 1, 256, 262144, 32768, 2048, tied=True),
    _m("gemma-3-1b", "google/gemma-3-1b-it", 1.00e9, 26, 1152, 4, 1, 256, 262144, 32768, 6912, tied=True),
    _m("gemma-3-4b", "google/gemma-3-4b-it", 4.30e9, 34, 2560, 8, 4, 256, 262208, 131072, 10240, tied=True),
    _m("gemma-3-12b", "google/gemma-3-12b-it", 12.19e9, 48, 3840, 16, 8, 256, 262208, 131072, 15360, tied=True),
    _m("gemma-3-27b", "google/gemma-3-27b-it", 27.43e9, 62, 5376, 32, 16, 128, 262208, 131072, 21504, tied=True),
    _m("deepseek-v3", "deepseek-ai/DeepSeek-V3", 671e9, 61, 7168, 128, 128, 192, 129280, 163840, 18432, **_DEEPSEEK),
    _m("deepseek-r1", "deepseek-ai/DeepSeek-R1", 671e9, 61, 7168, 128, 128, 192, 129280, 163840, 18432, **_DEEPSEEK),
)}

# Other spellings people use (besides the Hub ids, which match by themselves).
MODEL_ALIASES: dict[str, str] = {
    "mixtral-8x7b-v0.1": "mixtral-8x7b", "mistral-7b-v0.3": "mistral-7b", "deepseek-v3-0324": "deepseek-v3",
}
