"""What machine this is: CPU, cores, memory, OS. Saved with every run and every engine identity."""

from __future__ import annotations

import os
import platform
from functools import cache
from typing import Any

import psutil

__all__ = ["cpu_model", "host_info", "physical_cores"]


def physical_cores() -> int:
    """Physical CPU cores (what llama.cpp's ``--threads`` should usually be), at least 1."""
    return psutil.cpu_count(logical=False) or os.cpu_count() or 1


def cpu_model() -> str:
    """The CPU's model name (from /proc/cpuinfo on Linux)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


@cache
def host_info() -> dict[str, Any]:
    """CPU model, core counts, RAM, OS and Python of this host, JSON-able."""
    return {
        "hostname": platform.node(),
        "os": f"{platform.system()} {platform.release()}",
        "machine": platform.machine(),
        "python": platform.python_version(),
        "cpu_model": cpu_model(),
        "physical_cores": physical_cores(),
        "logical_cpus": psutil.cpu_count(logical=True) or os.cpu_count() or 1,
        "ram_bytes": psutil.virtual_memory().total,
    }
