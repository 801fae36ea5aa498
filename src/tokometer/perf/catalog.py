"""Built-in model table: common open models, so estimates work offline and without a download.

Shapes are copied from each model's ``config.json`` on the Hugging Face Hub; parameter counts are
the published totals (safetensors metadata, or the model card where a row's ``source`` names it).
Gemma 3 4B/12B/27B counts include their ~0.4 B vision tower, which a text-only request does not
run; DeepSeek-V3/R1/V3.1/V3.2 counts leave out the 14 B multi-token-prediction module. Add a model by
giving ``tokometer estimate`` its config.json or GGUF instead.

Active parameters follow one convention: everything a token passes through, the input embedding
table included (`ModelSpec.matmul_params` takes it out again). gpt-oss's model card counts its active
parameters without that table (5.13 B for gpt-oss-120b): the rows add it back (+ 0.58 B).

Models of 2025 (their rows name the config and the published counts):

- gpt-oss-20b/120b: MoE, 4 of 32/128 experts per token; the experts ship in mxfp4, attention,
  router, embeddings and LM head in bf16 (``expert_dtype``); every other layer attends to a
  128-token sliding window.
- Qwen3 dense (8B, 32B) and MoE (30B-A3B: 8 of 128 experts; 235B-A22B: 8 of 128).
- Llama 4 Scout (16 experts) and Maverick (128 experts, MoE every other layer): one routed expert
  and one shared expert per token. Three layers in four attend within 8,192-token chunks: read and
  cached as a window of that length (`tokometer.perf.model`; an upper bound, a chunk averages half).
- Gemma 3: five layers in six attend to a sliding window (512 tokens up to 1B, 1,024 above).
- DeepSeek V3.1 and V3.2 (as V3: MLA, 8 of 256 experts plus one shared, fp8). V3.2's sparse
  attention (DeepSeek Sparse Attention): its indexer (64 heads of 128) scores every cached token from
  its own fp8 key cache and picks 2,048 per query for the attention (`tokometer.perf.model`); its
  weights (~14 M a layer) are within the published count's rounding.
- Kimi K2: the DeepSeek V3 design with 384 experts (8 per token plus one shared), 64 heads, fp8.
- Qwen3-Next 80B-A3B: 10 of 512 experts plus one shared; three layers in four are linear attention (Gated
  DeltaNet: a 1.1 MB state a sequence and layer, no KV cache), the fourth gated full attention
  (`tokometer.perf.model`). Its count is its shapes' (79.67 B; the model card says 80 B and 3 B activated).
- GLM-4.5 and GLM-4.6 (355B-A32B: 3 dense layers, then 8 of 160 experts plus one shared), GLM-4.5-Air
  (106B-A12B: 1 dense layer, 8 of 128 plus one shared), MiniMax-M2 (230B-A10B: 8 of 256, fp8) and
  Qwen3-Coder-480B-A35B (8 of 160). Their counts are their shapes' (the model cards' active counts leave the
  embeddings and the LM head out).
- Nemotron 3 Nano 30B-A3B: single blocks, 23 Mamba2 (a 2.1 MB fp32 state a sequence each), 6 attention and
  23 mixture-of-experts ones (6 of 128 squared-ReLU experts plus one shared), read as 29 layers (the blocks that
  mix tokens; `tokometer.perf.hybrid`). Its counts are its shapes' (31.58 B, 3.58 B active).

Models benchmark suites and vendor tables still run: Llama 2 7B/13B/70B (MLPerf Inference's Llama 2 70B;
the 7B and 13B attend with every head's own keys), Mixtral 8x22B (8 experts, 2 a token), Mistral Large 2
(123 B dense), Qwen2.5 32B and Qwen3 14B. Distilled and fine-tuned models keep their base model's shapes
and take its row by alias (DeepSeek-R1-Distill-Llama-70B is Llama 3.3 70B; Nemotron 70B is Llama 3.1 70B).
"""

from __future__ import annotations

from typing import Any

from tokometer.perf.model import ModelSpec

__all__ = ["BUILTIN_MODELS", "MODEL_ALIASES"]


