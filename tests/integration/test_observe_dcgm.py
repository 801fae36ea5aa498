"""DCGM exporter ``/metrics`` read over real HTTP on loopback (CI has no GPU and no DCGM).

`EXPORTER_TEXT` is written after dcgm-exporter's own output: the default counters of
NVIDIA/dcgm-exporter ``etc/default-counters.csv`` (HELP texts and types as that file declares them),
plus the optional fields ``DCGM_FI_DEV_POWER_MGMT_LIMIT``, ``DCGM_FI_DEV_CLOCK_THROTTLE_REASONS``,
``DCGM_FI_DEV_PCIE_LINK_GEN``/``_WIDTH`` and the DCP ``DCGM_FI_PROF_PCIE_TX_BYTES``/``_RX_BYTES``
(NVIDIA/DCGM ``dcgmlib/dcgm_fields.h``), and the exporter's label set (``gpu``, ``UUID``,
``pci_bus_id``, ``device``, ``modelName``, ``Hostname``, ``DCGM_FI_DRIVER_VERSION``). It is served
by Python's ``http.server`` in a thread and fetched with tokometer's own HTTP client.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tokometer.observe.gpu_dcgm import fetch_dcgm, parse_dcgm
from tokometer.observe.gpu_source import gpu_reader
from tokometer.observe.gpu_window import summarize_gpus
from tokometer.util.errors import EndpointError


def _labels(gpu: int) -> str:
    uuid = ("GPU-5f0a1c2e-8b7d-4e61-9a3f-0c1d2e3f4a5b", "GPU-9e8d7c6b-5a49-4837-a625-1b0c9d8e7f6a")[gpu]
    bus = ("00000000:18:00.0", "00000000:2A:00.0")[gpu]
    return (f'gpu="{gpu}",UUID="{uuid}",pci_bus_id="{bus}",device="nvidia{gpu}",'
            f'modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-node-7",DCGM_FI_DRIVER_VERSION="550.54.15"')


def exporter_text(energy_mj: tuple[float, float] = (8_412_345_678, 7_901_234_567)) -> str:
    """Two H100s: GPU 0 power-capped under load, GPU 1 lightly loaded and thermally slowed."""
    rows: list[tuple[str, str, str, tuple[float, float]]] = [
        ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", (1755, 1980)),
        ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz).", (2619, 2619)),
        ("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C).", (64, 58)),
        ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", (71, 84)),
        ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", (698.417, 312.5)),
        ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ).",
         energy_mj),
        ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries.", (0, 0)),
        ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", (97, 23)),
        ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %).", (61, 9)),
        ("DCGM_FI_DEV_ENC_UTIL", "gauge", "Encoder utilization (in %).", (0, 0)),
        ("DCGM_FI_DEV_DEC_UTIL", "gauge", "Decoder utilization (in %).", (0, 0)),
        ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.", (0, 0)),
        ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).", (4406, 40960)),
        ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", (76674, 40120)),
        ("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter",
         "Total number of NVLink bandwidth counters for all lanes", (1234567, 7654321)),
        ("DCGM_FI_DEV_VGPU_LICENSE_STATUS", "gauge", "vGPU License status", (0, 0)),
        ("DCGM_FI_DEV_POWER_MGMT_LIMIT", "gauge", "Current power limit (in W).", (700, 700)),
        ("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "gauge", "Current clock throttle reasons (bitmask).", (4, 32 | 64)),
        ("DCGM_FI_DEV_PCIE_LINK_GEN", "gauge", "PCIe current link generation.", (5, 4)),
        ("DCGM_FI_DEV_PCIE_LINK_WIDTH", "gauge", "PCIe current link width.", (16, 16)),
        ("DCGM_FI_PROF_PCIE_TX_BYTES", "gauge", "The rate of data transmitted over the PCIe bus - including both "
         "protocol headers and data payloads - in bytes per second.", (5.25e8, 1.0e6)),
        ("DCGM_FI_PROF_PCIE_RX_BYTES", "gauge", "The rate of data received over the PCIe bus - including both "
         "protocol headers and data payloads - in bytes per second.", (2.5e9, 3.0e6)),
    ]
    lines: list[str] = []
    for name, kind, help_text, values in rows:
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
        lines += [f"{name}{{{_labels(gpu)}}} {value!r}" for gpu, value in enumerate(values)]
    return "\n".join(lines) + "\n"


class _Exporter(ThreadingHTTPServer):
    body: bytes
    status: int


class _Handler(BaseHTTPRequestHandler):
    server: _Exporter

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def do_GET(self) -> None:
        if self.path != "/metrics":
            self.send_error(404)
            return
        self.send_response(self.server.status)
        self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        self.send_header("Content-Length", str(len(self.server.body)))
        self.end_headers()
        self.wfile.write(self.server.body)


@pytest.fixture
def exporter() -> Iterator[_Exporter]:
    server = _Exporter(("127.0.0.1", 0), _Handler)
    server.body, server.status = exporter_text().encode(), 200
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def _url(server: _Exporter, path: str = "/metrics") -> str:
    return f"http://127.0.0.1:{server.server_address[1]}{path}"


def test_two_gpus_over_http(exporter: _Exporter) -> None:
    first, second = fetch_dcgm(_url(exporter), timeout_s=5)
    assert (first.index, second.index) == (0, 1)
    assert first.name == second.name == "NVIDIA H100 80GB HBM3" and first.source == "dcgm"
    assert first.utilization == pytest.approx(0.97) and second.utilization == pytest.approx(0.23)
    assert first.memory_used_bytes == 76674 * 2**20
    assert first.memory_total_bytes == (76674 + 4406) * 2**20  # used + free: 80 GiB
    assert first.power_w == pytest.approx(698.417) and first.power_limit_w == 700
    assert first.sm_clock_mhz == 1755 and first.memory_clock_mhz == 2619 and first.temperature_c == 71
    assert first.throttle == ("power cap",) and second.throttle == ("thermal",)
    assert first.pcie_generation == 5 and first.pcie_width == 16 and second.pcie_generation == 4
    assert first.pcie_tx_bytes_s == 5.25e8 and first.pcie_rx_bytes_s == 2.5e9
    assert first.energy_j == pytest.approx(8_412_345.678) and second.energy_j == pytest.approx(7_901_234.567)
    assert first.at_ns == second.at_ns


def test_two_scrapes_make_a_step_summary(exporter: _Exporter) -> None:
    before = fetch_dcgm(_url(exporter))
    exporter.body = exporter_text((8_412_345_678 + 70_000_000, 7_901_234_567 + 31_000_000)).encode()
    after = fetch_dcgm(_url(exporter))
    summary = summarize_gpus([*before, *after], output_tokens=10_000)
    assert [round(g.energy_j or 0, 3) for g in summary.gpus] == [70_000.0, 31_000.0]  # mJ -> J, per GPU
    assert summary.joules_per_output_token == pytest.approx(10.1)
    assert summary.findings()[:2] == ["GPU 0 (NVIDIA H100 80GB HBM3) power-capped: 700 W limit reached 100 % of "
                                      "the step",
                                      "GPU 1 (NVIDIA H100 80GB HBM3) thermal throttling 100 % of the step "
                                      "(max 84 °C)"]


def test_failures_are_endpoint_errors(exporter: _Exporter) -> None:
    with pytest.raises(EndpointError, match="HTTP 404"):
        fetch_dcgm(_url(exporter, "/nothing"))
    exporter.status = 503
    with pytest.raises(EndpointError, match="HTTP 503"):
        fetch_dcgm(_url(exporter))
    port = exporter.server_address[1]
    exporter.shutdown()
    exporter.server_close()
    with pytest.raises(EndpointError, match="no answer"):
        fetch_dcgm(f"http://127.0.0.1:{port}/metrics", timeout_s=2)


def test_variants_in_text() -> None:
    """Field variants: the newer reasons name, FB_TOTAL, enforced limit, NVML's KB/s PCIe, MIG, pods."""
    text = "\n".join([
        'DCGM_FI_DEV_CLOCKS_EVENT_REASONS{gpu="0",modelName="NVIDIA A100-SXM4-80GB"} 8',
        'DCGM_FI_DEV_FB_USED{gpu="0",modelName="NVIDIA A100-SXM4-80GB"} 1000',
        'DCGM_FI_DEV_FB_FREE{gpu="0",modelName="NVIDIA A100-SXM4-80GB"} 500',
        'DCGM_FI_DEV_FB_TOTAL{gpu="0",modelName="NVIDIA A100-SXM4-80GB"} 81920',
        'DCGM_FI_DEV_POWER_MGMT_LIMIT{gpu="0",modelName="NVIDIA A100-SXM4-80GB"} 400',
        'DCGM_FI_DEV_ENFORCED_POWER_LIMIT{gpu="0",modelName="NVIDIA A100-SXM4-80GB"} 350',
        'DCGM_FI_DEV_PCIE_RX_THROUGHPUT{gpu="0",modelName="NVIDIA A100-SXM4-80GB"} 2000',
        'DCGM_FI_DEV_GPU_UTIL{gpu="0",GPU_I_ID="1",GPU_I_PROFILE="1g.10gb",modelName="NVIDIA A100-SXM4-80GB"} 10',
        'DCGM_FI_DEV_GPU_UTIL{gpu="0",modelName="NVIDIA A100-SXM4-80GB",pod="vllm-0"} 55',
        'DCGM_FI_DEV_GPU_UTIL{gpu="0",modelName="NVIDIA A100-SXM4-80GB",pod="vllm-1"} 56',
        'go_goroutines 42',
        'DCGM_FI_DEV_GPU_TEMP{UUID="GPU-x"} 40',  # no gpu label: not a GPU sample
        "",
    ])
    (sample,) = parse_dcgm(text, at_ns=123)
    assert sample.at_ns == 123 and sample.name == "NVIDIA A100-SXM4-80GB"
    assert sample.throttle == ("hw slowdown",)
    assert sample.memory_total_bytes == 81920 * 2**20 and sample.power_limit_w == 350
    assert sample.pcie_rx_bytes_s == 2000 * 1024 and sample.pcie_tx_bytes_s is None
    assert sample.utilization == pytest.approx(0.55)  # the whole GPU's first series, not the MIG slice's
    assert sample.energy_j is None and sample.power_w is None and sample.temperature_c is None
    assert parse_dcgm("") == []
    with pytest.raises(ValueError):
        parse_dcgm("this is { not exposition text\n")


def test_gpu_metrics_url_gives_a_dcgm_reader(exporter: _Exporter) -> None:
    reader, note = gpu_reader(_url(exporter), local=False)
    assert reader is not None and note is None
    assert [s.source for s in reader()] == ["dcgm", "dcgm"]
    exporter.body = b"# no GPUs here\ngo_goroutines 42\n"
    assert gpu_reader(_url(exporter), local=False) == (
        None, f"GPU metrics: no DCGM GPU series at {_url(exporter)}; give --gpu-metrics URL of a DCGM exporter, or off")
    reader, note = gpu_reader(_url(exporter, "/nothing"), local=True)
    assert reader is None and note is not None and "HTTP 404" in note
