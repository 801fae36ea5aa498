"""Host: the machine a local server runs on (a loopback URL): RAM, swap, disk, CPU governor, GPUs.

- **RAM** against the model file's size: the usual rule is at least 2–3x the weights;
- **swap**: pages swapped in or out while doctor ran (`psutil.swap_memory`);
- **disk**: the filesystem the model file is on, and how fast its first 256 MiB read (the
  cold-start cost; a file in the page cache reads at memory speed, and the figure says so);
- **CPU frequency governor**: ``powersave`` halves a CPU engine's speed on some machines;
- **GPUs** through NVML (`tokometer.observe.gpu_nvml`): utilisation, memory, power at its cap,
  thermal throttling, a PCIe link below its maximum generation or width. No GPU (or no NVML): one
  info finding. The GPU findings are tested against a stand-in for NVML, not a real GPU.

The model file is the one llama.cpp's ``/props`` names, else the ``--model``/``-m`` argument of the
process listening on the URL's port.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from tokometer.doctor.finding import Finding
from tokometer.doctor.session import Session
from tokometer.observe.snapshot import GpuSample
from tokometer.util.units import GIB as _GIB

__all__ = ["RAM_FACTOR", "GpuLink", "SwapCounters", "gpu_findings", "ram_finding", "run", "swap_finding"]

RAM_FACTOR = 2.0
"""Host RAM below this multiple of the model's weights is a warning (the usual rule: 2-3x)."""
_READ_BYTES = 256 * 2**20
_SLOW_DISK_MB_S = 200.0


@dataclass(frozen=True, slots=True)
class SwapCounters:
    """Bytes swapped in and out since boot."""

    sin: int
    sout: int

    @classmethod
    def now(cls) -> SwapCounters:
        swap = psutil.swap_memory()
        return cls(int(swap.sin), int(swap.sout))


@dataclass(frozen=True, slots=True)
class GpuLink:
    """A GPU's maximum PCIe generation and width (what the current link is compared with)."""

    max_generation: int | None
    max_width: int | None


def ram_finding(ram_bytes: int, model_bytes: int, model: str) -> Finding:
    """The RAM rule: at least `RAM_FACTOR` x the weights."""
    ratio = ram_bytes / model_bytes if model_bytes else float("inf")
    evidence = {"ram_gib": round(ram_bytes / _GIB, 1), "model_gib": round(model_bytes / _GIB, 2),
                "ratio": round(ratio, 1), "model_file": model}
    if ratio < RAM_FACTOR:
        return Finding("host.ram_low", "warning", f"RAM is {ratio:.1f}x the model file ({evidence['ram_gib']} GiB "
                       f"for {evidence['model_gib']} GiB); at least {RAM_FACTOR:.0f}-3x is advised", evidence,
                       "Loading and serving swap or evict the page cache: add RAM, or serve a smaller quantisation.")
    return Finding("host.ram", "info", f"RAM is {ratio:.0f}x the model file ({evidence['ram_gib']} GiB for "
                   f"{evidence['model_gib']} GiB)", evidence)


def swap_finding(before: SwapCounters, after: SwapCounters, seconds: float) -> Finding | None:
    """A finding when pages were swapped in or out between the two readings."""
    swapped_in, swapped_out = after.sin - before.sin, after.sout - before.sout
    if swapped_in <= 0 and swapped_out <= 0:
        return None
    return Finding("host.swapping", "warning", f"the host swapped while doctor ran: {swapped_in / 2**20:,.1f} MiB "
                   f"in, {swapped_out / 2**20:,.1f} MiB out in {seconds:,.0f} s",
                   {"swap_in_bytes": swapped_in, "swap_out_bytes": swapped_out, "seconds": round(seconds, 1)},
                   "Swapping stalls token generation: free memory (other processes, a smaller model or context) "
                   "or add RAM.")


