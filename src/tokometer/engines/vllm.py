"""vLLM: choose ``vllm serve`` flags from the model's size and the GPU's memory, explain them, run it.

The memory arithmetic is `tokometer.perf`'s, the one `tokometer estimate` prints: a
`tokometer.perf.Deployment` of the model on a GPU of this memory gives the weights per GPU
(`tokometer.perf.quant`: AWQ/GPTQ/fp8 quantise the linear layers, embeddings and LM head stay in
16 bits, as vLLM loads them), the KV-cache bytes per token per GPU (GQA heads split over
``--tensor-parallel-size`` and replicated when fewer than the GPUs; DeepSeek's latent cache on
every GPU) and the KV budget (GPU memory × ``--gpu-memory-utilization`` − weights per GPU − a
2 GiB activation reserve). This module only chooses the flags:

    --gpu-memory-utilization   as given (0.90 by default, vLLM's own default)
    --max-model-len            min(model's max context, KV capacity rounded down to a multiple of 256)
    --tensor-parallel-size     as given; a failing plan suggests the smallest of 2, 4, 8 that fits
    --quantization             as given: which weight format the weights line counts
    --kv-cache-dtype           auto (the model's 16-bit dtype: 2 B per element) or an fp8 (1 B)

vLLM refuses to start if one sequence of ``--max-model-len`` tokens does not fit its KV cache, so
that is the longest context it can serve; what is left over runs more sequences at once.
"""

from __future__ import annotations

import importlib.metadata
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field

from tokometer.engines.gpus import GpuInfo
from tokometer.engines.handle import EngineHandle
from tokometer.engines.identity import host_identity
from tokometer.engines.process import EngineProcess, busy_port_error, connect_host, port_in_use
from tokometer.engines.ready import wait_ready
from tokometer.errors import ConfigError, EngineError
from tokometer.perf.catalog import BUILTIN_MODELS
from tokometer.perf.explain import kv_arithmetic, weights_arithmetic
from tokometer.perf.hardware import HardwareSpec
from tokometer.perf.loaders import resolve_model
from tokometer.perf.model import ModelSpec
from tokometer.perf.quant import normalize_dtype
from tokometer.perf.roofline import ACTIVATION_RESERVE_GIB, Deployment

__all__ = ["KV_CACHE_DTYPES", "QUANTIZATIONS", "VllmPlan", "plan_vllm", "start_vllm", "vllm_binary"]

GIB = 2**30
ROUND_TO = 256
QUANTIZATIONS = ("fp8", "awq", "gptq")  # --quantization values planned for (bits per weight: tokometer.perf.quant)
KV_CACHE_DTYPES = ("auto", "fp8", "fp8_e4m3", "fp8_e5m2")  # auto: the model's dtype; fp8 variants: 1 byte
OOM_ADVICE = ("If vLLM still runs out of CUDA memory: lower --gpu-memory-utilization (other processes hold GPU "
              "memory: stop them, see nvidia-smi) or --max-model-len, or use a lower-bit quantisation "
              "(--quantization fp8, or an AWQ/GPTQ 4-bit checkpoint)")


@dataclass
class VllmPlan:
    """The ``vllm serve`` command line, the numbers behind it (``deployment``: perf's memory model of
    it), and the reasoning in words. ``model``: the name passed to vLLM."""

    deployment: Deployment
    model: str
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


def vllm_binary() -> str:
    """The ``vllm`` command on PATH, or EngineError saying how to get it."""
    found = shutil.which("vllm")
    if found is None:
        raise EngineError("vllm not found on PATH: `pip install vllm` (needs an NVIDIA GPU with CUDA), or run the "
                          "command that `tokometer serve --engine vllm --dry-run` prints where vLLM is installed")
    return found


def _gib(n: float) -> str:
    return f"{n / GIB:,.2f} GiB"


