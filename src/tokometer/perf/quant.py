"""Quantisation: how many bytes a weight (or a KV-cache element) takes, and which peak FLOP/s applies.

Bits per weight, and what they cover:

    bf16, fp16          16            every weight
    fp32                32            every weight
    fp8, int8           8             linear layers; embeddings and LM head stay in 16 bits (as vLLM
                                      and the common FP8/W8A8 checkpoints do)
    awq, gptq           4 + (16 + 4) / 128 = 4.156
                                      linear layers: 4-bit weights plus one fp16 scale and one 4-bit
                                      zero point per group of 128 (AutoAWQ's and GPTQ's ``qzeros`` pack
                                      eight to an int32; GPTQ's per-row ``g_idx`` is left out: 32 bits
                                      a row, under 0.01 bit a weight); embeddings and LM head in 16 bits
    int4                4 + 16 / 128 = 4.125
                                      compressed-tensors' W4A16 as llm-compressor writes it: one 16-bit
                                      scale per group of 128, symmetric (no zero point)
                        A checkpoint's own config sets its group size and zero points
                        (`tokometer.perf.checkpointquant`): 4 + (16 + zero bits) / group, per channel
                        a group of the hidden size
    GGUF types          llama.cpp's whole-file averages (embeddings included): Q4_K_S 4.67,
                        Q4_K_M 4.89, Q5_K_M 5.70, Q6_K 6.56, Q8_0 8.50 (measured by llama.cpp's
                        quantize on Llama-3.1-8B); Q2_K 3.35, Q3_K_S 3.50, Q3_K_M 3.91, Q3_K_L 4.27,
                        Q5_K_S 5.52 (llama.cpp's quantize README, Llama 2 7B); Q4_0 4.5, Q4_1 5.0,
                        Q5_0 5.5, Q5_1 6.0 (block layout: 32 weights + fp16 scale [+ fp16 min]);
                        F16/BF16 16; F32 32
    nvfp4               4 + 8 / 16 = 4.5
                                      linear layers: 4-bit E2M1 values and one FP8 E4M3 scale per
                                      block of 16 (NVIDIA's NVFP4, as TensorRT Model Optimizer
                                      writes it); the one fp32 scale per tensor is left out (a few
                                      bytes a matrix); embeddings and LM head in 16 bits
    mxfp4               4 + 8 / 32 = 4.25
                                      linear layers: 4-bit E2M1 values and one E8M0 (power-of-two)
                                      scale per block of 32 (the OCP Microscaling MXFP4 format, as
                                      gpt-oss ships its experts); embeddings and LM head in 16 bits

``fp4`` means nvfp4: "FP4" in NVIDIA's Blackwell results (TensorRT-LLM's performance overview,
MLPerf, NIM) and the ``*-FP4`` checkpoints on the Hub are NVFP4; MXFP4 is always named as such
(gpt-oss's ``quant_method``, vLLM's ``mxfp4``, AMD's results), so the bare name goes to the format
that is otherwise unnamed. vLLM's ``modelopt_fp4`` is nvfp4 too. A model with mixed formats (gpt-oss:
experts in mxfp4, attention in bf16) is sized part by part, each part in its own format of these.

Compute: fp8 weights run on the fp8 tensor cores (W8A8), int8 on the int8 ones, and nvfp4 and
mxfp4 on the fp4 ones (W4A4: Blackwell's tensor cores take both block formats at one rate; an
MI355X's take mxfp4 only, `HardwareSpec.fp4_formats`) where the hardware lists them; where it does
not (fp8 on an A100, fp4 on an H100 or MI300X, nvfp4 on an MI355X) the weights
are dequantised and multiplied in 16 bits, as vLLM's weight-only kernels do (Marlin for NVFP4,
its MXFP4 MoE kernels on Hopper), so the bf16 figure applies. Every other type (4-bit
weight-only, GGUF) is dequantised and multiplied in 16 bits too.

KV cache: bf16/fp16/fp32, fp8 (one byte, as vLLM's ``--kv-cache-dtype fp8``), int8, llama.cpp's q8_0 and
q4_0, and **nvfp4** (``fp4``): 4-bit E2M1 values and one FP8 E4M3 scale per 16, 4.5 bits an element, as
TensorRT-LLM's NVFP4 KV cache (from a ModelOpt checkpoint's ``kv_cache_quant_algo`` NVFP4) and vLLM's
``--kv-cache-dtype nvfp4`` store it; their attention kernels dequantise it to fp8 (`Deployment`), and it needs
fp4 tensor cores that take NVFP4 (Blackwell). An MXFP4 cache, which no engine here offers, is refused.

On a CPU (``kind = "cpu"``: the host) each format is multiplied in its own data type: bf16, fp16 and fp32
weights in theirs, int8 in int8; fp8 and the 4-bit weight-only formats are dequantised to bf16 (CPUs have no
fp8 units); GGUF's quantised types in int8, as llama.cpp's CPU kernels do: activations are quantised to 8
bits (Q8_K / Q8_0 blocks) and each block's dot product is an integer one (VNNI, AMX or VPMADDUBSW).
"""

