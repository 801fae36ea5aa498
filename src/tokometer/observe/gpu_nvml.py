"""Local GPUs read through NVML (``nvidia-ml-py``, the ``gpu`` extra) into `GpuSample` s.

`NvmlReader` opens NVML once, keeps a handle per GPU and reads every GPU on each `sample` call; a
field that a GPU or driver does not support becomes ``None`` (each NVML call is tried on its own).
`available` says, without raising, whether NVML can be used here at all.

pynvml has no type hints: everything this module calls is described by the `NvmlApi` protocol,
which the real module satisfies and which a test can satisfy with a small stand-in object.

Units as NVML returns them (nvml.h, and pynvml's wrappers of it): power and power limit in mW,
clocks in MHz, temperature in °C, PCIe throughput in KB/s (sampled by the driver over 20 ms, so
each call takes about 20 ms), the energy counter in mJ since the driver was loaded.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from types import TracebackType
from typing import Protocol, TypeVar

from tokometer.observe.snapshot import GpuSample
from tokometer.util.errors import EndpointError

__all__ = ["THROTTLE_REASONS", "NvmlApi", "NvmlReader", "available", "read_gpus", "throttle_reasons"]

THROTTLE_REASONS: tuple[tuple[int, str], ...] = (
    (0x001, "idle"),             # nvmlClocksEventReasonGpuIdle
    (0x002, "app clocks"),       # ...ApplicationsClocksSetting (user-defined clocks)
    (0x004, "power cap"),        # ...SwPowerCap: clocks lowered to stay under the power limit
    (0x008, "hw slowdown"),      # ...HwSlowdown: temperature, power brake or fast power trigger
    (0x010, "sync boost"),       # ...SyncBoost
    (0x020, "thermal"),          # ...SwThermalSlowdown
    (0x040, "thermal"),          # ...HwThermalSlowdown
    (0x080, "power brake"),      # ...HwPowerBrakeSlowdown (external power brake)
    (0x100, "display clocks"),   # ...DisplayClockSetting
    (0x200, "board limit"),      # nvmlClocksThrottleReasonBoardLimit (older drivers)
    (0x400, "reliability"),      # nvmlClocksThrottleReasonReliability (older drivers)
)
"""NVML's clock event (formerly "throttle") reason bits, in words. The bits are those of pynvml's
``nvmlClocksEventReason*`` / ``nvmlClocksThrottleReason*`` constants (nvml.h); DCGM's
``DCGM_FI_DEV_CLOCKS_EVENT_REASONS`` is the same bitmask ("a 1:1 map to the NVML reasons",
NVIDIA/DCGM dcgmlib/dcgm_fields.h, ``DCGM_CLOCKS_EVENT_REASON_*``)."""

# nvml.h enum values (nvmlClockType_t, nvmlTemperatureSensors_t, nvmlPcieUtilCounter_t); stable ABI.
_CLOCK_SM = 1
_CLOCK_MEM = 2
_TEMPERATURE_GPU = 0
_PCIE_TX_BYTES = 0
_PCIE_RX_BYTES = 1
_KB = 1024

_T = TypeVar("_T")


def throttle_reasons(mask: int) -> tuple[str, ...]:
    """The active reasons of an NVML/DCGM clock-event bitmask, in words, each once, in bit order."""
    words: list[str] = []
    for bit, word in THROTTLE_REASONS:
        if mask & bit and word not in words:
            words.append(word)
    return tuple(words)


class _Utilization(Protocol):
    @property
    def gpu(self) -> int: ...


class _Memory(Protocol):
    @property
    def used(self) -> int: ...
    @property
    def total(self) -> int: ...


class NvmlApi(Protocol):
    """The part of pynvml this module calls (names and signatures as pynvml spells them).

    The throttle-reason readers are looked up by name, as older pynvml releases lack
    ``nvmlDeviceGetCurrentClocksEventReasons``: ``nvmlDeviceGetCurrentClocksEventReasons(handle)``,
    else ``nvmlDeviceGetCurrentClocksThrottleReasons(handle)``.
    """

    @property
    def NVMLError(self) -> type[Exception]: ...
    def nvmlInit(self) -> None: ...
    def nvmlShutdown(self) -> None: ...
    def nvmlDeviceGetCount(self) -> int: ...
    def nvmlDeviceGetHandleByIndex(self, index: int) -> object: ...
    def nvmlDeviceGetName(self, handle: object) -> str | bytes: ...
    def nvmlDeviceGetUtilizationRates(self, handle: object) -> _Utilization: ...
    def nvmlDeviceGetMemoryInfo(self, handle: object) -> _Memory: ...
    def nvmlDeviceGetPowerUsage(self, handle: object) -> int: ...
    def nvmlDeviceGetEnforcedPowerLimit(self, handle: object) -> int: ...
    def nvmlDeviceGetClockInfo(self, handle: object, clock: int) -> int: ...
    def nvmlDeviceGetTemperature(self, handle: object, sensor: int) -> int: ...
    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle: object) -> int: ...
    def nvmlDeviceGetCurrPcieLinkWidth(self, handle: object) -> int: ...
    def nvmlDeviceGetPcieThroughput(self, handle: object, counter: int) -> int: ...
    def nvmlDeviceGetTotalEnergyConsumption(self, handle: object) -> int: ...


def _load_pynvml() -> NvmlApi:
    try:
        import pynvml
    except ImportError as exc:
        raise EndpointError("GPU telemetry needs NVML's Python binding: pip install 'tokometer[gpu]'") from exc
    api: NvmlApi = pynvml
    return api


class NvmlReader:
    """An open NVML session over every local GPU. Use as a context manager, or call `close`.

    ``api`` is pynvml (the default) or an object with the same functions (`NvmlApi`).
    ``pcie_throughput``: read PCIe RX/TX rates, which costs the driver ~20 ms per direction per GPU.
    Raises `EndpointError` when NVML cannot be loaded or initialised, or sees no GPU.
    """

    def __init__(self, api: NvmlApi | None = None, *, pcie_throughput: bool = True) -> None:
        self._api = api if api is not None else _load_pynvml()
        self._pcie_throughput = pcie_throughput
        nvml_error = self._api.NVMLError
        try:
            self._api.nvmlInit()
        except nvml_error as exc:
            raise EndpointError(f"NVML could not be initialised ({exc}): is an NVIDIA driver loaded?") from exc
        try:
            count = self._api.nvmlDeviceGetCount()
            self._handles = [self._api.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        except nvml_error as exc:
            self.close()
            raise EndpointError(f"NVML could not list the GPUs: {exc}") from exc
        if not self._handles:
            self.close()
            raise EndpointError("NVML sees no GPU on this machine")
        self._names = [self._name(handle) for handle in self._handles]
        self._open = True

    @property
    def count(self) -> int:
        return len(self._handles)

    def __enter__(self) -> NvmlReader:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Shut NVML down (once); never raises."""
        if getattr(self, "_open", True):
            self._open = False
            with contextlib.suppress(self._api.NVMLError):
                self._api.nvmlShutdown()

    def sample(self) -> list[GpuSample]:
        """One reading of each GPU, in index order; ``at_ns`` is ``perf_counter_ns()`` after each GPU's."""
        return [self._read(index, handle) for index, handle in enumerate(self._handles)]

    def _call(self, function: Callable[..., _T], *args: object) -> _T | None:
        try:
            return function(*args)
        except self._api.NVMLError:
            return None

    def _name(self, handle: object) -> str:
        name = self._call(self._api.nvmlDeviceGetName, handle)
        if isinstance(name, bytes):
            return name.decode("utf-8", "replace")
        return name or ""

    def _reasons(self, handle: object) -> int | None:
        for attribute in ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"):
            function: Callable[[object], int] | None = getattr(self._api, attribute, None)
            if function is not None:
                mask = self._call(function, handle)
                if mask is not None:
                    return mask
        return None

    def _read(self, index: int, handle: object) -> GpuSample:
        api = self._api
        utilization = self._call(api.nvmlDeviceGetUtilizationRates, handle)
        memory = self._call(api.nvmlDeviceGetMemoryInfo, handle)
        power_mw = self._call(api.nvmlDeviceGetPowerUsage, handle)
        limit_mw = self._call(api.nvmlDeviceGetEnforcedPowerLimit, handle)
        mask = self._reasons(handle)
        rx_kb = tx_kb = None
        if self._pcie_throughput:
            rx_kb = self._call(api.nvmlDeviceGetPcieThroughput, handle, _PCIE_RX_BYTES)
            tx_kb = self._call(api.nvmlDeviceGetPcieThroughput, handle, _PCIE_TX_BYTES)
        energy_mj = self._call(api.nvmlDeviceGetTotalEnergyConsumption, handle)
        sm_clock = self._call(api.nvmlDeviceGetClockInfo, handle, _CLOCK_SM)
        memory_clock = self._call(api.nvmlDeviceGetClockInfo, handle, _CLOCK_MEM)
        temperature = self._call(api.nvmlDeviceGetTemperature, handle, _TEMPERATURE_GPU)
        return GpuSample(
            at_ns=time.perf_counter_ns(),
            index=index,
            name=self._names[index],
            utilization=utilization.gpu / 100 if utilization is not None else None,
            memory_used_bytes=float(memory.used) if memory is not None else None,
            memory_total_bytes=float(memory.total) if memory is not None else None,
            power_w=power_mw / 1000 if power_mw is not None else None,
            power_limit_w=limit_mw / 1000 if limit_mw is not None else None,
            sm_clock_mhz=float(sm_clock) if sm_clock is not None else None,
            memory_clock_mhz=float(memory_clock) if memory_clock is not None else None,
            temperature_c=float(temperature) if temperature is not None else None,
            throttle=throttle_reasons(mask) if mask is not None else (),
            pcie_generation=self._call(api.nvmlDeviceGetCurrPcieLinkGeneration, handle),
            pcie_width=self._call(api.nvmlDeviceGetCurrPcieLinkWidth, handle),
            pcie_rx_bytes_s=rx_kb * _KB if rx_kb is not None else None,
            pcie_tx_bytes_s=tx_kb * _KB if tx_kb is not None else None,
            energy_j=energy_mj / 1000 if energy_mj is not None else None,
            source="nvml",
        )


def available(api: NvmlApi | None = None) -> bool:
    """Whether NVML can be used here: the binding imports, NVML initialises and sees a GPU. Never raises."""
    try:
        NvmlReader(api, pcie_throughput=False).close()
    except Exception:  # a broken driver may raise anything: the answer is no
        return False
    return True


def read_gpus(api: NvmlApi | None = None, *, pcie_throughput: bool = True) -> list[GpuSample]:
    """One reading of every local GPU (opens and closes NVML); raises `EndpointError` as `NvmlReader`."""
    with NvmlReader(api, pcie_throughput=pcie_throughput) as reader:
        return reader.sample()
