"""What machine this is: CPU, cores, memory, OS. Saved with every run."""

from __future__ import annotations

import os
import platform
from functools import cache
from pathlib import Path
from typing import Any

import psutil

__all__ = ["cpu_model", "host_info"]


def cpu_model() -> str:
    """The CPU's model name (from /proc/cpuinfo on Linux)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


@cache
def host_info() -> dict[str, Any]:
    """A JSON-able description of this host."""
    memory = psutil.virtual_memory()
    return {
        "hostname": platform.node(),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "cpu": cpu_model(),
        "cpu_logical": os.cpu_count(),
        "cpu_physical": psutil.cpu_count(logical=False),
        "ram_gib": round(memory.total / 2**30, 1),
    }