def _m(name: str, hf_id: str, params: float, layers: int, hidden: int, heads: int, kv_heads: int,
       head_dim: int, vocab: int, max_context: int, intermediate: int, *, tied: bool = False,
       **extra: Any) -> ModelSpec:
    if extra.get("experts"):  # a mixture of experts: its intermediate size is an expert's, unless stated apart
        extra.setdefault("expert_width", intermediate)
    return ModelSpec(name=name, params=params, layers=layers, hidden=hidden, heads=heads, kv_heads=kv_heads,
                     head_dim=head_dim, vocab=vocab, max_context=max_context, intermediate=intermediate,
                     tied_embeddings=tied, hf_id=hf_id, **extra)


_DEEPSEEK: dict[str, Any] = {"active_params": 37e9, "experts": 256, "experts_per_token": 8, "v_head_dim": 128,
             "kv_lora_rank": 512, "qk_rope_head_dim": 64, "native_dtype": "fp8", "expert_width": 2048}

_GLM45: dict[str, Any] = {"active_params": 33.63e9, "experts": 160, "experts_per_token": 8}
_GLM45_COUNTS = ("3 dense layers, then 89 of 160 experts, 8 a token, and a shared one; 352.8 B total and 33.63 B "
                 "active from its shapes (355 B and 32 B on its model card: the active without the embeddings and "
                 "the LM head; the total with its multi-token-prediction layer, which engines load only to draft)")
_GPT_OSS: dict[str, Any] = {"experts_per_token": 4, "native_dtype": "bf16", "expert_dtype": "mxfp4",
                            "sliding_window": 128}
_GPT_OSS_CARD = "gpt-oss model card (arXiv 2508.10925), table 1"
_QWEN3 = "Qwen3 model card on the Hugging Face Hub"
_SAFETENSORS = "the Hub's safetensors metadata"
_LLAMA4 = "Llama 4 model card (meta-llama/llama-models)"
_LLAMA4_CHUNKS: dict[str, Any] = {  # attention_chunk_size; 3 in 4 layers
    "sliding_window": 8192, "sliding_layers": 36, "chunked_windows": True}


