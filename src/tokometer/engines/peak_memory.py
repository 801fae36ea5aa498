"""The most resident memory an engine's whole process group has used: the kernel's high-water mark of each process.

An engine we start leads its own process group (`tokometer.engines.process.EngineProcess`); vLLM forks helpers
(its engine core, workers) into the same group. `group_peak_memory` finds every live process of the group in
``/proc`` and adds up each one's ``VmHWM`` (the kernel's record of the most resident memory that process ever held,
so a short spike between two readings is not missed). For a one-process engine (llama.cpp) that is its peak
exactly; for several it is an upper bound (their peaks need not coincide); a helper that exited before the
reading is not counted. The group includes tokometer's own small reaper where one leads it (vLLM), the same for
every variant. Linux only: elsewhere, or when ``/proc`` cannot be read, the answer is None with the reason.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["GroupMemory", "group_peak_memory"]

_PROC = Path("/proc")
_KIB = 1024


@dataclass(frozen=True)
class GroupMemory:
    """The peak resident memory of a process group, or why there is none."""

    peak_bytes: int | None
    processes: int
    """How many of the group's processes were read."""
    note: str
    """Where the figure comes from, or why there is none."""


def _group_of(stat: str) -> int | None:
    """The process group id in a ``/proc/PID/stat`` line (the fifth field; the name before it may hold spaces)."""
    fields = stat[stat.rfind(")") + 2:].split()
    return int(fields[2]) if len(fields) > 2 and fields[2].lstrip("-").isdigit() else None


def _hwm_bytes(pid: str) -> int | None:
    """``VmHWM`` of one process in bytes (None: it exited, or it is a kernel thread with no memory of its own)."""
    try:
        text = (_PROC / pid / "status").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("VmHWM:"):
            parts = line.split()
            return int(parts[1]) * _KIB if len(parts) > 1 and parts[1].isdigit() else None
    return None


def _members(group: int) -> list[str]:
    """The pids (as text) of the live processes in process group ``group``."""
    found = []
    for entry in os.scandir(_PROC):
        if not entry.name.isdigit():
            continue
        try:
            stat = (_PROC / entry.name / "stat").read_text(encoding="ascii", errors="replace")
        except OSError:
            continue
        if _group_of(stat) == group:
            found.append(entry.name)
    return found


def group_peak_memory(group: int) -> GroupMemory:
    """The sum of the kernel's high-water mark of resident memory over the live processes of process group
    ``group`` (see the module docstring)."""
    if not (_PROC / "self" / "status").exists():
        return GroupMemory(None, 0, "no peak memory: /proc is not available on this system")
    peaks = [p for p in (_hwm_bytes(pid) for pid in _members(group)) if p is not None]
    if not peaks:
        return GroupMemory(None, 0, "no peak memory: the engine's processes had exited")
    where = "one process" if len(peaks) == 1 else f"{len(peaks)} processes, each one's peak added: an upper bound"
    return GroupMemory(sum(peaks), len(peaks), f"the engine's peak resident memory (kernel high-water mark; {where})")
