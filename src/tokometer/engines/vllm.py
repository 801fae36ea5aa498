"""vLLM: choose ``vllm serve`` flags from the model's size and the GPU's memory, explain them, run it.

The arithmetic (per GPU; tensor parallelism splits weights and KV heads across GPUs):

    usable       = GPU memory × --gpu-memory-utilization
    weights      = params × bytes per weight / TP
    KV budget    = usable − weights − activation reserve
    KV per token = 2 (K and V) × layers × KV heads per GPU × head dim × bytes per element
    capacity     = floor(KV budget / KV per token)                       tokens of cache in all
    --max-model-len = min(model's max context, capacity rounded down to a multiple of 256)

vLLM refuses to start if one sequence of ``--max-model-len`` tokens does not fit its KV cache, so
that is the longest context it can serve; what is left over runs more sequences at once.
"""

from __future__ import annotations

import importlib.metadata
import math
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field
from typing import Any

from tokometer.engines.archs import DTYPE_BYTES, ModelArch, resolve_arch
from tokometer.engines.gpus import GpuInfo
from tokometer.engines.handle import EngineHandle
from tokometer.engines.identity import host_identity
from tokometer.engines.process import EngineProcess, busy_port_error, connect_host, port_in_use
from tokometer.engines.ready import wait_ready
from tokometer.errors import EngineError

__all__ = ["ACTIVATION_RESERVE_GIB", "QUANT_BYTES", "VllmPlan", "plan_vllm", "start_vllm", "vllm_binary"]

GIB = 2**30
ACTIVATION_RESERVE_GIB = 2.0
ROUND_TO = 256
# Bytes per weight for --quantization: fp8 is 8 bits; AWQ/GPTQ are 4 bits plus one fp16 scale and
# zero point per group of 128 weights, ≈ 4.25 bits.
QUANT_BYTES = {"fp8": 1.0, "awq": 4.25 / 8, "gptq": 4.25 / 8}
OOM_ADVICE = ("If vLLM still runs out of CUDA memory: lower --gpu-memory-utilization (other processes hold GPU "
              "memory: stop them, see nvidia-smi) or --max-model-len, or use a lower-bit quantisation "
              "(--quantization fp8, or an AWQ/GPTQ 4-bit checkpoint)")


@dataclass
class VllmPlan:
    """The ``vllm serve`` command line, the numbers behind it, and the reasoning in words."""

    arch: ModelArch
    gpu: GpuInfo
    host: str
    port: int
    argv: list[str]
    fits: bool
    max_model_len: int
    kv_capacity_tokens: int
    reasons: list[tuple[str, str]] = field(default_factory=list)
    verdict: str = ""

    def explain(self) -> str:
        """The command and, line by line, why each flag has its value."""
        width = max(len(item) for item, _ in self.reasons) if self.reasons else 0
        lines = [shlex.join(self.argv), "", "why:"]
        lines += [f"  {item.ljust(width)}  {why}" for item, why in self.reasons]
        lines += ["", self.verdict]
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        """JSON-able summary (for ``--json`` and for the run identity)."""
        return {"argv": self.argv, "fits": self.fits, "max_model_len": self.max_model_len,
                "kv_capacity_tokens": self.kv_capacity_tokens, "model": self.arch.name,
                "reasons": [{"item": item, "why": why} for item, why in self.reasons], "verdict": self.verdict}


def vllm_binary() -> str:
    """The ``vllm`` command on PATH, or EngineError saying how to get it."""
    found = shutil.which("vllm")
    if found is None:
        raise EngineError("vllm not found on PATH: `pip install vllm` (needs an NVIDIA GPU with CUDA), or run the "
                          "command that `tokometer serve --engine vllm --dry-run` prints where vLLM is installed")
    return found


def _gib(n: float) -> str:
    return f"{n / GIB:,.2f} GiB"


def _weight_bytes(arch: ModelArch, quantization: str | None) -> tuple[float, str]:
    if quantization:
        per = QUANT_BYTES[quantization]
        return arch.params * per, f"{arch.params / 1e9:.2f} B params × {per:.3g} B ({quantization})"
    per = DTYPE_BYTES.get(arch.dtype, 2.0)
    if arch.weight_bytes:
        return arch.weight_bytes, f"{arch.weight_bytes / 1e9:.2f} GB of safetensors ({arch.dtype})"
    return arch.params * per, f"{arch.params / 1e9:.2f} B params × {per:g} B ({arch.dtype})"


