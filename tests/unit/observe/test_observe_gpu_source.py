"""Choosing the GPU reader from --gpu-metrics (NVML through the documented pynvml stand-in: CI has no GPU).

The DCGM URL case runs against a real loopback server in tests/integration/test_observe_dcgm.py.
"""

from __future__ import annotations

import pytest

from tests.unit.observe.test_observe_gpu_nvml import FakeGpu, FakeNvml
from tokometer.observe.gpu_source import gpu_reader
from tokometer.util.errors import ConfigError


def test_off_and_auto_for_a_remote_server_read_nothing_and_say_nothing() -> None:
    fake = FakeNvml([FakeGpu()])
    assert gpu_reader("off", local=True, api=fake) == (None, None)
    assert gpu_reader("auto", local=False, api=fake) == (None, None)
    assert fake.inits == 0


def test_auto_and_nvml_for_a_local_server() -> None:
    reader, note = gpu_reader("auto", local=True, api=FakeNvml([FakeGpu(), FakeGpu()]))
    assert reader is not None and note is None
    assert [s.index for s in reader()] == [0, 1]
    reader, note = gpu_reader("nvml", local=False, api=FakeNvml([FakeGpu()]), pcie_throughput=False)
    assert reader is not None and note is None
    (sample,) = reader()
    assert sample.pcie_rx_bytes_s is None and sample.power_w == 650.0


def test_no_nvml_is_silent_for_auto_and_a_note_for_nvml() -> None:
    assert gpu_reader("auto", local=True, api=FakeNvml([], init_fails=True)) == (None, None)
    reader, note = gpu_reader("nvml", local=True, api=FakeNvml([], init_fails=True))
    assert reader is None and note is not None and note.startswith("GPU metrics: NVML could not be initialised")


def test_a_bad_setting_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="auto, nvml, off"):
        gpu_reader("dcgm", local=True)