def gpu_findings(samples: Sequence[GpuSample], links: Sequence[GpuLink]) -> list[Finding]:
    """Findings about each GPU from one reading each, and its maximum PCIe link."""
    out: list[Finding] = []
    for sample, link in zip(samples, links, strict=False):
        name = f"GPU {sample.index} ({sample.name})" if sample.name else f"GPU {sample.index}"
        evidence: dict[str, Any] = {"gpu": sample.index, "name": sample.name, "utilization": sample.utilization,
                                    "memory_used_gib": round(sample.memory_used_bytes / _GIB, 1)
                                    if sample.memory_used_bytes is not None else None,
                                    "memory_total_gib": round(sample.memory_total_bytes / _GIB, 1)
                                    if sample.memory_total_bytes is not None else None,
                                    "power_w": sample.power_w, "power_limit_w": sample.power_limit_w,
                                    "temperature_c": sample.temperature_c, "throttle": list(sample.throttle),
                                    "pcie": f"gen {sample.pcie_generation} x{sample.pcie_width}",
                                    "pcie_max": f"gen {link.max_generation} x{link.max_width}"}
        problems = 0
        if "power cap" in sample.throttle or (sample.power_w and sample.power_limit_w
                                               and sample.power_w >= 0.95 * sample.power_limit_w):
            problems += 1
            out.append(Finding("host.gpu_power_cap", "warning", f"{name} runs at its power cap "
                               f"({sample.power_w or 0:,.0f} of {sample.power_limit_w or 0:,.0f} W)", evidence,
                               "Clocks are lowered to stay under the power limit: check the limit (nvidia-smi -q -d "
                               "POWER), cooling and the power supply; the speed you measure is the capped one."))
        if "thermal" in sample.throttle or "hw slowdown" in sample.throttle:
            problems += 1
            out.append(Finding("host.gpu_thermal", "warning", f"{name} is throttled for temperature "
                               f"({sample.temperature_c or 0:.0f} °C)", evidence,
                               "Improve cooling (airflow, fan curves, a dusty heatsink): a hot GPU runs slower."))
        below_gen = (link.max_generation and sample.pcie_generation and sample.pcie_generation < link.max_generation)
        below_width = (link.max_width and sample.pcie_width and sample.pcie_width < link.max_width)
        if below_gen or below_width:
            problems += 1
            out.append(Finding("host.gpu_pcie", "warning", f"{name}'s PCIe link runs at gen {sample.pcie_generation} "
                               f"x{sample.pcie_width}, below its gen {link.max_generation} x{link.max_width}",
                               evidence, "A slow link slows model loading and CPU offload (an idle GPU may drop "
                               "its link generation to save power: read it under load). Check the slot, riser and "
                               "BIOS PCIe settings."))
        if not problems:
            out.append(Finding("host.gpu", "info", f"{name}: {100 * (sample.utilization or 0):.0f}% busy, "
                               f"{evidence['memory_used_gib']} of {evidence['memory_total_gib']} GiB, "
                               f"{sample.power_w or 0:,.0f} W", evidence))
    return out


def _model_file(session: Session) -> Path | None:
    path = (session.props or {}).get("model_path")
    with contextlib.suppress(OSError):  # the server's path, which no file system may take (a name too long)
        if isinstance(path, str) and Path(path).is_file():
            return Path(path)
    port = _port(session)
    with contextlib.suppress(psutil.Error, OSError):
        for conn in psutil.net_connections(kind="tcp"):
            if conn.status == psutil.CONN_LISTEN and conn.laddr and conn.laddr.port == port and conn.pid:
                args = psutil.Process(conn.pid).cmdline()
                for flag in ("--model", "-m"):
                    if flag in args[:-1]:
                        candidate = Path(args[args.index(flag) + 1])
                        if candidate.is_file():
                            return candidate
    return None


def _port(session: Session) -> int:
    from urllib.parse import urlsplit

    parts = urlsplit(session.spec.url)
    return parts.port or (443 if parts.scheme == "https" else 80)


def _disk(path: Path) -> tuple[str, str]:
    """(device, filesystem type) of the mount holding ``path``."""
    best = ("", "")
    best_len = -1
    resolved = str(path.resolve())
    for part in psutil.disk_partitions(all=True):
        mount = part.mountpoint.rstrip("/") or "/"
        if (resolved == mount or resolved.startswith(mount + "/") or mount == "/") and len(mount) > best_len:
            best, best_len = (part.device, part.fstype), len(mount)
    return best


def _read_speed(path: Path) -> tuple[float, int]:
    """MB/s of reading the first `_READ_BYTES` of ``path``, and the bytes read."""
    size = 0
    start = time.perf_counter()
    with path.open("rb", buffering=0) as handle:
        while size < _READ_BYTES:
            chunk = handle.read(8 * 2**20)
            if not chunk:
                break
            size += len(chunk)
    elapsed = max(time.perf_counter() - start, 1e-9)
    return size / elapsed / 1e6, size


