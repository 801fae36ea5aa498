"""This machine as a `HardwareSpec`: measured memory bandwidth, peak compute per data type, RAM, cores.

Bandwidth is a short STREAM-style test in numpy, run on every logical CPU at once (one thread
each on its own slice; numpy releases the GIL inside these loops) over two 128 MiB arrays, four
times an L3 cache of 32 MiB:

    copy  b[:] = a        counted as 2 × 128 MiB moved (read a, write b; write-allocate not counted)
    read  a.sum()         counted as 128 MiB moved

each repeated five times; the best repeat of each is kept, as STREAM does, and the larger of the
two is the host's bandwidth.

Compute comes per data type (fp32, bf16, fp16, int8), each labelled ``measured`` or ``theoretical``:

    measured      fp32: the best of three float32 matrix products of 1536 × 1536 (2 × 1536³ FLOPs each)
                  through numpy's BLAS on all cores. bf16 and fp16: the same products in torch, where a
                  Python with torch is at hand (``TOKOMETER_TORCH_PYTHON``, else this interpreter when
                  torch imports; run in a child process with a 60 s deadline; torch is no dependency)
    theoretical   physical cores × FLOPs per cycle per core from the CPU's flags (`tokometer.perf.cpupeak`:
                  vector width, FMA units, dot-product and AMX tile instructions) × the clock the OS
                  reports (turbo may be higher; AVX-512/AMX clocks may be lower)

The figure a data type's efficiency is judged against is the measured one where there is one, else the
theoretical one; both are in its ``detail``. A measured matmul reaches a share of the silicon's peak (AMX
rarely more than a fraction on a few cores), so an engine's own kernels may beat it: an efficiency above
100 % then says the peak is wrong, not the engine (`tokometer.perf.efficiency`).

Measurements are cached with the date in ``<user cache dir>/tokometer/host-perf.json`` for this CPU,
core count and RAM; ``remeasure=True`` (CLI ``--remeasure``) measures again. About 1–2 s (more with torch).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from tokometer.perf.cpupeak import DTYPES, CpuFeatures, cycle_peaks, read_cpu_features
from tokometer.perf.hardwarespec import ComputePeak, HardwareSpec
from tokometer.util.atomicfile import write_atomic
from tokometer.util.cachedir import replaceable
from tokometer.util.errors import OutputError, TokometerError
from tokometer.util.jsontext import dumps
from tokometer.util.readlimit import read_json
from tokometer.util.units import GIB

__all__ = ["TORCH_PYTHON_ENV", "host_cache_file", "host_hardware", "host_peaks", "measure_host"]

MAX_HOST_CACHE_BYTES: Final = 1 << 20
"""The cached host measurement, read whole: 1 MiB (it is under 1 KB); larger, or not JSON, and it is measured
again."""

TORCH_PYTHON_ENV = "TOKOMETER_TORCH_PYTHON"
"""A Python interpreter with torch, to measure the host's bf16 and fp16 matmul speed (e.g. a vLLM venv's)."""
_TORCH_TIMEOUT_S = 60.0
_TORCH_SCRIPT = """
import json, sys, time, torch
n, threads = int(sys.argv[1]), int(sys.argv[2])
torch.set_num_threads(threads)
out = {"torch": torch.__version__}
for name, dtype in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
    x = torch.rand(n, n).to(dtype)
    x @ x
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        x @ x
        best = min(best, time.perf_counter() - start)
    out[name] = 2 * n**3 / best / 1e9
