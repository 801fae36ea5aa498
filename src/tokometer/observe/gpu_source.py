"""Which GPU reader a run uses, from ``--gpu-metrics``: ``auto``, ``nvml``, ``off`` or a DCGM exporter's URL.

`gpu_reader` checks the source once and answers a callable for the sampler thread (each call: one
`GpuSample` per GPU, raising on a failed reading, which the sampler records as a gap) and a note
for the report when the source asked for cannot be read. ``auto`` reads NVML only when the server
under test runs on this machine and NVML works here, and says nothing otherwise (a CPU engine, a
remote server).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

from tokometer.observe.gpu_dcgm import fetch_dcgm
from tokometer.observe.gpu_nvml import NvmlApi, NvmlReader
from tokometer.observe.snapshot import GpuSample
from tokometer.util.errors import ConfigError, EndpointError
from tokometer.util.httpurl import http_url_problem

__all__ = ["GpuReader", "gpu_reader"]

GpuReader = Callable[[], Sequence[GpuSample]]

DCGM_TIMEOUT_S = 5.0


def gpu_reader(setting: str, *, local: bool, pcie_throughput: bool = True, api: NvmlApi | None = None,
               timeout_s: float = DCGM_TIMEOUT_S) -> tuple[GpuReader | None, str | None]:
    """``(reader or None, note or None)`` for ``setting``; ``local``: the server runs on this machine.

    ``api``: a stand-in for pynvml (tests). ``pcie_throughput``: NVML's PCIe rates cost ~20 ms per
    direction per GPU and reading. An NVML reader stays open for the process's life. Raises
    `ConfigError` for a setting that is none of the four.
    """
    value = setting.strip()
    if value == "off":
        return None, None
    if value.startswith(("http://", "https://")):
        if problem := http_url_problem(value):
            raise ConfigError(f"--gpu-metrics URL {value!r} {problem}")
        try:
            first = fetch_dcgm(value, timeout_s)
        except EndpointError as exc:
            return None, f"{exc}; give --gpu-metrics URL of a DCGM exporter, or off"
        if not first:
            return None, (f"GPU metrics: no DCGM GPU series at {value}; give --gpu-metrics URL of a DCGM exporter, "
                          "or off")
        return partial(fetch_dcgm, value, timeout_s), None
    if value not in ("auto", "nvml"):
        raise ConfigError(f"--gpu-metrics {setting!r}: give auto, nvml, off, or a DCGM exporter's http(s):// URL")
    if value == "auto" and not local:
        return None, None
    try:
        reader = NvmlReader(api, pcie_throughput=pcie_throughput)
    except EndpointError as exc:
        return None, (None if value == "auto" else f"GPU metrics: {exc}")
    return reader.sample, None
