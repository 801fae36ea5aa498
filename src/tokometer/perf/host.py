"""This machine as a `HardwareSpec`: measured memory bandwidth and matmul speed, RAM, cores.

Bandwidth is a short STREAM-style test in numpy, run on every logical CPU at once (one thread
each on its own slice; numpy releases the GIL inside these loops) over two 128 MiB arrays, four
times an L3 cache of 32 MiB:

    copy  b[:] = a        counted as 2 × 128 MiB moved (read a, write b; write-allocate not counted)
    read  a.sum()         counted as 128 MiB moved

each repeated five times; the best repeat of each is kept, as STREAM does, and the larger of the
two is the host's bandwidth. Compute is *measured*, not estimated: the best of three float32
matrix products of 1536 × 1536 (2 × 1536³ FLOPs each) through numpy's BLAS on all cores. For
reference the note also gives a rough theoretical figure, physical cores × 32 FLOPs per cycle
(two 8-wide fp32 FMA units, AVX2) × clock. An engine's quantised CPU kernels (llama.cpp's int8
dot products) may beat or trail the float32 matmul; the figure is a yardstick, not a datasheet.

Results are cached with the date in ``<user cache dir>/tokometer/host-perf.json`` for this CPU,
core count and RAM; ``remeasure=True`` (CLI ``--remeasure``) measures again. About 1–2 s.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tokometer.atomicfile import write_atomic
from tokometer.errors import OutputError
from tokometer.perf.hardware import HardwareSpec

__all__ = ["host_cache_file", "host_hardware", "measure_host"]

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

    from tokometer.hostinfo import host_info

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
    return {
        "measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "cpu_model": info["cpu_model"], "physical_cores": info["physical_cores"],
        "logical_cpus": info["logical_cpus"], "ram_bytes": info["ram_bytes"],
        "bandwidth_gbs": max(copy_gbs, read_gbs), "copy_gbs": copy_gbs, "read_gbs": read_gbs,
        "matmul_gflops": 2 * matmul_n**3 / matmul_s / 1e9, "threads": threads, "array_mib": array_mib,
        "matmul_n": matmul_n, "clock_ghz": _clock_ghz(),
    }


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
    from tokometer.hostinfo import host_info

    info = host_info()
    return all(cached.get(k) == info[k] for k in ("cpu_model", "logical_cpus", "ram_bytes"))


def _load_or_measure(remeasure: bool) -> dict[str, Any]:
    path = host_cache_file()
    if not remeasure:
        try:
            cached: dict[str, Any] = json.loads(path.read_text("utf-8"))
            if _same_host(cached) and cached.get("bandwidth_gbs"):
                cached["cached"] = True
                return cached
        except (OSError, ValueError):
            pass
    result = measure_host()
    with contextlib.suppress(OutputError):  # the cache only saves time
        write_atomic(path, json.dumps(result, indent=1))
    result["cached"] = False
    return result


def host_hardware(remeasure: bool = False) -> HardwareSpec:
    """This host: RAM, measured bandwidth (best of copy/read) and measured float32 matmul FLOP/s."""
    m = _load_or_measure(remeasure)
    rough = ""
    if m.get("clock_ghz"):
        peak = m["physical_cores"] * 32 * m["clock_ghz"]
        rough = (f"; rough theoretical fp32 peak {m['physical_cores']} cores × 32 FLOP/cycle × {m['clock_ghz']:.2f} "
                 f"GHz = {peak:,.0f} GFLOP/s")
    source = (f"measured {m['measured_at'][:10]}{' (cached)' if m.get('cached') else ''}: numpy stream test on "
              f"{m['threads']} threads, copy {m['copy_gbs']:.1f} / read {m['read_gbs']:.1f} GB/s over "
              f"{m['array_mib']} MiB arrays; compute = float32 {m['matmul_n']}² matmul "
              f"{m['matmul_gflops']:,.1f} GFLOP/s")
    return HardwareSpec(
        name="host", kind="cpu", memory_gb=m["ram_bytes"] / 2**30, bandwidth_gbs=float(m["bandwidth_gbs"]),
        bf16_tflops=float(m["matmul_gflops"]) / 1000, source=source,
        note=f"{m['cpu_model']}, {m['physical_cores']} cores{rough}", compute_label="fp32 matmul")
