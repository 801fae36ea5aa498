"""The batch limit ``trtllm-bench throughput`` gives an engine when its command line names none.

TensorRT-LLM's perf overview runs every figure with ``trtllm-bench --model M throughput --dataset D
--backend pytorch`` and an options file that sets no ``max_batch_size`` (its "Reproducing Benchmarked
Results" section, at commits 00f37686 and 03e27c7d of TensorRT-LLM's perf overview page). The harness
then chooses one itself (``tensorrt_llm/bench/benchmark/utils/general.py``: ``get_settings`` calls
``get_benchmark_engine_settings`` with the dataset's mean prompt and answer lengths and
``--kv_cache_free_gpu_mem_fraction``, 0.90 by default; ``tensorrt_llm/bench/build/tuning.py``:
``calc_engine_setting`` and ``finetune_setting``), from a count of its own, not the engine's memory plan:

    KV a token (GiB)  = 2 × hidden layers × max(TP, the config's KV heads) × head size × KV element bytes
                        (head size: the config's ``head_dim``, else hidden / heads; fp8 cache 1 B, nvfp4 0.5, else 2)
    engine (GiB)      = the checkpoint's stored element count × the format's bytes (fp8 1, nvfp4 0.5, else 2)
    requests          = (every GPU's memory × TP × PP − engine) × fraction / (KV a token × (ISL + OSL))
    raw               = min(requests, 4096) / PP
    max batch         = raw rounded up: to a multiple of 32 below 256 (at least 64), of 128 below 1,024,
                        else of 256

A checkpoint whose format the heuristic does not tune (MXFP4 experts, as gpt-oss ships) gets the LLM API's
defaults (``max_batch_size`` 2,048). The count takes a latent-attention model (DeepSeek R1) as heads × head
size, its config's 128 KV heads × 7168 / 128 (it names no ``head_dim``), and a 4-bit checkpoint at the
elements its safetensors hold: two 4-bit weights a byte and an fp8 scale each 16, the embeddings whole
(`tokometer.perf.model`'s weight rule): both as the harness reads them, not as the engine holds them. With
attention data parallel the LLM API's ``max_batch_size`` is each rank's, so the cap is too.
"""

from __future__ import annotations

import math

from tokometer.perf.quant import normalize_dtype
from tokometer.perf.roofline import Deployment
from tokometer.util.units import GIB

__all__ = ["DEFAULT_KV_FRACTION", "UNTUNED_MAX_BATCH", "tuned_max_batch"]

DEFAULT_KV_FRACTION = 0.90
"""``trtllm-bench``'s ``--kv_cache_free_gpu_mem_fraction`` when not given ("the percentage of memory to use for KV
Cache after model load": ``tensorrt_llm/bench/benchmark/throughput.py``), the LLM API's ``KvCacheConfig``
``free_gpu_memory_fraction`` default too (TensorRT-LLM's "How to Change KV Cache Behavior")."""

UNTUNED_MAX_BATCH = 2048
"""The LLM API's default ``max_batch_size``: what a format the heuristic does not tune runs with."""

_REQUEST_CAP = 4096
"""``finetune_setting``'s cap on the requests it counts, before it divides by the pipeline stages."""

_FORMAT_BYTES = {"fp8": 1.0, "nvfp4": 0.5, "bf16": 2.0, "fp16": 2.0}
"""The formats ``calc_engine_setting`` tunes (FP8, FP8 block scales, NVFP4, none) and its bytes for each."""


def tuned_max_batch(d: Deployment, input_tokens: int, output_tokens: int,
                    kv_fraction: float = DEFAULT_KV_FRACTION) -> int:
    """The ``max_batch_size`` ``trtllm-bench throughput`` chooses for ``d`` on a dataset of ``input_tokens`` →
    ``output_tokens`` requests (module docstring): each engine rank's."""
    m, fmt = d.model, normalize_dtype(d.weight_dtype)
    mixed = m.is_moe and m.expert_format(d.weight_dtype) not in ("", fmt)
    if fmt not in _FORMAT_BYTES or mixed or not d.hardware.memory_gb:  # no memory figure: nothing to count from
        return UNTUNED_MAX_BATCH
    head = m.hidden // m.heads if m.is_mla else m.head_dim
    kv_element = {"fp8": 1.0, "nvfp4": 0.5}.get(normalize_dtype(d.kv_dtype), 2.0)
    kv_token = 2 * m.layers * max(d.tp, m.kv_heads) * head * kv_element / GIB
    elements = m.params
    if fmt == "nvfp4":
        elements = (m.params - m.embedding_params) * (0.5 + 1 / 16) + m.embedding_params
    engine = elements * _FORMAT_BYTES[fmt] / GIB
    memory = d.hardware.memory_gb * d.gpus
    requests = max(0.0, memory - engine) * kv_fraction / (kv_token * (input_tokens + output_tokens))
    raw = min(requests, _REQUEST_CAP) / d.pp
    if raw < 256:
        return max(64, 32 * math.ceil(raw / 32))
    if raw < 1024:
        return 128 * math.ceil(raw / 128)
    return 256 * math.ceil(raw / 256)
