"""How much GPU memory there is: from the user (``--gpu-memory-gb``), NVML, or ``nvidia-smi``.

Memory is counted in GiB (2^30 bytes), as ``nvidia-smi`` shows it: an "80 GB" A100 has 80 GiB.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass

from tokometer.util.errors import EngineError
from tokometer.util.units import GIB

__all__ = ["GpuInfo", "detect_gpus", "gpu_for_planning"]



@dataclass(frozen=True)
class GpuInfo:
    """One GPU's memory (all GPUs in a tensor-parallel group are assumed alike)."""

    name: str
    total_bytes: int
    used_bytes: int = 0
    count: int = 1
    source: str = "given"


def _from_nvml() -> list[GpuInfo]:
    try:
        import pynvml  # nvidia-ml-py, optional
    except ImportError:
        return []
    try:
        pynvml.nvmlInit()
    except Exception:  # no driver
        return []
    try:
        gpus = []
        count = int(pynvml.nvmlDeviceGetCount())
        for index in range(count):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
            name = pynvml.nvmlDeviceGetName(handle)
            name = name.decode() if isinstance(name, bytes) else str(name)
            gpus.append(GpuInfo(name, int(memory.total), int(memory.used), count, f"NVML: GPU {index}, {name}"))
        return gpus
    finally:
        pynvml.nvmlShutdown()


def _from_nvidia_smi() -> list[GpuInfo]:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    try:
        out = subprocess.run([smi, "--query-gpu=name,memory.total,memory.used", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=20, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    rows = [[part.strip() for part in line.split(",")] for line in out.splitlines() if line.strip()]
    gpus = []
    for index, row in enumerate(rows):
        try:
            name, total_mib, used_mib = row[0], float(row[1]), float(row[2])
        except (IndexError, ValueError):
            continue
        gpus.append(GpuInfo(name, int(total_mib * 2**20), int(used_mib * 2**20), len(rows),
                            f"nvidia-smi: GPU {index}, {name}"))
    return gpus


def detect_gpus() -> list[GpuInfo]:
    """The NVIDIA GPUs on this host (empty if none, or no driver)."""
    return _from_nvml() or _from_nvidia_smi()


def gpu_for_planning(gpu_memory_gb: float | None) -> GpuInfo:
    """The GPU to plan for: the given size in GiB, else the first detected GPU; EngineError if neither."""
    if gpu_memory_gb is not None:
        if gpu_memory_gb <= 0:
            raise EngineError(f"--gpu-memory-gb must be positive (got {gpu_memory_gb})")
        return GpuInfo(f"{gpu_memory_gb:g} GiB GPU", int(gpu_memory_gb * GIB), source="from --gpu-memory-gb")
    gpus = detect_gpus()
    if not gpus:
        raise EngineError("no NVIDIA GPU found (no NVML, no nvidia-smi): pass --gpu-memory-gb (e.g. 80 for an "
                          "A100/H100 80GB) to plan for one")
    return gpus[0]