from __future__ import annotations

from dataclasses import dataclass

from tokometer.util.errors import ConfigError

__all__ = ["KV_DTYPES", "WEIGHT_DTYPES", "WeightDtype", "default_kv_dtype", "kv_bytes", "normalize_dtype",
           "weight_dtype"]


@dataclass(frozen=True)
class WeightDtype:
    """One weight format: bits per weight, whether embeddings are kept in 16 bits, the compute column."""

    name: str
    bits: float
    linear_only: bool  # True: only the linear layers are quantised; embeddings / LM head stay 16-bit
    compute: str  # "bf16", "fp8", "int8" or "fp4": which peak FLOP/s column applies
    source: str
    cpu_compute: str = "bf16"  # the data type its matrix products run in on a CPU (module docstring)

    @property
    def bytes_per_weight(self) -> float:
        return self.bits / 8


def _w(name: str, bits: float, linear_only: bool = False, compute: str = "bf16",
       source: str = "", cpu: str = "bf16") -> WeightDtype:
    return WeightDtype(name, bits, linear_only, compute, source, cpu)


_GROUP = "4-bit weights + one fp16 scale and one 4-bit zero point per group of 128"
_INT4 = "4-bit weights + one 16-bit scale per group of 128, symmetric (compressed-tensors W4A16)"
_LLAMA_CPP = "llama.cpp quantize, measured on Llama-3.1-8B"
_BLOCK = "llama.cpp block layout"
_K_LOW = "llama.cpp quantize README, Llama 2 7B"
_NVFP4 = "4-bit E2M1 + one FP8 E4M3 scale per 16 (NVFP4, linear layers)"
_MXFP4 = "4-bit E2M1 + one E8M0 scale per 32 (OCP MXFP4, linear layers)"
WEIGHT_DTYPES: dict[str, WeightDtype] = {d.name: d for d in (
    _w("bf16", 16, source="2 bytes"), _w("fp16", 16, source="2 bytes", cpu="fp16"),
    _w("fp32", 32, source="4 bytes", cpu="fp32"), _w("fp8", 8, True, "fp8", "1 byte (linear layers)"),
    _w("int8", 8, True, "int8", "1 byte (linear layers)", cpu="int8"),
    _w("awq", 4 + 20 / 128, True, source=_GROUP), _w("gptq", 4 + 20 / 128, True, source=_GROUP),
    _w("int4", 4 + 16 / 128, True, source=_INT4),
    _w("Q4_K_S", 4.67, source=_LLAMA_CPP, cpu="int8"), _w("Q4_K_M", 4.89, source=_LLAMA_CPP, cpu="int8"),
    _w("Q5_K_M", 5.70, source=_LLAMA_CPP, cpu="int8"), _w("Q6_K", 6.56, source=_LLAMA_CPP, cpu="int8"),
    _w("Q8_0", 8.50, source=_LLAMA_CPP, cpu="int8"), _w("Q4_0", 4.5, source=_BLOCK, cpu="int8"),
    _w("Q4_1", 5.0, source=_BLOCK, cpu="int8"), _w("Q5_0", 5.5, source=_BLOCK, cpu="int8"),
    _w("Q5_1", 6.0, source=_BLOCK, cpu="int8"), _w("Q2_K", 3.35, source=_K_LOW, cpu="int8"),
    _w("Q3_K_S", 3.50, source=_K_LOW, cpu="int8"), _w("Q3_K_M", 3.91, source=_K_LOW, cpu="int8"),
    _w("Q3_K_L", 4.27, source=_K_LOW, cpu="int8"), _w("Q5_K_S", 5.52, source=_K_LOW, cpu="int8"),
    _w("F16", 16, source="2 bytes", cpu="fp16"),
    _w("BF16", 16, source="2 bytes"), _w("F32", 32, source="4 bytes", cpu="fp32"),
    _w("nvfp4", 4 + 8 / 16, True, "fp4", _NVFP4), _w("mxfp4", 4 + 8 / 32, True, "fp4", _MXFP4),
)}

