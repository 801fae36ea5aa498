"""Remote GPUs read from a DCGM exporter's ``/metrics`` into `GpuSample` s, one per ``gpu`` label.

Names and units, from NVIDIA/dcgm-exporter ``etc/default-counters.csv`` and
``etc/dcp-metrics-included.csv`` (the exporter's counter files) and NVIDIA/DCGM
``dcgmlib/dcgm_fields.h`` (the field definitions):

==========================================  ======================================  ====================
field                                       meaning                                 unit
==========================================  ======================================  ====================
``DCGM_FI_DEV_GPU_UTIL``                    GPU utilisation (default counters)      percent
``DCGM_FI_DEV_FB_USED`` / ``_FB_FREE``      framebuffer used / free (default)       MiB
``DCGM_FI_DEV_FB_TOTAL``, ``_FB_RESERVED``  total / reserved framebuffer (optional)  MiB
``DCGM_FI_DEV_POWER_USAGE``                 power draw (default)                    W
``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION``    energy since the driver loaded (default) mJ
``DCGM_FI_DEV_ENFORCED_POWER_LIMIT``        the limit the driver enforces (optional) W
``DCGM_FI_DEV_POWER_MGMT_LIMIT``            the current power limit (optional)      W
``DCGM_FI_DEV_SM_CLOCK`` / ``_MEM_CLOCK``   SM / memory clock (default)             MHz
``DCGM_FI_DEV_GPU_TEMP``                    GPU temperature (default)               °C
``DCGM_FI_DEV_CLOCKS_EVENT_REASONS``        clock event reasons (optional); the     NVML's bitmask
                                            older name ``..._CLOCK_THROTTLE_REASONS``
``DCGM_FI_PROF_PCIE_TX_BYTES`` / ``_RX_``   PCIe rate, headers included (DCP)       bytes/s
``DCGM_FI_DEV_PCIE_TX_THROUGHPUT`` / ``RX`` NVML's PCIe throughput (deprecated in   KB/s
                                            dcgm_fields.h for the PROF fields)
``DCGM_FI_DEV_PCIE_LINK_GEN`` / ``_WIDTH``  current PCIe link generation / width    -
==========================================  ======================================  ====================

Labels (as dcgm-exporter writes them): ``gpu`` (the index), ``UUID``, ``pci_bus_id``, ``device``
(``nvidia0``), ``modelName`` (the GPU's name), ``Hostname``, and with Kubernetes ``container``,
``namespace``, ``pod``. The same GPU may appear in several series of one name (one per pod, or per
MIG instance with ``GPU_I_ID``): the first series of each GPU counts, preferring a series without
``GPU_I_ID`` (the whole GPU).
"""

from __future__ import annotations

import ssl
import time
import urllib.error
from collections.abc import Mapping

from prometheus_client.parser import text_string_to_metric_families

from tokometer.observe.gpu_nvml import throttle_reasons
from tokometer.observe.prometheus import reading
from tokometer.observe.sampler import fetch_text
from tokometer.observe.snapshot import GpuSample
from tokometer.util.errors import EndpointError

__all__ = ["DCGM_FIELDS", "fetch_dcgm", "parse_dcgm"]

_MIB = 1024 * 1024
_KB = 1024

DCGM_FIELDS = (
    "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_TOTAL",
    "DCGM_FI_DEV_FB_RESERVED", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
    "DCGM_FI_DEV_ENFORCED_POWER_LIMIT", "DCGM_FI_DEV_POWER_MGMT_LIMIT", "DCGM_FI_DEV_SM_CLOCK",
    "DCGM_FI_DEV_MEM_CLOCK", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
    "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "DCGM_FI_PROF_PCIE_TX_BYTES", "DCGM_FI_PROF_PCIE_RX_BYTES",
    "DCGM_FI_DEV_PCIE_TX_THROUGHPUT", "DCGM_FI_DEV_PCIE_RX_THROUGHPUT", "DCGM_FI_DEV_PCIE_LINK_GEN",
    "DCGM_FI_DEV_PCIE_LINK_WIDTH",
)
"""The exporter fields read here (every other series is ignored)."""