def _kv_per_token(arch: ModelArch, tp: int, kv_bytes: float) -> tuple[int, str]:
    heads = math.ceil(arch.kv_heads / tp)  # fewer KV heads than GPUs: vLLM replicates them
    total = int(2 * arch.layers * heads * arch.head_dim * kv_bytes)
    split = f" (of {arch.kv_heads}, split over {tp} GPUs)" if tp > 1 else ""
    return total, (f"2 (K and V) × {arch.layers} layers × {heads} KV heads{split} × {arch.head_dim} head dim × "
                   f"{kv_bytes:g} B = {total:,} B = {total / 1024:.1f} KiB")


def _smallest_tp(arch: ModelArch, usable: float, reserve: float, weights: float, kv_bytes: float) -> int | None:
    for tp in (2, 4, 8):
        per_token, _ = _kv_per_token(arch, tp, kv_bytes)
        if usable - weights / tp - reserve >= ROUND_TO * per_token:
            return tp
    return None


def plan_vllm(model: str, gpu: GpuInfo, *, gpu_memory_utilization: float = 0.90, tensor_parallel_size: int = 1,
              max_model_len: int | None = None, quantization: str | None = None, kv_cache_dtype: str = "auto",
              activation_reserve_gib: float = ACTIVATION_RESERVE_GIB, host: str = "127.0.0.1", port: int = 8000,
              extra_args: tuple[str, ...] = ()) -> VllmPlan:
    """Work out ``vllm serve`` flags for ``model`` on GPUs like ``gpu``; never raises for "does not fit"."""
    if not 0.05 <= gpu_memory_utilization <= 0.99:
        raise EngineError(f"--gpu-memory-utilization must be between 0.05 and 0.99 (got {gpu_memory_utilization})")
    if tensor_parallel_size < 1:
        raise EngineError(f"--tensor-parallel-size must be at least 1 (got {tensor_parallel_size})")
    if quantization is not None and quantization not in QUANT_BYTES:
        raise EngineError(f"--quantization {quantization!r} is not one of {', '.join(QUANT_BYTES)}")
    arch = resolve_arch(model)
    tp = tensor_parallel_size
    total = gpu.total_bytes
    usable = int(total * gpu_memory_utilization)
    weights, weights_why = _weight_bytes(arch, quantization)
    reserve = int(activation_reserve_gib * GIB)
    budget = usable - int(weights / tp) - reserve
    kv_bytes = 1.0 if kv_cache_dtype.startswith("fp8") else DTYPE_BYTES.get(arch.dtype, 2.0)
    per_token, per_token_why = _kv_per_token(arch, tp, kv_bytes)
    capacity = max(0, budget // per_token)
    rounded = capacity // ROUND_TO * ROUND_TO
    chosen = max_model_len if max_model_len is not None else min(arch.max_context, rounded)
    fits = budget > 0 and rounded >= ROUND_TO and chosen <= capacity

    reasons = [
        ("model", f"{arch.name}: {arch.layers} layers, {arch.kv_heads} KV heads × {arch.head_dim} head dim, "
                  f"max context {arch.max_context:,} (from the {arch.source})"),
        ("GPU memory", f"{_gib(total)} per GPU ({gpu.source})"),
        (f"--gpu-memory-utilization {gpu_memory_utilization:.2f}",
         f"vLLM may take {gpu_memory_utilization:.2f} × {_gib(total)} = {_gib(usable)} per GPU; the rest is left "
         "for the CUDA context and other processes"),
        ("weights", f"{weights_why} = {_gib(weights)}" + (f", / {tp} GPUs = {_gib(weights / tp)} per GPU" if tp > 1
                                                           else "")),
        ("activation reserve", f"{_gib(reserve)} per GPU (stated allowance for activations and CUDA graphs; vLLM "
                               "measures the real peak at start-up)"),
        ("KV budget", f"{_gib(usable)} − {_gib(weights / tp)} − {_gib(reserve)} = {_gib(budget)} per GPU"),
        ("KV per token", per_token_why + (" (fp8 KV cache)" if kv_bytes == 1.0 else "")),
        ("KV capacity", f"{_gib(max(budget, 0))} / {per_token / 1024:.1f} KiB = {capacity:,} tokens"),
    ]
    if max_model_len is not None:
        reasons.append((f"--max-model-len {chosen}", f"set by you; the KV cache holds {capacity:,} tokens"))
    else:
        held = f"; the cache holds {capacity / chosen:.1f} sequences of that length at once" if chosen else ""
        reasons.append((f"--max-model-len {chosen}",
                        f"min(model's max context {arch.max_context:,}, {capacity:,} rounded down to a multiple of "
                        f"{ROUND_TO} = {rounded:,}) = {chosen:,}{held}"))
    reasons.append((f"--tensor-parallel-size {tp}", "one GPU: no inter-GPU traffic" if tp == 1 else
                    f"weights and KV heads split over {tp} GPUs (needs {tp} GPUs like this one)"))
    if gpu.used_bytes > total - usable:
        reasons.append(("in use now", f"{_gib(gpu.used_bytes)} of this GPU is already taken by other processes: vLLM "
                                      "will fail to start unless they stop or --gpu-memory-utilization is lowered"))
    argv = ["vllm", "serve", arch.name, "--host", host, "--port", str(port),
            "--gpu-memory-utilization", f"{gpu_memory_utilization:.2f}", "--max-model-len", str(chosen),
            "--tensor-parallel-size", str(tp)]
    if quantization:
        argv += ["--quantization", quantization]
    if kv_cache_dtype != "auto":
        argv += ["--kv-cache-dtype", kv_cache_dtype]
    argv += list(extra_args)

    if fits:
        verdict = f"fits: {arch.name} serves up to {chosen:,} tokens per sequence. {OOM_ADVICE}."
    elif budget <= 0 or rounded < ROUND_TO:
        need = int(weights / tp) + reserve + ROUND_TO * per_token
        better_tp = _smallest_tp(arch, usable, reserve, weights, kv_bytes) if tp == 1 else None
        options = [f"--tensor-parallel-size {better_tp} (needs {better_tp} GPUs)"] if better_tp else []
        options += ["a lower-bit quantisation (--quantization fp8, or an AWQ/GPTQ 4-bit checkpoint)",
                    "stopping other GPU processes and raising --gpu-memory-utilization (up to ~0.95)"]
        verdict = (f"does not fit: {arch.name} needs at least {_gib(need)} per GPU (weights {_gib(weights / tp)} + "
                   f"reserve {_gib(reserve)} + {ROUND_TO} tokens of KV cache) but vLLM may use {_gib(usable)}; "
                   "vLLM would fail with CUDA out of memory. Try " + "; or ".join(options) + ".")
    else:
        verdict = (f"does not fit: --max-model-len {chosen:,} needs {_gib(chosen * per_token)} of KV cache but only "
                   f"{_gib(budget)} is left; use --max-model-len {rounded:,} or less. {OOM_ADVICE}.")
    return VllmPlan(arch, gpu, host, port, argv, fits, chosen, capacity, reasons, verdict)


def _vllm_version(binary: str) -> str:
    try:
        return importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        pass
    try:  # another environment's vllm: ask it (slow: it imports torch)
        done = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=120, check=False)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    lines = done.stdout.strip().splitlines()
    return lines[-1] if lines else "unknown"


def start_vllm(plan: VllmPlan, ready_timeout_s: float = 1800.0) -> EngineHandle:
    """Run ``plan``'s ``vllm serve`` and block until it completes a 1-token request; EngineError on failure."""
    if not plan.fits:
        raise EngineError(plan.verdict)
    binary = vllm_binary()
    if port_in_use(plan.host, plan.port):
        raise busy_port_error(plan.host, plan.port)
    argv = [binary, *plan.argv[1:]]
    try:
        process = EngineProcess(argv, "vllm")
    except OSError as exc:
        raise EngineError(f"could not run {binary}: {exc}") from exc
    root_url = f"http://{connect_host(plan.host)}:{plan.port}"
    try:
        model = wait_ready(root_url, process, ready_timeout_s, model=plan.arch.name)
        identity = {"engine": "vllm", "engine_version": _vllm_version(binary), "model": model,
                    "max_model_len": plan.max_model_len, "kv_capacity_tokens": plan.kv_capacity_tokens,
                    "gpu": {"name": plan.gpu.name, "memory_bytes": plan.gpu.total_bytes, "count": plan.gpu.count},
                    "argv": argv, "host": host_identity()}
    except BaseException:
        process.stop()
        raise
    return EngineHandle(root_url, model, identity, process)