# Bytes per KV-cache element. q8_0 / q4_0 are llama.cpp's quantised caches (block of 32 + fp16 scale).
KV_DTYPES: dict[str, float] = {"bf16": 2.0, "fp16": 2.0, "fp32": 4.0, "fp8": 1.0, "int8": 1.0,
                               "q8_0": 34 / 32, "q4_0": 18 / 32, "nvfp4": 4.5 / 8}

_ALIASES = {
    "bfloat16": "bf16", "float16": "fp16", "half": "fp16", "f16": "fp16", "float32": "fp32", "f32": "fp32",
    "float": "fp32", "auto": "bf16", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8", "e4m3": "fp8", "float8": "fp8",
    "w8a8": "int8", "w4a16": "int4", "awq_marlin": "awq", "gptq_marlin": "gptq",
    "fp4": "nvfp4", "modelopt_fp4": "nvfp4",
}
_FP4_KV = ("mxfp4",)


def normalize_dtype(name: str) -> str:
    """Canonical spelling of a weight dtype: ``bfloat16`` -> ``bf16``, ``q4_k_m`` -> ``Q4_K_M``."""
    lowered = name.strip().lower()
    lowered = _ALIASES.get(lowered, lowered)
    if lowered in WEIGHT_DTYPES:
        return lowered
    upper = lowered.upper()
    return upper if upper in WEIGHT_DTYPES else name.strip()


def weight_dtype(name: str) -> WeightDtype:
    """The weight format called ``name`` (case-insensitive, aliases accepted); ConfigError if unknown."""
    key = normalize_dtype(name)
    if key in WEIGHT_DTYPES:
        return WEIGHT_DTYPES[key]
    raise ConfigError(f"unknown weight dtype {name!r}: use one of {', '.join(WEIGHT_DTYPES)}")


def default_kv_dtype(weights: str) -> str:
    """The KV-cache format a deployment gets when none is named: fp8 with fp8 or nvfp4 weights, as NVIDIA's FP8 and
    FP4 checkpoints declare (``kv_cache_quant_algo`` FP8 in their ModelOpt config) and TensorRT-LLM and vLLM then
    serve them (vLLM resolves ``--kv-cache-dtype auto`` to it), else bf16. (A checkpoint quantised otherwise, with
    no KV format declared, keeps a 16-bit cache in vLLM: give ``--kv-dtype bf16`` to model that.)"""
    return "fp8" if normalize_dtype(weights) in ("fp8", "nvfp4") else "bf16"


def kv_bytes(name: str) -> float:
    """Bytes per KV-cache element for ``name`` (bf16, fp16, fp8, int8, fp32, q8_0, q4_0, nvfp4)."""
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    if key in KV_DTYPES:
        return KV_DTYPES[key]
    if key in _FP4_KV:
        raise ConfigError(f"an MXFP4 KV cache ({name!r}) is not modelled: use nvfp4 for the smallest cache "
                          f"modelled, or one of {', '.join(KV_DTYPES)}")
    raise ConfigError(f"unknown KV-cache dtype {name!r}: use one of {', '.join(KV_DTYPES)}")
