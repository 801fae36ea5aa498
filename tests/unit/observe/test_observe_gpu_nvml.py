"""NVML reader: every field, unit conversions, unsupported fields, and `available`.

CI has no GPU, so these tests pass `NvmlReader` an in-process STAND-IN for pynvml (`FakeNvml`
below): an object with pynvml's function names that returns values in NVML's units (mW, MHz, °C,
KB/s, mJ) and raises its own ``NVMLError`` where a test says a GPU does not support a call. It is
injected through the reader's ``api`` parameter; nothing global is patched. The real path (the
pynvml module on a real driver) is checked by ``bench/gpu_check.py`` on a machine with a GPU.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from typing import Any

import pytest

from tokometer.observe.gpu_nvml import NvmlReader, available, read_gpus, throttle_reasons
from tokometer.util.errors import EndpointError


class NVMLError(Exception):
    """The stand-in's error, like pynvml.NVMLError (a GPU or driver that does not support a call)."""


@dataclass
class _Util:
    gpu: int
    memory: int = 0


@dataclass
class _Mem:
    used: int
    total: int
    free: int = 0


@dataclass
class FakeGpu:
    name: Any = "NVIDIA H100 80GB HBM3"
    util: int = 87
    used: int = 60 * 2**30
    total: int = 80 * 2**30
    power_mw: int = 650_000
    limit_mw: int = 700_000
    sm_mhz: int = 1980
    mem_mhz: int = 2619
    temp_c: int = 71
    reasons: int = 0x4 | 0x20
    gen: int = 5
    width: int = 16
    rx_kb: int = 2000
    tx_kb: int = 500
    energy_mj: int = 123_456_789
    unsupported: set[str] = field(default_factory=set)
    """Names of pynvml functions that raise NVMLError for this GPU."""


class FakeNvml:
    """Stand-in for the pynvml module (see the module docstring). Records init/shutdown calls."""

    NVMLError = NVMLError

    def __init__(self, gpus: list[FakeGpu], *, init_fails: bool = False, old: bool = False) -> None:
        self.gpus = gpus
        self.init_fails = init_fails
        self.inits = 0
        self.shutdowns = 0
        # Current pynvml has both names; an older one (``old``) only the ThrottleReasons one.
        self.nvmlDeviceGetCurrentClocksThrottleReasons = self._throttle_reasons
        if not old:
            self.nvmlDeviceGetCurrentClocksEventReasons = self._event_reasons

    def _gpu(self, handle: object, call: str) -> FakeGpu:
        assert isinstance(handle, int)
        gpu = self.gpus[handle]
        if call in gpu.unsupported:
            raise NVMLError(f"{call}: Not Supported")
        return gpu

    def nvmlInit(self) -> None:
        if self.init_fails:
            raise NVMLError("Driver Not Loaded")
        self.inits += 1

    def nvmlShutdown(self) -> None:
        self.shutdowns += 1

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> object:
        return index

    def nvmlDeviceGetName(self, h: object) -> Any:
        return self._gpu(h, "nvmlDeviceGetName").name

    def nvmlDeviceGetUtilizationRates(self, h: object) -> _Util:
        return _Util(self._gpu(h, "nvmlDeviceGetUtilizationRates").util)

    def nvmlDeviceGetMemoryInfo(self, h: object) -> _Mem:
        gpu = self._gpu(h, "nvmlDeviceGetMemoryInfo")
        return _Mem(gpu.used, gpu.total, gpu.total - gpu.used)

    def nvmlDeviceGetPowerUsage(self, h: object) -> int:
        return self._gpu(h, "nvmlDeviceGetPowerUsage").power_mw

    def nvmlDeviceGetEnforcedPowerLimit(self, h: object) -> int:
        return self._gpu(h, "nvmlDeviceGetEnforcedPowerLimit").limit_mw

    def nvmlDeviceGetClockInfo(self, h: object, clock: int) -> int:
        gpu = self._gpu(h, "nvmlDeviceGetClockInfo")
        return {1: gpu.sm_mhz, 2: gpu.mem_mhz}[clock]  # NVML_CLOCK_SM, NVML_CLOCK_MEM

    def nvmlDeviceGetTemperature(self, h: object, sensor: int) -> int:
        assert sensor == 0  # NVML_TEMPERATURE_GPU
        return self._gpu(h, "nvmlDeviceGetTemperature").temp_c

    def _event_reasons(self, h: object) -> int:
        return self._gpu(h, "nvmlDeviceGetCurrentClocksEventReasons").reasons

    def _throttle_reasons(self, h: object) -> int:
        return self._gpu(h, "nvmlDeviceGetCurrentClocksThrottleReasons").reasons

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h: object) -> int:
        return self._gpu(h, "nvmlDeviceGetCurrPcieLinkGeneration").gen

    def nvmlDeviceGetCurrPcieLinkWidth(self, h: object) -> int:
        return self._gpu(h, "nvmlDeviceGetCurrPcieLinkWidth").width

    def nvmlDeviceGetPcieThroughput(self, h: object, counter: int) -> int:
        gpu = self._gpu(h, "nvmlDeviceGetPcieThroughput")
        return {0: gpu.tx_kb, 1: gpu.rx_kb}[counter]  # NVML_PCIE_UTIL_TX_BYTES, _RX_BYTES

    def nvmlDeviceGetTotalEnergyConsumption(self, h: object) -> int:
        return self._gpu(h, "nvmlDeviceGetTotalEnergyConsumption").energy_mj


