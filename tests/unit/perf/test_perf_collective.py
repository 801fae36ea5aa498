"""Tensor- and expert-parallel communication per step (`tokometer.perf.collective`): bytes, collectives, time."""

from __future__ import annotations

import pytest

from tokometer.perf import Deployment, resolve_hardware, resolve_model
from tokometer.perf.collective import (
    COLLECTIVE_LATENCY_S,
    PCIE_LINK_GBS,
    SCALE_UP_LINK_SHARE,
    communication,
    communication_s,
    link_share,
)
from tokometer.perf.roofline import decode_step_s, prefill_s


def llama70b(hardware: str = "H100-SXM", tp: int = 2) -> Deployment:
    return Deployment(resolve_model("llama-3.3-70b"), resolve_hardware(hardware), "fp8", "fp8", tp=tp)


def test_two_all_reduces_a_layer_of_the_steps_activations_over_one_direction_of_the_link() -> None:
    c = communication(llama70b(), 50)
    # 80 layers × 2 all-reduces; a ring over 2 GPUs sends 2 (2 − 1) / 2 = 1 × the 50 × 8192 × 2 B each
    assert (c.kind, c.collectives, c.counted) == ("all-reduce", 160, True)
    assert c.bytes_per_gpu == pytest.approx(160 * 50 * 8192 * 2)
    # H100 NVLink: 900 GB/s both ways, 450 one way, at the ~81 % nccl-tests measure for its all-reduce
    assert c.link_one_way_bytes_s == pytest.approx(450e9 * SCALE_UP_LINK_SHARE) == pytest.approx(366e9)
    assert c.seconds == pytest.approx(160 * COLLECTIVE_LATENCY_S + 160 * 50 * 8192 * 2 / 366e9)
    eight = communication(llama70b(tp=8), 50)
    assert eight.bytes_per_gpu == pytest.approx(160 * 2 * 7 / 8 * 50 * 8192 * 2)


def test_the_communication_is_added_to_decode_and_prefill_steps() -> None:
    d = llama70b()
    alone = Deployment(d.model, d.hardware, "fp8", "fp8", tp=1)
    assert decode_step_s(d, 1, 0) > decode_step_s(alone, 1, 0) / 2
    assert decode_step_s(d, 1, 0) == pytest.approx(decode_step_s(alone, 1, 0) / 2 + communication_s(d, 1))
    # a 5,000-token prefill moves 5,000 tokens' activations: ~29 ms over one direction of NVLink
    assert communication_s(d, 5000) == pytest.approx(160 * COLLECTIVE_LATENCY_S + 160 * 5000 * 16384 / 366e9)
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


def test_a_scale_up_fabric_moves_a_collective_at_its_measured_share_and_pcie_at_its_whole_figure() -> None:
    # NVLink / Infinity Fabric / ICI (faster than PCIe 5.0 x16) at 366 of 450 GB/s; PCIe at its figure
    assert link_share(900) == pytest.approx(366 / 450) and link_share(1800) == link_share(896) == SCALE_UP_LINK_SHARE
    assert link_share(PCIE_LINK_GBS) == link_share(64) == 1.0
    pcie = Deployment(resolve_model("llama-3.3-70b"), resolve_hardware("RTX-PRO-6000"), "nvfp4", "fp8", tp=2)
    assert communication(pcie, 50).link_one_way_bytes_s == pytest.approx(64e9)
