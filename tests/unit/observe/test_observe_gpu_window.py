"""Per-GPU step summaries from hand-made `GpuSample` s: exact means, shares, energy and findings."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tokometer.observe.gpu_window import GpuWindow, summarize_gpu, summarize_gpus
from tokometer.observe.snapshot import GpuSample

S = 1_000_000_000


def sample(t: float, index: int = 0, **values: Any) -> GpuSample:
    base: dict[str, Any] = {"name": "NVIDIA H100 80GB HBM3", "source": "nvml", "power_limit_w": 700.0}
    return GpuSample(at_ns=int(t * S), index=index, **{**base, **values})


def loaded_step() -> list[GpuSample]:
    """Five readings one second apart: power at the 700 W limit in four (≥ 686 W), thermal in one."""
    rows = [  # utilization, power W, temperature, reasons, energy J, memory GiB
        (0.90, 699.0, 70.0, ("power cap",), 1000.0, 70),
        (1.00, 700.0, 72.0, ("power cap",), 1700.0, 75),
        (0.80, 600.0, 74.0, (), 2350.0, 72),
        (1.00, 690.0, 78.0, ("power cap", "thermal"), 3000.0, 78),
        (0.80, 686.0, 76.0, ("power cap",), 3690.0, 71),
    ]
    return [sample(i, utilization=u, power_w=p, temperature_c=c, throttle=r, energy_j=e,
                   memory_used_bytes=m * 2.0**30, memory_total_bytes=80 * 2.0**30, sm_clock_mhz=1700.0 + 10 * i,
                   memory_clock_mhz=2619.0, pcie_rx_bytes_s=1000.0 * i, pcie_tx_bytes_s=10.0,
                   pcie_generation=5, pcie_width=16)
            for i, (u, p, c, r, e, m) in enumerate(rows)]


def test_a_loaded_step() -> None:
    summary = summarize_gpus(loaded_step(), output_tokens=1345)
    (gpu,) = summary.gpus
    assert gpu.samples == 5 and gpu.index == 0 and gpu.source == "nvml"
    assert gpu.utilization_mean == pytest.approx(0.9) and gpu.utilization_max == 1.0
    assert gpu.power_mean_w == pytest.approx(675.0) and gpu.power_max_w == 700.0 and gpu.power_limit_w == 700.0
    assert gpu.power_capped_share == pytest.approx(0.8)
    assert gpu.throttle_share == {"power cap": 0.8, "thermal": 0.2}
    assert gpu.temperature_max_c == 78.0 and gpu.memory_used_max_bytes == 78 * 2.0**30
    assert gpu.sm_clock_mean_mhz == pytest.approx(1720.0) and gpu.memory_clock_mean_mhz == 2619.0
    assert gpu.pcie_rx_mean_bytes_s == pytest.approx(2000.0) and gpu.pcie_tx_mean_bytes_s == 10.0
    assert (gpu.pcie_generation, gpu.pcie_width) == (5, 16)
    assert gpu.energy_j == pytest.approx(2690.0) and gpu.energy_from == "counter"
    assert gpu.joules_per_output_token == pytest.approx(2.0)
    assert summary.energy_j == pytest.approx(2690.0) and summary.joules_per_output_token == pytest.approx(2.0)
    assert gpu.findings() == [
        "GPU 0 (NVIDIA H100 80GB HBM3) power-capped: 700 W limit reached 80 % of the step",
        "GPU 0 (NVIDIA H100 80GB HBM3) thermal throttling 20 % of the step (max 78 °C)",
    ]
    assert summary.findings() == gpu.findings()


def test_counter_reset_counts_the_energy_since_the_reset() -> None:
    samples = [sample(0, energy_j=5000.0), sample(1, energy_j=5600.0), sample(2, energy_j=200.0),
               sample(3, energy_j=900.0)]
    (gpu,) = summarize_gpus(samples).gpus
    assert gpu.energy_j == pytest.approx(600.0 + 200.0 + 700.0)


def test_window_bounds_interpolate_the_counter_and_limit_the_gauges() -> None:
    """The sampler hands over one reading before and one after the step: they serve the counter only."""
    samples = [sample(0, energy_j=0.0, utilization=0.0), sample(2, energy_j=1000.0, utilization=0.5),
               sample(4, energy_j=2000.0, utilization=1.0), sample(6, energy_j=3000.0, utilization=0.0)]
    (gpu,) = summarize_gpus(samples, output_tokens=100, start_ns=1 * S, end_ns=5 * S).gpus
    assert gpu.samples == 2 and gpu.utilization_mean == pytest.approx(0.75)
    assert gpu.energy_j == pytest.approx(2000.0)  # 500 J at 1 s .. 2500 J at 5 s
    assert gpu.joules_per_output_token == pytest.approx(20.0)


def test_energy_from_power_without_a_counter() -> None:
    samples = [sample(0, power_w=100.0), sample(1, power_w=300.0), sample(3, power_w=300.0)]
    (gpu,) = summarize_gpus(samples).gpus
    assert gpu.energy_from == "power" and gpu.energy_j == pytest.approx(200.0 + 600.0)
    (bounded,) = summarize_gpus(samples, start_ns=S // 2, end_ns=2 * S).gpus
    assert bounded.energy_j == pytest.approx((200.0 + 300.0) / 2 * 0.5 + 300.0)


def test_several_gpus_and_missing_fields() -> None:
    samples = [sample(0, index=1, power_w=300.0, energy_j=10.0), sample(0, index=0, energy_j=0.0),
               sample(1, index=0, energy_j=50.0), sample(1, index=1, power_w=310.0, energy_j=40.0),
               sample(0, index=2, source="dcgm")]
    summary = summarize_gpus(samples, output_tokens=40)
    assert [(g.source, g.index) for g in summary.gpus] == [("dcgm", 2), ("nvml", 0), ("nvml", 1)]
    dcgm, first, second = summary.gpus
    assert dcgm.energy_j is None and dcgm.utilization_mean is None and dcgm.power_capped_share is None
    assert first.power_mean_w is None and first.energy_j == 50.0 and second.energy_j == 30.0
    assert summary.energy_j is None and summary.joules_per_output_token is None  # GPU 2's energy is unknown
    both = summarize_gpus([s for s in samples if s.source == "nvml"], output_tokens=40)
    assert both.energy_j == 80.0 and both.joules_per_output_token == 2.0
    assert summarize_gpus([]).gpus == () and summarize_gpus([], output_tokens=5).energy_j is None


def test_findings() -> None:
    quiet = GpuWindow(index=0, name="", source="nvml", samples=3, utilization_mean=0.9,
                      power_capped_share=0.05, power_limit_w=700, throttle_share={"idle": 1.0})
    assert quiet.findings() == []
    throttled = GpuWindow(index=3, name="", source="dcgm", samples=10, utilization_mean=0.3,
                          memory_used_max_bytes=79.0, memory_total_bytes=80.0,
                          throttle_share={"power cap": 0.5, "hw slowdown": 0.1, "power brake": 0.1})
    assert throttled.findings() == [
        "GPU 3 clocks held down by the power cap 50 % of the step",
        "GPU 3 hw slowdown throttling 10 % of the step",
        "GPU 3 power brake throttling 10 % of the step",
        "GPU 3 busy only 30 % of the time: the load did not keep it busy",
    ]


def test_to_json_round_trips() -> None:
    summary = summarize_gpus(loaded_step(), output_tokens=1345)
    data = json.loads(json.dumps(summary.to_json()))
    assert data["joules_per_output_token"] == pytest.approx(2.0) and data["output_tokens"] == 1345
    (gpu,) = data["gpus"]
    assert gpu["power_capped_share"] == pytest.approx(0.8) and gpu["throttle_share"]["thermal"] == 0.2
    assert set(gpu) == set(GpuWindow.__slots__)


def test_one_gpu() -> None:
    window = summarize_gpu(loaded_step(), output_tokens=1345, start_ns=0, end_ns=4 * S)
    assert window is not None and window.energy_j == pytest.approx(2690.0)
    assert summarize_gpu([]) is None
    assert summarize_gpu(loaded_step(), start_ns=10 * S) is None  # no sample inside the window
    with pytest.raises(ValueError, match="more than one GPU"):
        summarize_gpu([sample(0, index=0), sample(0, index=1)])
