"""The hardware table (with its sources), user rows from TOML, names, and the measured host."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokometer.perf import hardware_table, resolve_hardware
from tokometer.perf import host as host_module
from tokometer.util.errors import ConfigError


@pytest.fixture(autouse=True)
def _own_dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def test_the_shipped_table_keeps_its_sources() -> None:
    table = hardware_table()
    h100 = table["H100-SXM"]
    assert (h100.memory_gb, h100.bandwidth_gbs, h100.bf16_tflops, h100.fp8_tflops) == (80, 3350, 989, 1979)
    assert h100.source == "NVIDIA H100 datasheet"
    assert h100.peak_flops("fp8") == 1979e12 and h100.peak_flops("int8") == 1979e12
    assert table["A100-80GB-SXM"].peak_flops("fp8") == 312e12  # no fp8 on A100: falls back to bf16
    assert table["Apple-M3-Max"].peak_flops() is None
    assert table["EPYC-Genoa-12ch-DDR5-4800"].memory_gb is None
    assert all(row.source for row in table.values())
    assert table["A10G"].note == "no official datasheet; compute approximate"


@pytest.mark.parametrize(("name", "expected"), [("H100", "H100-SXM"), ("h100-sxm", "H100-SXM"),
                                                ("H100 PCIe", "H100-PCIe"), ("a100", "A100-80GB-SXM"),
                                                ("4090", "RTX-4090"), ("m3-max", "Apple-M3-Max"), ("b200", "B200")])
def test_names_and_aliases(name: str, expected: str) -> None:
    assert resolve_hardware(name).name == expected


def test_unknown_hardware_lists_close_matches() -> None:
    with pytest.raises(ConfigError, match=r"unknown hardware 'H110': did you mean .*H100-SXM"):
        resolve_hardware("H110")
    with pytest.raises(ConfigError, match=r"unknown hardware 'apple': did you mean .*Apple-M2-Ultra"):
        resolve_hardware("apple")  # three Apple rows: ambiguous


def test_user_rows_from_toml(tmp_path: Path) -> None:
    path = tmp_path / "hw.toml"
    path.write_text('[[hardware]]\nname = "my-gpu"\nmemory_gb = 48\nbandwidth_gbs = 960\nbf16_tflops_dense = 181\n'
                    'source = "our sheet"\n\n[[hardware]]\nname = "H100-SXM"\nmemory_gb = 80\nbandwidth_gbs = 3000\n')
    mine = resolve_hardware("MY-GPU", path)
    assert (mine.memory_gb, mine.bandwidth_gbs, mine.bf16_tflops, mine.source) == (48, 960, 181, "our sheet")
    assert resolve_hardware("H100", path).bandwidth_gbs == 3000  # the user's row wins
    assert resolve_hardware("H100", path).source == str(path)
    default = Path(tmp_path / "config" / "tokometer" / "hardware.toml")
    default.parent.mkdir(parents=True)
    default.write_text(path.read_text())
    assert resolve_hardware("my-gpu").bandwidth_gbs == 960  # the default file is read too
    path.write_text('[[hardware]]\nname = "x"\n')
    with pytest.raises(ConfigError, match="needs bandwidth_gbs"):
        resolve_hardware("x", path)
    path.write_text("[[hardware]\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        resolve_hardware("x", path)
    with pytest.raises(ConfigError, match="no hardware file"):
        resolve_hardware("x", tmp_path / "missing.toml")


def test_host_is_measured_once_and_cached(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(host_module, "_ARRAY_MIB", 4)  # small and quick: this checks the plumbing, not the machine
    monkeypatch.setattr(host_module, "_MATMUL_N", 64)
    host = resolve_hardware("host")
    assert host.name == "host" and host.kind == "cpu"
    assert host.bandwidth_gbs > 0 and host.bf16_tflops and host.memory_gb and host.memory_gb > 0
    assert "numpy stream test" in host.source and "(cached)" not in host.source
    assert host_module.host_cache_file().is_file()
    again = resolve_hardware("host")
    assert "(cached)" in again.source and again.bandwidth_gbs == host.bandwidth_gbs
    fresh = host_module.host_hardware(remeasure=True)
    assert "(cached)" not in fresh.source
    assert (fresh.peaks[0].dtype, fresh.peaks[0].basis) == ("fp32", "measured")


def test_the_compute_dtype_of_a_weight_format_on_a_cpu_and_on_a_gpu() -> None:
    from tokometer.perf import Deployment, resolve_model
    from tokometer.perf.hardwarespec import ComputePeak, HardwareSpec

    peaks = (ComputePeak("fp32", 250e9, "measured"), ComputePeak("bf16", 4096e9, "theoretical"),
             ComputePeak("fp16", 512e9, "theoretical"), ComputePeak("int8", 8192e9, "theoretical"))
    host = HardwareSpec(name="host", kind="cpu", memory_gb=16, bandwidth_gbs=10, bf16_tflops=4.096, peaks=peaks)
    model = resolve_model("gemma-3-270m")
    on_host = {dtype: Deployment(model, host, dtype) for dtype in ("bf16", "fp16", "fp32", "Q4_K_M", "fp8", "awq")}
    assert {k: (d.compute_dtype, d.compute_flops) for k, d in on_host.items()} == {
        "bf16": ("bf16", 4096e9), "fp16": ("fp16", 512e9), "fp32": ("fp32", 250e9),
        "Q4_K_M": ("int8", 8192e9),  # llama.cpp's CPU kernels: 8-bit activations, integer dot products
        "fp8": ("bf16", 4096e9), "awq": ("bf16", 4096e9)}  # no fp8 units on a CPU: dequantised to bf16
    h100 = resolve_hardware("H100")
    assert Deployment(model, h100, "Q4_K_M").compute_dtype == "bf16"  # on a GPU: dequantised into 16-bit
    assert Deployment(model, h100, "fp32").compute_peak == ComputePeak("bf16", 989e12, "datasheet",
                                                                        "NVIDIA H100 datasheet")
    assert "fp32 250 GFLOP/s (measured) / bf16 4.096 TFLOP/s (theoretical)" in host.describe()


def test_the_torch_measurement_says_why_it_has_no_figure(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """bf16/fp16 are measured in a child Python with torch; one without torch, or none at all, is a reason."""
    import sys

    monkeypatch.setenv(host_module.TORCH_PYTHON_ENV, str(tmp_path / "no-python"))
    assert "no-python" in host_module._torch_matmul(64, 1)["error"]
    script = tmp_path / "python"  # a "Python" whose torch import fails, as one without torch does
    script.write_text(f"#!/bin/sh\nexec {sys.executable} -c 'import no_such_torch_module' \"$@\"\n")
    script.chmod(0o755)
    monkeypatch.setenv(host_module.TORCH_PYTHON_ENV, str(script))
    error = host_module._torch_matmul(64, 1)["error"]
    assert "failed (exit 1)" in error and "ModuleNotFoundError" in error


@pytest.mark.timeout(60)  # a read that waits for a FIFO's writer fails here instead of hanging
def test_a_replaced_host_cache_is_measured_again_not_waited_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                               ) -> None:
    """The cached host measurement was read whole, unbounded: ``/dev/zero`` in its place took the memory, a
    FIFO waited for a writer forever, a JSON list was an AttributeError's traceback. Each is measured again."""
    import os

    cache = tmp_path / "host-perf.json"
    monkeypatch.setattr(host_module, "host_cache_file", lambda: cache)
    monkeypatch.setattr(host_module, "measure_host", lambda: {"bandwidth_gbs": 1.0})
    for replace in (lambda: cache.symlink_to("/dev/zero"), lambda: os.mkfifo(cache),
                    lambda: cache.write_text("[1]", encoding="utf-8")):
        cache.unlink(missing_ok=True)
        replace()
        assert host_module._load_or_measure(False) == {"bandwidth_gbs": 1.0, "cached": False}
