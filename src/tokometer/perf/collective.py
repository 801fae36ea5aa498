"""Tensor- and expert-parallel communication of one step: what each GPU sends over the scale-up link, and its time.

A step over T tokens (decode tokens and prompt tokens together) on TP GPUs moves activations between them
in the activation format, `ACTIVATION_BYTES` (bf16/fp16: the engines reduce in the activation dtype
whatever the weights' format):

    tensor parallel    each of the L layers ends its attention and its MLP with an all-reduce of the
                       step's T × hidden activations: 2 × L all-reduces of S = T × hidden × 2 B.
                       A ring all-reduce sends 2 (TP − 1) / TP × S from each GPU, over one direction
                       of its link (half of ``link_gbs``, which sums both directions), at the share
                       of it a collective reaches (`link_share`):
                           all-reduce time = latency + 2 (TP − 1) / TP × S / (link / 2 × share)
    expert parallel    (``--ep``, whole experts on each GPU) with the attention tensor parallel: the same two
                       all-reduces. After the attention's all-reduce every GPU holds every token of the step,
                       so each runs its own experts on the tokens routed to them and the MLP's all-reduce sums
                       the partial outputs, as a split expert's are summed: no token leaves its GPU before the
                       experts. The engines move tokens to their experts' GPUs only with data-parallel
                       attention (``--attention-dp``, below): vLLM's fused MoE uses its all-to-all kernels only
                       when ``dp_size > 1`` (``FusedMoEParallelConfig.use_all2all_kernels``), TensorRT-LLM's
                       gathers the tokens only with ``enable_attention_dp`` (its fused MoE's ``use_dp``).
    attention data     (``--attention-dp``) each GPU runs the attention of its own sequences: no attention
    parallel           all-reduce; each experts' layer gathers the step's tokens from every GPU before the
                       experts and reduce-scatters the sums after (a ring's 2 (TP − 1) / TP × S in all).

`COLLECTIVE_LATENCY_S` is the fixed cost of one collective whatever its size. A scale-up fabric (a link faster
than PCIe 5.0 x16's `PCIE_LINK_GBS`: NVLink, Infinity Fabric, ICI) moves a collective's bytes at
`SCALE_UP_LINK_SHARE` of its one-way figure, as nccl-tests measure NVLink's all-reduce bus bandwidth
(`SCALE_UP_LINK_SOURCE`; only NVLink is measured, the other fabrics are taken alike); a PCIe link at its
whole figure (chosen on the fit split: with its RTX PRO 6000 rows over PCIe, 82 of 89 figures within ±15 %
so, 75 at 80 %). The collectives are taken
as run between the layer's kernels, not overlapped with them (as vLLM and TensorRT-LLM run tensor
parallelism by default), so their time is added to the step's roofline. Not counted: pipeline-parallel
stages' hand-off (one T × hidden send per stage boundary), and communication on hardware without a link
figure (``link_gbs`` empty): `Communication.counted` is then False and the estimate says so. Every layer
of a mixture of experts is taken as an expert layer (DeepSeek's first dense layers are few).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from tokometer.perf.hardwarespec import HardwareSpec
from tokometer.perf.model import ModelSpec

__all__ = ["ACTIVATION_BYTES", "COLLECTIVE_LATENCY_S", "COLLECTIVE_LATENCY_SOURCE", "PCIE_LINK_GBS",
           "SCALE_UP_LINK_SHARE", "SCALE_UP_LINK_SOURCE", "Communication", "Parallel", "communication",
           "communication_s", "link_share"]

ACTIVATION_BYTES = 2
"""Bytes of one activation element on the wire (bf16 / fp16)."""
COLLECTIVE_LATENCY_S = 9e-6
"""Fixed time of one collective between GPUs of one server, whatever its size."""
COLLECTIVE_LATENCY_SOURCE = ("vLLM's custom all-reduce on H100 NVLink, 512 B to 32 KB at TP 2/4/8: 8.7–10.1 µs "
                             "(measurements in sgl-project/sglang pull request 2904)")


PCIE_LINK_GBS = 128.0
"""PCIe 5.0 x16, both directions: a link at most this fast is PCIe, one faster a scale-up fabric."""
SCALE_UP_LINK_SHARE = 366 / 450
"""The share of a scale-up link's one-way figure a collective's bytes move at (`SCALE_UP_LINK_SOURCE`)."""
SCALE_UP_LINK_SOURCE = ("nccl-tests all_reduce_perf on H100 NVLink: bus bandwidth about 366 GB/s at large messages "
                        "of the 450 GB/s one-way budget in the hardware table (waynehacking8.github.io, \"Where "
                        "tensor-parallel inference hits the NVLink wall\", 2026-05-31); a ceiling: the MB-sized "
                        "messages of a step reach it or less")


def link_share(link_gbs: float) -> float:
    """The share of a link's one-way figure a collective moves its bytes at: `SCALE_UP_LINK_SHARE` on a
    scale-up fabric (faster than `PCIE_LINK_GBS`), the whole figure on PCIe (module docstring)."""
    return SCALE_UP_LINK_SHARE if link_gbs > PCIE_LINK_GBS else 1.0


class Parallel(Protocol):
    """What the communication depends on: a `roofline.Deployment` (a leaf below it: no import cycle)."""

    @property
    def model(self) -> ModelSpec: ...

    @property
    def hardware(self) -> HardwareSpec: ...

    @property
    def tp(self) -> int: ...

    @property
    def attention_dp(self) -> bool: ...


@dataclass(frozen=True)
class Communication:
    """One step's collectives: how many, the bytes one GPU sends over one direction of its link, the time."""

    tokens: float
    collectives: int
    bytes_per_gpu: float
    link_one_way_bytes_s: float | None
    """Half the hardware's ``link_gbs`` (bytes/s) at the share a collective reaches (`link_share`); None: no link
    figure (nothing is counted)."""
    kind: str
    """``none`` (one GPU), ``all-reduce`` (tensor parallel, with or without expert parallelism) or ``all-gather +
    reduce-scatter`` (attention data parallel)."""

    @property
    def counted(self) -> bool:
        """False when GPUs must talk but the hardware has no link figure: the time is then left out (0)."""
        return self.collectives == 0 or self.link_one_way_bytes_s is not None

    @property
    def seconds(self) -> float:
        if not self.collectives or self.link_one_way_bytes_s is None:
            return 0.0
        return self.collectives * COLLECTIVE_LATENCY_S + self.bytes_per_gpu / self.link_one_way_bytes_s

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "counted": self.counted, "tokens": self.tokens, "collectives": self.collectives,
                "bytes_per_gpu": self.bytes_per_gpu,
                "link_one_way_gbs": None if self.link_one_way_bytes_s is None else self.link_one_way_bytes_s / 1e9,
                "latency_us_each": COLLECTIVE_LATENCY_S * 1e6, "ms": self.seconds * 1e3}


def communication(d: Parallel, tokens: float) -> Communication:
    """The collectives of one step of ``d`` over ``tokens`` tokens (module docstring)."""
    link_gbs = d.hardware.link_gbs
    link = link_gbs * 1e9 / 2 * link_share(link_gbs) if link_gbs else None
    if d.tp <= 1 or tokens <= 0:
        return Communication(tokens, 0, 0.0, link, "none")
    m, tp = d.model, d.tp
    activations = tokens * m.hidden * ACTIVATION_BYTES
    ring = 2 * (tp - 1) / tp * activations
    if d.attention_dp:  # no attention all-reduce; each experts' layer gathers every token and scatters the sums
        return Communication(tokens, 2 * m.layers, m.layers * ring, link, "all-gather + reduce-scatter")
    # tensor-parallel attention: every GPU holds every token, so whole experts (--ep) need no dispatch either
    return Communication(tokens, 2 * m.layers, 2 * m.layers * ring, link, "all-reduce")


def communication_s(d: Parallel, tokens: float) -> float:
    """Seconds of `communication` (0 with one GPU, or without a link figure)."""
    return communication(d, tokens).seconds