def parse_dcgm(text: str, at_ns: int | None = None) -> list[GpuSample]:
    """The `GpuSample` of each GPU in a DCGM exporter's exposition ``text``, by ``gpu`` label.

    ``at_ns``: the reading's stamp (default: ``perf_counter_ns()`` now). Raises `ValueError` where
    the text is not Prometheus exposition format.
    """
    stamp = time.perf_counter_ns() if at_ns is None else at_ns
    values: dict[str, dict[str, float]] = {}
    names: dict[str, str] = {}
    whole: dict[tuple[str, str], bool] = {}  # (gpu, field) -> taken from a whole-GPU series
    wanted = frozenset(DCGM_FIELDS)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            # The parser names a counter's samples ``<family>_total`` (the exporter's name is the family's).
            name = family.name if sample.name == f"{family.name}_total" else sample.name
            if name not in wanted or "gpu" not in sample.labels or not reading(sample.value):
                continue  # a negative, infinite or NaN value is no reading
            gpu = sample.labels["gpu"]
            is_whole = "GPU_I_ID" not in sample.labels
            key = (gpu, name)
            fields = values.setdefault(gpu, {})
            if key in whole and (whole[key] or not is_whole):
                continue  # the first series counts; a whole-GPU series replaces a MIG instance's
            fields[name] = float(sample.value)
            whole[key] = is_whole
            if sample.labels.get("modelName") and gpu not in names:
                names[gpu] = sample.labels["modelName"]
    samples = [_sample(gpu, fields, names.get(gpu, ""), stamp) for gpu, fields in values.items()]
    return sorted(samples, key=lambda s: s.index)


def _sample(gpu: str, fields: Mapping[str, float], name: str, at_ns: int) -> GpuSample:
    def get(field: str, scale: float = 1.0) -> float | None:
        value = fields.get(field)
        return value * scale if value is not None else None

    def first(*candidates: str, scale: float = 1.0) -> float | None:
        for field in candidates:
            if field in fields:
                return fields[field] * scale
        return None

    used = get("DCGM_FI_DEV_FB_USED", _MIB)
    total = get("DCGM_FI_DEV_FB_TOTAL", _MIB)
    if total is None and used is not None and "DCGM_FI_DEV_FB_FREE" in fields:
        # used + free (+ reserved, where exported) is the whole framebuffer (dcgm_fields.h FB_* fields)
        total = (fields["DCGM_FI_DEV_FB_USED"] + fields["DCGM_FI_DEV_FB_FREE"]
                 + fields.get("DCGM_FI_DEV_FB_RESERVED", 0.0)) * _MIB
    mask = first("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS")
    generation = get("DCGM_FI_DEV_PCIE_LINK_GEN")
    width = get("DCGM_FI_DEV_PCIE_LINK_WIDTH")
    utilization = get("DCGM_FI_DEV_GPU_UTIL")
    energy_mj = get("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION")
    return GpuSample(
        at_ns=at_ns,
        index=int(gpu) if gpu.isdigit() else -1,
        name=name,
        utilization=utilization / 100 if utilization is not None else None,
        memory_used_bytes=used,
        memory_total_bytes=total,
        power_w=get("DCGM_FI_DEV_POWER_USAGE"),
        power_limit_w=first("DCGM_FI_DEV_ENFORCED_POWER_LIMIT", "DCGM_FI_DEV_POWER_MGMT_LIMIT"),
        sm_clock_mhz=get("DCGM_FI_DEV_SM_CLOCK"),
        memory_clock_mhz=get("DCGM_FI_DEV_MEM_CLOCK"),
        temperature_c=get("DCGM_FI_DEV_GPU_TEMP"),
        throttle=throttle_reasons(int(mask)) if mask is not None else (),
        pcie_generation=int(generation) if generation is not None else None,
        pcie_width=int(width) if width is not None else None,
        pcie_rx_bytes_s=(get("DCGM_FI_PROF_PCIE_RX_BYTES")
                         if "DCGM_FI_PROF_PCIE_RX_BYTES" in fields else get("DCGM_FI_DEV_PCIE_RX_THROUGHPUT", _KB)),
        pcie_tx_bytes_s=(get("DCGM_FI_PROF_PCIE_TX_BYTES")
                         if "DCGM_FI_PROF_PCIE_TX_BYTES" in fields else get("DCGM_FI_DEV_PCIE_TX_THROUGHPUT", _KB)),
        energy_j=energy_mj / 1000 if energy_mj is not None else None,
        source="dcgm",
    )


def fetch_dcgm(url: str, timeout_s: float = 5.0, context: ssl.SSLContext | None = None) -> list[GpuSample]:
    """GET a DCGM exporter's ``/metrics`` ``url`` and parse it; blocking (the sampler calls it from its thread).

    Fetched as the server's ``/metrics`` is (`observe.sampler.fetch_text`: the same proxies and TLS). Raises
    `EndpointError` when the URL answers nothing, not 200, or not exposition text. The samples are stamped
    when the body arrived.
    """
    try:
        text = fetch_text(url, timeout_s, context)
    except urllib.error.HTTPError as exc:
        raise EndpointError(f"GPU metrics: {url} answered HTTP {exc.code}") from exc
    except OSError as exc:
        raise EndpointError(f"GPU metrics: no answer from {url} ({exc})") from exc
    try:
        return parse_dcgm(text, time.perf_counter_ns())
    except ValueError as exc:
        raise EndpointError(f"GPU metrics: {url} did not answer Prometheus text ({exc})") from exc