print(json.dumps(out, allow_nan=False))
"""

_ARRAY_MIB = 128
_REPEATS = 5
_MATMUL_N = 1536


def host_cache_file() -> Path:
    import platformdirs

    return Path(platformdirs.user_cache_dir("tokometer")) / "host-perf.json"


def _best_seconds(pool: ThreadPoolExecutor, fn: Callable[[slice], object], chunks: list[slice]) -> float:
    best = float("inf")
    for _ in range(_REPEATS):
        start = time.perf_counter()
        list(pool.map(fn, chunks))
        best = min(best, time.perf_counter() - start)
    return best


def _stream(np: Any, n: int, threads: int) -> tuple[float, float]:
    """Best seconds of a parallel copy and a parallel read over ``n`` float64 elements."""
    a = np.ones(n)
    b = np.zeros(n)
    chunks = [slice(i * n // threads, (i + 1) * n // threads) for i in range(threads)]
    with ThreadPoolExecutor(threads) as pool:
        copy_s = _best_seconds(pool, lambda s: np.copyto(b[s], a[s]), chunks)
        read_s = _best_seconds(pool, lambda s: a[s].sum(), chunks)
    return copy_s, read_s


def measure_host(array_mib: int | None = None, matmul_n: int | None = None) -> dict[str, Any]:
    """Run the bandwidth and matmul tests now; returns the figures (GB/s, GFLOP/s) and how they were got."""
    import numpy as np

    array_mib = array_mib or _ARRAY_MIB
    matmul_n = matmul_n or _MATMUL_N

    from tokometer.util.hostinfo import host_info

    threads = os.cpu_count() or 1
    n = array_mib * 2**20 // 8
    copy_s, read_s = _stream(np, n, threads)
    x = np.random.default_rng(0).random((matmul_n, matmul_n), dtype=np.float32)
    x @ x  # warm-up: BLAS threads start
    matmul_s = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        x @ x
        matmul_s = min(matmul_s, time.perf_counter() - start)
    copy_gbs = 2 * n * 8 / copy_s / 1e9
    read_gbs = n * 8 / read_s / 1e9
    info = host_info()
    torch = _torch_matmul(matmul_n, threads)
    return {
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "cpu_model": info["cpu_model"], "physical_cores": info["physical_cores"],
        "logical_cpus": info["logical_cpus"], "ram_bytes": info["ram_bytes"],
        "bandwidth_gbs": max(copy_gbs, read_gbs), "copy_gbs": copy_gbs, "read_gbs": read_gbs,
        "matmul_gflops": 2 * matmul_n**3 / matmul_s / 1e9, "threads": threads, "array_mib": array_mib,
        "matmul_n": matmul_n, "clock_ghz": _clock_ghz(), "torch": torch,
    }


def _torch_python() -> str | None:
    explicit = os.environ.get(TORCH_PYTHON_ENV)
    if explicit:
        return explicit
    return sys.executable if importlib.util.find_spec("torch") is not None else None


def _torch_matmul(n: int, threads: int) -> dict[str, Any]:
    """bf16 and fp16 GFLOP/s of an n² matmul in torch (a child process with a deadline), or why not."""
    python = _torch_python()
    if python is None:
        return {"error": f"no torch here (set {TORCH_PYTHON_ENV} to a Python that has it)"}
    try:
        done = subprocess.run([python, "-c", _TORCH_SCRIPT, str(n), str(threads)], capture_output=True, text=True,
                              timeout=_TORCH_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"error": f"torch at {python}: {exc}", "python": python}
    try:
        result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1][:200]
        return {"error": f"torch at {python} failed (exit {done.returncode}): {tail}", "python": python}
    result["python"] = python
    return result


def _clock_ghz() -> float | None:
    import psutil

    try:
        freq = psutil.cpu_freq()
    except (OSError, NotImplementedError):
        freq = None
    if freq and freq.max:
        return float(freq.max) / 1000
    if freq and freq.current:
        return float(freq.current) / 1000
    return None


def _same_host(cached: dict[str, Any]) -> bool:
    from tokometer.util.hostinfo import host_info

    info = host_info()
    return all(cached.get(k) == info[k] for k in ("cpu_model", "logical_cpus", "ram_bytes"))


def _load_or_measure(remeasure: bool) -> dict[str, Any]:
    path = host_cache_file()
    if not remeasure:
        try:
            cached = read_json(path, MAX_HOST_CACHE_BYTES, "not read", str(path))
        except TokometerError:  # a cache that cannot be read is measured again, and replaced
            cached = None
        if isinstance(cached, dict) and _same_host(cached) and cached.get("bandwidth_gbs"):
            cached["cached"] = True
            return cached
    result = measure_host()
    if replaceable(path):
        with contextlib.suppress(OutputError):  # the cache only saves time
            write_atomic(path, dumps(result, indent=1))
    result["cached"] = False
    return result


def _theoretical(features: CpuFeatures, cores: int, ghz: float | None) -> dict[str, tuple[float, str]]:
    if not ghz:
        return {}
    return {dtype: (cores * peak.per_cycle * ghz * 1e9,
                    f"{cores} cores × {peak.per_cycle:,g} {'ops' if dtype == 'int8' else 'FLOP'}/cycle ({peak.path}) "
                    f"× {ghz:.2f} GHz" + (f"; {peak.assumption}" if peak.assumption else ""))
            for dtype, peak in cycle_peaks(features).items()}


def host_peaks(m: dict[str, Any], features: CpuFeatures | None = None) -> tuple[ComputePeak, ...]:
    """Per data type, the peak the host is judged against (measured where ``m`` has a measurement, else
    theoretical from ``features``' flags × ``m``'s physical cores × clock), each saying which it is."""
    theory = _theoretical(features or read_cpu_features(), int(m["physical_cores"]), m.get("clock_ghz"))
    torch = m.get("torch") or {}
    measured: dict[str, tuple[float, str]] = {
        "fp32": (float(m["matmul_gflops"]) * 1e9, f"float32 {m['matmul_n']}² matmul through numpy's BLAS on "
                                                  f"{m['threads']} threads")}
    for dtype in ("bf16", "fp16"):
        if isinstance(torch.get(dtype), (int, float)) and torch[dtype] > 0:
            measured[dtype] = (float(torch[dtype]) * 1e9, f"{dtype} {m['matmul_n']}² matmul in torch "
                                                          f"{torch.get('torch', '')} ({torch.get('python', '')})")
    peaks = []
    for dtype in DTYPES:
        if dtype in measured:
            flops, how = measured[dtype]
            if dtype in theory:
                value, rule = theory[dtype]
                above = " (above it: the clock reported is below the one it ran at)" if flops > value else ""
                how += f"; theoretical {value / 1e9:,.0f} G{'OP' if dtype == 'int8' else 'FLOP'}/s{above}: {rule}"
            peaks.append(ComputePeak(dtype, flops, "measured", how))
        elif dtype in theory:
            value, rule = theory[dtype]
            why = f"; not measured: {torch['error']}" if dtype in ("bf16", "fp16") and torch.get("error") else ""
            peaks.append(ComputePeak(dtype, value, "theoretical", rule + why))
    return tuple(peaks)


def host_hardware(remeasure: bool = False) -> HardwareSpec:
    """This host: RAM, measured bandwidth (best of copy/read) and its peak per data type (`host_peaks`)."""
    m = _load_or_measure(remeasure)
    peaks = host_peaks(m)
    source = (f"measured {m['measured_at'][:10]}{' (cached)' if m.get('cached') else ''}: numpy stream test on "
              f"{m['threads']} threads, copy {m['copy_gbs']:.1f} / read {m['read_gbs']:.1f} GB/s over "
              f"{m['array_mib']} MiB arrays; compute per data type, measured where a matmul measured it, else "
              "theoretical from the CPU flags")
    by_dtype = {p.dtype: p for p in peaks}
    bf16 = by_dtype.get("bf16") or by_dtype.get("fp32")
    clock = f", {m['clock_ghz']:.2f} GHz" if m.get("clock_ghz") else ", clock unknown"
    return HardwareSpec(
        name="host", kind="cpu", memory_gb=m["ram_bytes"] / GIB, bandwidth_gbs=float(m["bandwidth_gbs"]),
        bf16_tflops=bf16.flops / 1e12 if bf16 else None, source=source,
        note=f"{m['cpu_model']}, {m['physical_cores']} cores{clock}", peaks=peaks)