def test_every_field_in_tokometer_units() -> None:
    fake = FakeNvml([FakeGpu(), FakeGpu(name=b"NVIDIA L4", util=0, reasons=0x1)])
    with NvmlReader(fake) as reader:
        assert reader.count == 2
        first, second = reader.sample()
    assert fake.inits == 1 and fake.shutdowns == 1
    assert first.index == 0 and first.name == "NVIDIA H100 80GB HBM3" and first.source == "nvml"
    assert first.utilization == pytest.approx(0.87)
    assert first.memory_used_bytes == 60 * 2**30 and first.memory_total_bytes == 80 * 2**30
    assert first.power_w == 650.0 and first.power_limit_w == 700.0
    assert first.sm_clock_mhz == 1980 and first.memory_clock_mhz == 2619 and first.temperature_c == 71
    assert first.throttle == ("power cap", "thermal")
    assert first.pcie_generation == 5 and first.pcie_width == 16
    assert first.pcie_rx_bytes_s == 2000 * 1024 and first.pcie_tx_bytes_s == 500 * 1024
    assert first.energy_j == pytest.approx(123_456.789)
    assert second.index == 1 and second.name == "NVIDIA L4"  # bytes from older pynvml, decoded
    assert second.utilization == 0 and second.throttle == ("idle",)
    assert first.at_ns <= second.at_ns


def test_unsupported_fields_are_none_and_the_rest_still_read() -> None:
    unsupported = {"nvmlDeviceGetTotalEnergyConsumption", "nvmlDeviceGetPcieThroughput",
                   "nvmlDeviceGetEnforcedPowerLimit", "nvmlDeviceGetCurrentClocksEventReasons",
                   "nvmlDeviceGetCurrentClocksThrottleReasons",
                   "nvmlDeviceGetName", "nvmlDeviceGetClockInfo"}
    (sample,) = read_gpus(FakeNvml([FakeGpu(unsupported=unsupported)]))
    assert sample.energy_j is None and sample.pcie_rx_bytes_s is None and sample.pcie_tx_bytes_s is None
    assert sample.power_limit_w is None and sample.throttle == () and sample.name == ""
    assert sample.sm_clock_mhz is None and sample.memory_clock_mhz is None
    assert sample.power_w == 650.0 and sample.utilization == pytest.approx(0.87)  # unaffected


def test_pcie_throughput_can_be_skipped() -> None:
    """Each PCIe throughput call costs the driver ~20 ms: a sampler may leave it out."""
    (sample,) = read_gpus(FakeNvml([FakeGpu()]), pcie_throughput=False)
    assert sample.pcie_rx_bytes_s is None and sample.pcie_tx_bytes_s is None and sample.pcie_generation == 5


def test_older_pynvml_throttle_reasons_name() -> None:
    (sample,) = read_gpus(FakeNvml([FakeGpu(reasons=0x8 | 0x40 | 0x80)], old=True))
    assert sample.throttle == ("hw slowdown", "thermal", "power brake")


def test_new_binding_on_an_old_driver_falls_back_to_throttle_reasons() -> None:
    """pynvml has the new name, but the driver lacks the function (NVML answers FunctionNotFound)."""
    gpu = FakeGpu(reasons=0x4, unsupported={"nvmlDeviceGetCurrentClocksEventReasons"})
    (sample,) = read_gpus(FakeNvml([gpu]))
    assert sample.throttle == ("power cap",)


def test_throttle_reasons_words() -> None:
    assert throttle_reasons(0) == ()
    assert throttle_reasons(0x4) == ("power cap",)
    assert throttle_reasons(0x20 | 0x40) == ("thermal",)  # SW and HW thermal slowdown: one word
    assert throttle_reasons(0x1FF) == ("idle", "app clocks", "power cap", "hw slowdown", "sync boost", "thermal",
                                       "power brake", "display clocks")


def test_available_says_no_without_raising() -> None:
    assert available(FakeNvml([FakeGpu()]))
    assert not available(FakeNvml([], init_fails=True))
    no_gpu = FakeNvml([])
    assert not available(no_gpu)
    assert no_gpu.shutdowns == 1  # initialised, found nothing, shut down again


def test_reader_errors_say_what_to_fix() -> None:
    with pytest.raises(EndpointError, match="NVIDIA driver"):
        NvmlReader(FakeNvml([], init_fails=True))
    with pytest.raises(EndpointError, match="no GPU"):
        NvmlReader(FakeNvml([]))


def test_the_real_binding_without_a_gpu_is_unavailable() -> None:
    """On a machine without an NVIDIA GPU (CI's), ``available()`` answers no and does not raise, whether the
    binding (the gpu extra) is installed or not: both are real paths a user without a GPU takes."""
    if shutil.which("nvidia-smi") is not None:
        pytest.skip("this machine has an NVIDIA driver: the real path is checked by bench/gpu_check.py, "
                    "not by this no-GPU test")
    assert available() is False
