"""Tensor- and expert-parallel communication per step (`tokometer.perf.collective`): bytes, collectives, time."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest

from tokometer.perf import Deployment, resolve_hardware, resolve_model
from tokometer.perf.collective import (
    COLLECTIVE_LATENCY_S,
    CUSTOM_ALL_REDUCE_US,
    NCCL_ALL_REDUCE_US,
    PCIE_BUS_SHARE,
    PCIE_LINK_GBS,
    Communication,
    all_reduce_s,
    communication,
    communication_s,
    scale_up,
)
from tokometer.perf.roofline import decode_step_s, prefill_s


def llama70b(hardware: str = "H100-SXM", tp: int = 2) -> Deployment:
    return Deployment(resolve_model("llama-3.3-70b"), resolve_hardware(hardware), "fp8", "fp8", tp=tp)


def test_two_all_reduces_a_layer_of_the_steps_activations_over_one_direction_of_the_link() -> None:
    c = communication(llama70b(), 64)
    # 80 layers × 2 all-reduces of 64 × 8192 × 2 B = 1 MiB; a ring over 2 GPUs sends 2 (2 − 1) / 2 = 1 × that each
    assert (c.kind, c.collectives, c.counted, c.message_bytes, c.gpus) == ("all-reduce", 160, True, 2**20, 2)
    assert c.bytes_per_gpu == pytest.approx(160 * 2**20)
    # H100 NVLink at 1 MiB: NCCL's measured 26.76 µs over 4 GPUs, its ring's bytes 1 / 1.5 of theirs over 2:
    # 17.84 µs, faster than the custom all-reduce's 26.6 µs there
    assert c.each_s == pytest.approx(26.76e-6 / 1.5) and c.seconds == pytest.approx(160 * 26.76e-6 / 1.5)
    eight = communication(llama70b(tp=8), 64)
    assert eight.bytes_per_gpu == pytest.approx(160 * 2 * 7 / 8 * 2**20)
    assert eight.each_s == pytest.approx(26.76e-6 * 1.75 / 1.5)  # NCCL's 31.2 µs, against the custom 45.0 µs
    # one token's 16 KiB: the custom all-reduce (9-12 µs measured to 32 KiB), not NCCL's 23 µs floor
    assert 8.5e-6 < communication(llama70b(tp=8), 1).each_s < 11.8e-6
    # 1,024 tokens' 16 MiB over 8 GPUs: NCCL's 101.86 µs over 4, × 1.75 / 1.5
    assert communication(llama70b(tp=8), 1024).each_s == pytest.approx(101.86e-6 * 1.75 / 1.5)


def test_the_measured_curves_are_what_a_collective_takes() -> None:
    """Each measured size is reproduced (NCCL over 4 GPUs, the custom kernel over 2, 4 and 8 where faster);
    between them the time grows with the message, and a faster link moves a message as the H100 moves a smaller
    one: the fixed cost stays, the bandwidth part scales."""
    for size, micros in NCCL_ALL_REDUCE_US:  # the custom kernel's measurements end at 1 MiB
        if size > 2**20:
            assert all_reduce_s(size, 4, 900) == pytest.approx(micros * 1e-6)
        else:
            assert all_reduce_s(size, 4, 900) <= micros * 1e-6 * (1 + 1e-9)
    for gpus in (2, 4, 8):
        for size, micros in CUSTOM_ALL_REDUCE_US[gpus]:
            assert all_reduce_s(size, gpus, 900) <= micros * 1e-6 * (1 + 1e-9)
    sizes = [2**k for k in range(4, 34)]
    times = [all_reduce_s(s, 8, 900) for s in sizes]
    assert all(b >= a * 0.97 for a, b in itertools.pairwise(times))  # (custom → NCCL: a small step)
    assert times[-1] > 10 * times[len(times) // 2]
    # a link twice as fast (NVLink 5: 1,800 GB/s) moves 2 MiB in the H100's time for 1 MiB; tiny ones cost alike
    assert all_reduce_s(2**21, 8, 1800) == pytest.approx(all_reduce_s(2**20, 8, 900))
    assert all_reduce_s(512, 8, 1800) == pytest.approx(all_reduce_s(512, 8, 900))
    # at 8 GiB NCCL's bus bandwidth is the 366 GB/s of the H100's 450 one way; beyond, in proportion
    assert 2 * 3 / 4 * 2**33 / all_reduce_s(2**33, 4, 900) == pytest.approx(366.2e9, rel=1e-3)
    assert all_reduce_s(2**34, 4, 900) == pytest.approx(2 * all_reduce_s(2**33, 4, 900))
    assert all_reduce_s(0, 8, 900) == 0 == all_reduce_s(2**20, 1, 900) == all_reduce_s(2**20, 8, 0)


def test_the_communication_is_added_to_decode_and_prefill_steps() -> None:
    d = llama70b()
    alone = Deployment(d.model, d.hardware, "fp8", "fp8", tp=1)
    assert decode_step_s(d, 1, 0) > decode_step_s(alone, 1, 0) / 2
    assert decode_step_s(d, 1, 0) == pytest.approx(decode_step_s(alone, 1, 0) / 2 + communication_s(d, 1))
    # a 5,000-token prefill moves 5,000 tokens' activations, 78 MiB an all-reduce: 160 × ~250 µs ≈ 40 ms
    assert communication_s(d, 5000) == pytest.approx(160 * all_reduce_s(5000 * 16384, 2, 900))
    assert 0.035 < communication_s(d, 5000) < 0.045
    assert prefill_s(d, 5000) == pytest.approx(prefill_s(alone, 5000) / 2 + communication_s(d, 5000))


def test_one_gpu_sends_nothing_and_hardware_without_a_link_figure_is_not_counted() -> None:
    assert communication(llama70b(tp=1), 64).seconds == 0 and communication(llama70b(tp=1), 64).counted
    m = resolve_model("llama-3.1-8b")
    no_link = Deployment(m, resolve_hardware("Apple-M3-Ultra"), "bf16", "bf16", tp=2)
    c = communication(no_link, 64)
    assert (c.counted, c.seconds, c.collectives) == (False, 0.0, 64)
    assert c.to_json()["counted"] is False


def test_whole_experts_under_tensor_parallel_attention_send_what_split_experts_send() -> None:
    # after the attention's all-reduce every GPU holds every token: each runs its own experts on the tokens
    # routed to them and the MLP's all-reduce sums the outputs (vLLM's all-to-all kernels need dp_size > 1,
    # TensorRT-LLM gathers tokens only with attention DP); nothing is dispatched, whatever k
    m = resolve_model("qwen3-235b-a22b")
    h = resolve_hardware("H200")
    ep = Deployment(m, h, "fp8", "fp8", tp=8, expert_parallel=True)
    split = Deployment(m, h, "fp8", "fp8", tp=8)
    c = communication(ep, 256)
    assert (c.kind, c.collectives) == ("all-reduce", 2 * m.layers)
    assert c.bytes_per_gpu == pytest.approx(2 * m.layers * 2 * 7 / 8 * 256 * m.hidden * 2)
    assert c == communication(split, 256)
    # data-parallel attention is what moves tokens to their experts: a gather before, a scatter after
    dp = Deployment(m, h, "fp8", "fp8", tp=8, expert_parallel=True, attention_dp=True)
    gathered = communication(dp, 256)
    assert (gathered.kind, gathered.collectives) == ("all-gather + reduce-scatter", 2 * m.layers)
    assert gathered.bytes_per_gpu == pytest.approx(c.bytes_per_gpu / 2)


def test_pcie_collectives_give_nccls_times_measured_over_eight_rtx_pro_6000s() -> None:
    # NCCL's all-reduce over 8 RTX PRO 6000s on PCIe 5.0, tuned: 26.2 µs at 32 KiB, 25.6 at 64 KiB, 37.3 at 256 KiB,
    # and a bus bandwidth of 37.6-41.1 GB/s at 32 MiB (three servers): 25 µs + the ring's 2 × 7/8 of the message at
    # 39.4 of PCIe 5.0 x16's 64 GB/s one way gives each within 10 %
    eight = Communication(1, 1, 0.0, 128.0, "all-reduce", 0.0, 8)
    def each(size: int) -> float:
        return replace(eight, bytes_per_gpu=2 * 7 / 8 * size, message_bytes=size).each_s
    for size, micros in ((32 * 1024, 26.2), (64 * 1024, 25.6), (256 * 1024, 37.3)):
        assert each(size) == pytest.approx(micros * 1e-6, rel=0.1)
    mib32 = 32 * 1024 * 1024
    for bus in (37.6, 41.1):
        assert each(mib32) == pytest.approx(2 * 7 / 8 * mib32 / (bus * 1e9), rel=0.1)
    assert round(PCIE_BUS_SHARE * 64, 6) == 39.4


def test_a_scale_up_fabric_follows_the_measured_curves_and_pcie_its_measured_share() -> None:
    # NVLink / Infinity Fabric / ICI (faster than PCIe 5.0 x16) follow the curves; PCIe: 25 µs + ring bytes at 39.4 GB/s
    assert scale_up(900) and scale_up(1800) and scale_up(896)
    assert not scale_up(PCIE_LINK_GBS) and not scale_up(64) and not scale_up(None)
    pcie = Deployment(resolve_model("llama-3.3-70b"), resolve_hardware("RTX-PRO-6000"), "nvfp4", "fp8", tp=2)
    c = communication(pcie, 50)
    assert c.each_s == pytest.approx(COLLECTIVE_LATENCY_S + 50 * 8192 * 2 / (PCIE_BUS_SHARE * 64e9))
    assert c.to_json()["fabric"] == "pcie" and communication(llama70b(), 50).to_json()["fabric"] == "scale-up"