def _gemma3(layers: int, window: int) -> dict[str, Any]:
    """Gemma 3's local attention: five layers in six attend to a window (sliding_window: 512 up to 1B, else 1,024)."""
    return {"sliding_window": window, "sliding_layers": layers - layers // 6}


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
    _m("qwen2.5-32b", "Qwen/Qwen2.5-32B-Instruct", 32.76e9, 64, 5120, 40, 8, 128, 152064, 32768, 27648,
       source="config.json of Qwen/Qwen2.5-32B-Instruct; 32.5 B: its model card"),
    _m("qwen2.5-72b", "Qwen/Qwen2.5-72B-Instruct", 72.71e9, 80, 8192, 64, 8, 128, 152064, 32768, 29568),
    _m("llama-2-7b", "meta-llama/Llama-2-7b-chat-hf", 6.74e9, 32, 4096, 32, 32, 128, 32000, 4096, 11008,
       source=f"config.json of meta-llama/Llama-2-7b-chat-hf; 6.74 B: {_SAFETENSORS}"),
    _m("llama-2-13b", "meta-llama/Llama-2-13b-chat-hf", 13.02e9, 40, 5120, 40, 40, 128, 32000, 4096, 13824,
       source=f"config.json of meta-llama/Llama-2-13b-chat-hf; 13.02 B: {_SAFETENSORS}"),
    _m("llama-2-70b", "meta-llama/Llama-2-70b-chat-hf", 68.98e9, 80, 8192, 64, 8, 128, 32000, 4096, 28672,
       source=f"config.json of meta-llama/Llama-2-70b-chat-hf; 68.98 B: {_SAFETENSORS}"),
    _m("mistral-7b", "mistralai/Mistral-7B-Instruct-v0.3", 7.25e9, 32, 4096, 32, 8, 128, 32768, 32768, 14336),
    _m("mixtral-8x7b", "mistralai/Mixtral-8x7B-Instruct-v0.1", 46.70e9, 32, 4096, 32, 8, 128, 32000, 32768, 14336,
       active_params=12.88e9, experts=8, experts_per_token=2),
    _m("mixtral-8x22b", "mistralai/Mixtral-8x22B-Instruct-v0.1", 140.63e9, 56, 6144, 48, 8, 128, 32768, 65536,
       16384, active_params=39.16e9, experts=8, experts_per_token=2,
       source="config.json of mistralai/Mixtral-8x22B-Instruct-v0.1; 141 B total, 39 B active: Mistral AI's "
       "announcement"),
    _m("mistral-large-2", "mistralai/Mistral-Large-Instruct-2407", 122.61e9, 88, 12288, 96, 8, 128, 32768, 131072,
       28672, source="config.json of mistralai/Mistral-Large-Instruct-2407; 123 B: its model card"),
    _m("gemma-3-270m", "google/gemma-3-270m-it", 0.268e9, 18, 640, 4, 1, 256, 262144, 32768, 2048, tied=True,
       **_gemma3(18, 512)),
    _m("gemma-3-1b", "google/gemma-3-1b-it", 1.00e9, 26, 1152, 4, 1, 256, 262144, 32768, 6912, tied=True,
       **_gemma3(26, 512)),
    _m("gemma-3-4b", "google/gemma-3-4b-it", 4.30e9, 34, 2560, 8, 4, 256, 262208, 131072, 10240, tied=True,
       **_gemma3(34, 1024)),
    _m("gemma-3-12b", "google/gemma-3-12b-it", 12.19e9, 48, 3840, 16, 8, 256, 262208, 131072, 15360, tied=True,
       **_gemma3(48, 1024)),
    _m("gemma-3-27b", "google/gemma-3-27b-it", 27.43e9, 62, 5376, 32, 16, 128, 262208, 131072, 21504, tied=True,
       **_gemma3(62, 1024)),
    _m("deepseek-v3", "deepseek-ai/DeepSeek-V3", 671e9, 61, 7168, 128, 128, 192, 129280, 163840, 18432, **_DEEPSEEK),
    _m("deepseek-r1", "deepseek-ai/DeepSeek-R1", 671e9, 61, 7168, 128, 128, 192, 129280, 163840, 18432, **_DEEPSEEK),
    # gpt-oss: 116.83 B / 20.91 B total; active 5.13 B / 3.61 B without the 0.58 B input table (see above)
    _m("gpt-oss-120b", "openai/gpt-oss-120b", 116.83e9, 36, 2880, 64, 8, 64, 201088, 131072, 2880,
       active_params=5.71e9, experts=128, sliding_layers=18,
       source=f"config.json of openai/gpt-oss-120b; counts: {_GPT_OSS_CARD}", **_GPT_OSS),
    _m("gpt-oss-20b", "openai/gpt-oss-20b", 20.91e9, 24, 2880, 64, 8, 64, 201088, 131072, 2880,
       active_params=4.19e9, experts=32, sliding_layers=12,
       source=f"config.json of openai/gpt-oss-20b; counts: {_GPT_OSS_CARD}", **_GPT_OSS),
    _m("qwen3-8b", "Qwen/Qwen3-8B", 8.19e9, 36, 4096, 32, 8, 128, 151936, 40960, 12288,
       source=f"config.json of Qwen/Qwen3-8B; 8.2 B: {_QWEN3}"),
    _m("qwen3-14b", "Qwen/Qwen3-14B", 14.77e9, 40, 5120, 40, 8, 128, 151936, 40960, 17408,
       source=f"config.json of Qwen/Qwen3-14B; 14.8 B: {_QWEN3}"),
    _m("qwen3-32b", "Qwen/Qwen3-32B", 32.8e9, 64, 5120, 64, 8, 128, 151936, 40960, 25600,
       source=f"config.json of Qwen/Qwen3-32B; 32.8 B: {_QWEN3}"),
    _m("qwen3-30b-a3b", "Qwen/Qwen3-30B-A3B", 30.5e9, 48, 2048, 32, 4, 128, 151936, 40960, 768,
       active_params=3.3e9, experts=128, experts_per_token=8,
       source=f"config.json of Qwen/Qwen3-30B-A3B; 30.5 B total, 3.3 B active: {_QWEN3}"),
    _m("qwen3-235b-a22b", "Qwen/Qwen3-235B-A22B", 235e9, 94, 4096, 64, 4, 128, 151936, 40960, 1536,
       active_params=22e9, experts=128, experts_per_token=8,
       source=f"config.json of Qwen/Qwen3-235B-A22B; 235 B total, 22 B active: {_QWEN3}"),
    _m("llama-4-scout", "meta-llama/Llama-4-Scout-17B-16E-Instruct", 109e9, 48, 5120, 40, 8, 128, 202048,
       10485760, 8192, active_params=17e9, experts=16, experts_per_token=1, **_LLAMA4_CHUNKS,
       source=f"text_config of meta-llama/Llama-4-Scout-17B-16E-Instruct; 109 B total, 17 B active: {_LLAMA4}"),
    _m("llama-4-maverick", "meta-llama/Llama-4-Maverick-17B-128E-Instruct", 400e9, 48, 5120, 40, 8, 128, 202048,
       1048576, 8192, active_params=17e9, experts=128, experts_per_token=1, **_LLAMA4_CHUNKS,
       source=f"text_config of meta-llama/Llama-4-Maverick-17B-128E-Instruct; 400 B total, 17 B active: {_LLAMA4}"),
    _m("deepseek-v3.1", "deepseek-ai/DeepSeek-V3.1", 671e9, 61, 7168, 128, 128, 192, 129280, 163840, 18432,
       source="config.json of deepseek-ai/DeepSeek-V3.1 (the V3 shapes); 671 B + 14 B MTP: its model card",
       **_DEEPSEEK),
    _m("deepseek-v3.2", "deepseek-ai/DeepSeek-V3.2", 671e9, 61, 7168, 128, 128, 192, 129280, 163840, 18432,
       source="config.json of deepseek-ai/DeepSeek-V3.2 (the V3 shapes; sparse attention: index_topk 2048, "
       "index_n_heads 64, index_head_dim 128); 671 B + 14 B MTP: its model card", **_DEEPSEEK,
       sparse_topk=2048, indexer_heads=64, indexer_head_dim=128),
    _m("kimi-k2", "moonshotai/Kimi-K2-Instruct", 1.04e12, 61, 7168, 64, 64, 192, 163840, 131072, 18432,
       **{**_DEEPSEEK, "active_params": 32e9, "experts": 384},
       source="config.json of moonshotai/Kimi-K2-Instruct; 1.04 T total, 32 B active: the Kimi K2 report "
       "(arXiv 2507.20534)"),
    _m("glm-4.6", "zai-org/GLM-4.6", 352.8e9, 92, 5120, 96, 8, 128, 151552, 202752, 1536, **_GLM45,
       source=f"config.json of zai-org/GLM-4.6 (the GLM-4.5 shapes, context 202,752); {_GLM45_COUNTS}"),
    _m("glm-4.5", "zai-org/GLM-4.5", 352.8e9, 92, 5120, 96, 8, 128, 151552, 131072, 1536, **_GLM45,
       source=f"config.json of zai-org/GLM-4.5; {_GLM45_COUNTS}"),
    _m("glm-4.5-air", "zai-org/GLM-4.5-Air", 106.85e9, 46, 4096, 96, 8, 128, 151552, 131072, 1408,
       active_params=13.42e9, experts=128, experts_per_token=8,
       source="config.json of zai-org/GLM-4.5-Air (1 dense layer, then 45 of 128 experts, 8 a token, and a shared "
       "one); 106.85 B total and 13.42 B active from its shapes (106 B and 12 B on its model card, the active "
       "without the embeddings and the LM head)"),
    _m("minimax-m2", "MiniMaxAI/MiniMax-M2", 228.69e9, 62, 3072, 48, 8, 128, 200064, 196608, 1536,
       active_params=11.03e9, experts=256, experts_per_token=8, native_dtype="fp8",
       source="config.json of MiniMaxAI/MiniMax-M2 (256 experts, 8 a token; fp8 in blocks of 128 × 128); "
       "228.69 B total and 11.03 B active from its shapes (230 B and 10 B in its model card, the active without "
       "the embeddings and the LM head)"),
    _m("qwen3-coder-480b-a35b", "Qwen/Qwen3-Coder-480B-A35B-Instruct", 480.15e9, 62, 6144, 96, 8, 128, 151936,
       262144, 2560, active_params=35.47e9, experts=160, experts_per_token=8,
       source=f"config.json of Qwen/Qwen3-Coder-480B-A35B-Instruct; 480 B total, 35 B active: {_QWEN3}"),
    _m("nemotron-3-nano-30b-a3b", "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", 31.58e9, 29, 2688, 32, 2, 128, 131072,
       262144, 1856, active_params=3.58e9, experts=128, experts_per_token=6, recurrent_layers=23,
       recurrent_state_bytes=64 * 64 * 128 * 4 + (64 * 64 + 2 * 8 * 128) * 3 * 2,
       recurrent_flops_per_token=6 * 64 * 64 * 128,
       source="config.json of nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16 (hybrid_override_pattern: 23 Mamba2, 6 "
       "attention and 23 expert blocks; Mamba2: 64 heads of 64, state 128, 8 groups, kernel 4, fp32 state); 31.58 B "
       "total and 3.58 B active from its shapes"),
    _m("qwen3-next-80b-a3b", "Qwen/Qwen3-Next-80B-A3B-Instruct", 79.67e9, 48, 2048, 16, 2, 256, 151936, 262144, 512,
       active_params=3.87e9, experts=512, experts_per_token=10, recurrent_layers=36,
       recurrent_state_bytes=32 * 128 * 128 * 2 + (2 * 16 * 128 + 32 * 128) * 3 * 2,
       recurrent_flops_per_token=6 * 32 * 128 * 128,
       source="config.json of Qwen/Qwen3-Next-80B-A3B-Instruct (full_attention_interval 4; Gated DeltaNet: "
       "16 key and 32 value heads of 128, kernel 4); 79.67 B total and 3.87 B active from its shapes (80 B and "
       "3 B activated on its model card, which leaves the embeddings out)"),
)}