def _served_model(model: str) -> tuple[ModelSpec, str]:
    """The model's facts (perf's loaders) and the name to give vLLM: a built-in entry's Hub id unless a Hub id
    was given; otherwise what was given (a local directory expanded)."""
    try:
        spec = resolve_model(model)
    except ConfigError as exc:
        raise EngineError(str(exc)) from exc
    if spec.name in BUILTIN_MODELS and BUILTIN_MODELS[spec.name] is spec:
        return spec, model if "/" in model else spec.hf_id
    return spec, spec.hf_id or model


def _weight_format(spec: ModelSpec, quantization: str | None) -> tuple[str, str]:
    """The weight format vLLM will hold (perf's name for it) and, when it is not the checkpoint's own, why."""
    if quantization:
        return quantization, f" (--quantization {quantization})"
    native = normalize_dtype(spec.native_dtype)
    if native == "fp32":  # vLLM's --dtype auto serves a float32 checkpoint in 16 bits
        return "bf16", " (vLLM's --dtype auto loads this float32 checkpoint in 16 bits)"
    return native, ""


def _gpu_hardware(gpu: GpuInfo) -> HardwareSpec:
    """The GPU as perf's hardware: only its memory matters to the plan (no bandwidth or FLOP/s figure)."""
    return HardwareSpec(gpu.name, "gpu", gpu.total_bytes / GIB, 0.0, source=gpu.source)