def _governors() -> list[str]:
    found = set()
    for path in Path("/sys/devices/system/cpu").glob("cpu[0-9]*/cpufreq/scaling_governor"):
        with contextlib.suppress(OSError):
            found.add(path.read_text().strip())
    return sorted(found)


async def run(session: Session, swap_before: SwapCounters, started: float) -> None:
    """The host check (only for a server on this machine)."""
    from tokometer.observe.watch import is_local

    if not is_local(session.spec.url):
        session.skip("host", f"{session.host} is not this machine: RAM, disk and GPUs are not read")
        return
    if (found := swap_finding(swap_before, SwapCounters.now(), time.monotonic() - started)) is not None:
        session.add(found)
    model = await asyncio.to_thread(_model_file, session)
    if model is None:
        session.skip("host", "no model file found (neither /props nor the listening process names one)")
    else:
        size = (await asyncio.to_thread(model.stat)).st_size
        session.add(ram_finding(psutil.virtual_memory().total, size, str(model)))
        await _disk_check(session, model)
    governors = _governors()
    if "powersave" in governors:
        session.add(Finding("host.cpu_governor", "warning", "the CPU frequency governor is powersave",
                            {"governors": governors}, "CPU engines and the host side of GPU serving run slower: "
                            "set the performance governor (cpupower frequency-set -g performance)."))
    await asyncio.to_thread(_gpus, session)


async def _disk_check(session: Session, model: Path) -> None:
    device, fstype = await asyncio.to_thread(_disk, model)
    size = (await asyncio.to_thread(model.stat)).st_size
    evidence: dict[str, Any] = {"model_file": str(model), "size_gib": round(size / _GIB, 2), "device": device,
                                "filesystem": fstype}
    if session.spec.quick:
        session.add(Finding("host.disk", "info", f"the model file is on {device or '?'} ({fstype or '?'})", evidence))
        return
    speed, read = await asyncio.to_thread(_read_speed, model)
    evidence.update({"read_mb_s": round(speed, 1), "read_bytes": read,
                     "cold_load_s_at_this_speed": round(size / 1e6 / speed, 1) if speed else None})
    note = " (much of it may be in the page cache: a cold read is slower)"
    if speed < _SLOW_DISK_MB_S:
        session.add(Finding("host.disk_slow", "warning", f"the model file reads at {speed:,.0f} MB/s from {device}: "
                            f"loading it takes {size / 1e6 / speed:,.0f} s", evidence,
                            "Keep model files on a local NVMe disk, not a network or spinning disk, to start "
                            "(and restart) quickly."))
    else:
        session.add(Finding("host.disk", "info", f"the model file reads at {speed:,.0f} MB/s from {device or '?'} "
                            f"({fstype or '?'}){note}", evidence))


def _gpus(session: Session) -> None:
    from tokometer.observe.gpu_nvml import NvmlReader
    from tokometer.util.errors import EndpointError

    try:
        with NvmlReader(pcie_throughput=False) as reader:
            samples = reader.sample()
            links = [_link(reader, i) for i in range(reader.count)]
    except EndpointError as exc:
        session.add(Finding("host.no_gpu", "info", "no GPU seen through NVML: the server runs on the CPU, or on "
                            "a GPU NVML cannot read", {"nvml": " ".join(str(exc).split())[:160],
                                                      "cpu": _cpu()},
                            "Expected for a CPU engine; a GPU server on this machine needs the NVIDIA driver and "
                            "'pip install tokometer[gpu]' for these checks."))
        return
    for finding in gpu_findings(samples, links):
        session.add(finding)


def _link(reader: Any, index: int) -> GpuLink:
    """The GPU's maximum PCIe link, read through the reader's NVML binding (None where unsupported)."""
    api = reader._api
    handle = reader._handles[index]
    values: list[int | None] = []
    for name in ("nvmlDeviceGetMaxPcieLinkGeneration", "nvmlDeviceGetMaxPcieLinkWidth"):
        function = getattr(api, name, None)
        try:
            values.append(int(function(handle)) if function is not None else None)
        except Exception:  # NVML raises its own error type for an unsupported field
            values.append(None)
    return GpuLink(values[0], values[1])


def _cpu() -> str:
    from tokometer.util.hostinfo import cpu_model, physical_cores

    return f"{cpu_model()}, {physical_cores()} cores, {os.cpu_count()} logical"