# Other spellings people use (besides the Hub ids, which match by themselves).
MODEL_ALIASES: dict[str, str] = {
    "mixtral-8x7b-v0.1": "mixtral-8x7b", "mistral-7b-v0.3": "mistral-7b", "deepseek-v3-0324": "deepseek-v3",
    "deepseek-v3.2-exp": "deepseek-v3.2", "deepseek-v3.1-terminus": "deepseek-v3.1", "kimi-k2-instruct-0905": "kimi-k2",
    "llama-4-scout-17b-16e": "llama-4-scout", "llama-4-maverick-17b-128e": "llama-4-maverick",
    "llama2-70b": "llama-2-70b", "mixtral-8x22b-v0.1": "mixtral-8x22b", "mistral-large-2407": "mistral-large-2",
    "mistral-large-instruct-2407": "mistral-large-2",
    "deepseek-r1-distill-llama-70b": "llama-3.3-70b", "deepseek-r1-distill-llama-8b": "llama-3.1-8b",
    "deepseek-r1-distill-qwen-32b": "qwen2.5-32b", "deepseek-r1-distill-qwen-14b": "qwen2.5-14b",
    "deepseek-r1-distill-qwen-7b": "qwen2.5-7b", "llama-3.1-nemotron-70b": "llama-3.1-70b",
    "qwen3-next-80b-a3b-thinking": "qwen3-next-80b-a3b", "nemotron-3-nano": "nemotron-3-nano-30b-a3b",
    "nvidia-nemotron-3-nano-30b-a3b-fp8": "nemotron-3-nano-30b-a3b",
    "nvidia-nemotron-3-nano-30b-a3b-nvfp4": "nemotron-3-nano-30b-a3b",
}