def _smallest_tp(d: Deployment, utilization: float, reserve_gib: float) -> int | None:
    for tp in (2, 4, 8):
        if d.model.tp_problem(tp):
            continue  # its heads do not split over that many GPUs
        wider = Deployment(d.model, d.hardware, d.weight_dtype, d.kv_dtype, tp=tp)
        if wider.kv_capacity_tokens(utilization, reserve_gib) >= ROUND_TO:
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
    if kv_cache_dtype not in KV_CACHE_DTYPES:
        raise EngineError(f"--kv-cache-dtype {kv_cache_dtype!r} is not one of {', '.join(KV_CACHE_DTYPES)}")
    if quantization is not None and quantization not in QUANTIZATIONS:
        raise EngineError(f"--quantization {quantization!r} is not one of {', '.join(QUANTIZATIONS)}")
    if max_model_len is not None and max_model_len < 1:
        raise EngineError(f"--max-model-len must be at least 1 (got {max_model_len})")
    spec, served = _served_model(model)
    tp = tensor_parallel_size
    problem = spec.tp_problem(tp)
    if problem:
        raise EngineError(f"--tensor-parallel-size {tp}: {problem} (vLLM refuses to start otherwise)")
    weight_format, format_why = _weight_format(spec, quantization)
    d = Deployment(spec, _gpu_hardware(gpu), weight_format, kv_cache_dtype, tp=tp)
    util, reserve_gib = gpu_memory_utilization, activation_reserve_gib
    total, usable = gpu.total_bytes, d.usable_memory_bytes(util)
    weights, reserve = d.weight_bytes_per_gpu, int(reserve_gib * GIB)
    budget = d.kv_budget_bytes(util, reserve_gib)
    per_token = d.kv_bytes_per_token_per_gpu
    capacity = d.kv_capacity_tokens(util, reserve_gib)
    rounded = capacity // ROUND_TO * ROUND_TO
    chosen = max_model_len if max_model_len is not None else min(spec.max_context, rounded)
    fits = budget > 0 and rounded >= ROUND_TO and chosen <= capacity

    reasons = [
        ("model", f"{served}: {spec.shape()} (from the {spec.source})"),
        ("GPU memory", f"{_gib(total)} per GPU ({gpu.source})"),
        (f"--gpu-memory-utilization {util:.2f}",
         f"vLLM may take {util:.2f} × {_gib(total)} = {_gib(usable)} per GPU; the rest is left for the CUDA context "
         "and other processes"),
        ("weights", weights_arithmetic(d) + format_why),
        ("activation reserve", f"{_gib(reserve)} per GPU (stated allowance for activations and CUDA graphs; vLLM "
                               "measures the real peak at start-up)"),
        ("KV budget", f"{_gib(usable)} − {_gib(weights)} − {_gib(reserve)} = {_gib(budget)} per GPU"),
        ("KV per token", kv_arithmetic(d) + (f" (--kv-cache-dtype {kv_cache_dtype})" if kv_cache_dtype != "auto"
                                             else "")),
        ("KV capacity", f"{_gib(max(budget, 0))} / {per_token / 1024:.1f} KiB = {capacity:,} tokens"),
    ]
    if max_model_len is not None:
        reasons.append((f"--max-model-len {chosen}", f"set by you; the KV cache holds {capacity:,} tokens"))
    else:
        held = f"; the cache holds {capacity / chosen:.1f} sequences of that length at once" if chosen else ""
        reasons.append((f"--max-model-len {chosen}",
                        f"min(model's max context {spec.max_context:,}, {capacity:,} rounded down to a multiple of "
                        f"{ROUND_TO} = {rounded:,}) = {chosen:,}{held}"))
    split = (f"weights split over {tp} GPUs, the latent KV cache whole on each" if spec.is_mla
             else f"weights and KV heads split over {tp} GPUs")
    reasons.append((f"--tensor-parallel-size {tp}", "one GPU: no inter-GPU traffic" if tp == 1 else
                    f"{split} (needs {tp} GPUs like this one)"))
    if gpu.used_bytes > total - usable:
        reasons.append(("in use now", f"{_gib(gpu.used_bytes)} of this GPU is already taken by other processes: vLLM "
                                      "will fail to start unless they stop or --gpu-memory-utilization is lowered"))
    argv = ["vllm", "serve", served, "--host", host, "--port", str(port), "--gpu-memory-utilization", f"{util:.2f}",
            "--max-model-len", str(chosen), "--tensor-parallel-size", str(tp)]
    if quantization:
        argv += ["--quantization", quantization]
    if kv_cache_dtype != "auto":
        argv += ["--kv-cache-dtype", kv_cache_dtype]
    argv += list(extra_args)

    if fits:
        verdict = f"fits: {served} serves up to {chosen:,} tokens per sequence. {OOM_ADVICE}."
    elif budget <= 0 or rounded < ROUND_TO:
        need = int(weights) + reserve + ROUND_TO * per_token
        better_tp = _smallest_tp(d, util, reserve_gib) if tp == 1 else None
        options = [f"--tensor-parallel-size {better_tp} (needs {better_tp} GPUs)"] if better_tp else []
        options += ["a lower-bit quantisation (--quantization fp8, or an AWQ/GPTQ 4-bit checkpoint)",
                    "stopping other GPU processes and raising --gpu-memory-utilization (up to ~0.95)"]
        verdict = (f"does not fit: {served} needs at least {_gib(need)} per GPU (weights {_gib(weights)} + "
                   f"reserve {_gib(reserve)} + {ROUND_TO} tokens of KV cache) but vLLM may use {_gib(usable)}; "
                   "vLLM would fail with CUDA out of memory. Try " + "; or ".join(options) + ".")
    else:
        verdict = (f"does not fit: --max-model-len {chosen:,} needs {_gib(chosen * per_token)} of KV cache but only "
                   f"{_gib(budget)} is left; use --max-model-len {rounded:,} or less. {OOM_ADVICE}.")
    return VllmPlan(d, served, gpu, host, port, argv, fits, chosen, capacity, reasons, verdict)


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
        model = wait_ready(root_url, process, ready_timeout_s, model=plan.model)
        identity = {"engine": "vllm", "engine_version": _vllm_version(binary), "model": model,
                    "max_model_len": plan.max_model_len, "kv_capacity_tokens": plan.kv_capacity_tokens,
                    "gpu": {"name": plan.gpu.name, "memory_bytes": plan.gpu.total_bytes, "count": plan.gpu.count},
                    "argv": argv, "host": host_identity()}
    except BaseException:
        process.stop()
        raise
    return EngineHandle(root_url, model, identity, process)
