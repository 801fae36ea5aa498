"""Tensor- and expert-parallel communication of one step: what each GPU sends over the scale-up link, and its time.

A step over T tokens (decode tokens and prompt tokens together) on TP GPUs moves activations between them
in the activation format, `ACTIVATION_BYTES` (bf16/fp16: the engines reduce in the activation dtype
whatever the weights' format):

    tensor parallel    each of the L layers ends its attention and its MLP with an all-reduce of the
                       step's T × hidden activations: 2 × L all-reduces of S = T × hidden × 2 B.
                       A ring all-reduce sends 2 (TP − 1) / TP × S from each GPU, over one direction
                       of its link (half of ``link_gbs``, which sums both directions); its time: below.
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

One collective's time depends on its message size S (T × hidden × 2 B, a step's tokens), not only its bytes: a
small message pays a fixed cost, and the bandwidth a collective reaches grows with its size. Over a scale-up fabric
(a link faster than PCIe 5.0 x16's `PCIE_LINK_GBS`: NVLink, Infinity Fabric, ICI) an all-reduce takes the faster of
two kernels, each as measured on H100 NVLink, as the engines choose between them by size (vLLM's custom all-reduce
up to its buffer, then NCCL; TensorRT-LLM's AUTO strategy likewise):

    custom all-reduce  up to 1 MiB: vLLM's kernel at 2, 4 and 8 GPUs (`CUSTOM_ALL_REDUCE_US`, `CUSTOM_SOURCE`):
                       9-12 µs to 32 KiB, 24-45 µs at 256 KiB-1 MiB
    NCCL               any size: nccl-tests' all_reduce_perf over 4 H100s (`NCCL_ALL_REDUCE_US`, `NCCL_SOURCE`),
                       23 µs to 512 KiB, 43 µs at 4 MiB, 102 µs at 16 MiB, then towards a bus bandwidth of 366 GB/s
                       at 8 GiB; over TP GPUs its time scales by the ring's bytes, 2 (TP − 1) / TP against 4 GPUs'

both interpolated between measured sizes (log-log). A faster or slower link moves a message of S as the H100 moves
one of S × 450 GB/s / (the link's one-way figure): the bandwidth part scales with the link, the fixed cost does
not. The all-gather and the reduce-scatter of attention data parallelism each move half an all-reduce's bytes, so
each is taken as an all-reduce of S / 2. A PCIe link (the RTX PRO 6000 rows of the fit split, the L40S) takes
NCCL's all-reduce as measured over eight RTX PRO 6000s on PCIe 5.0 (`COLLECTIVE_LATENCY_SOURCE`): a fixed
`COLLECTIVE_LATENCY_S` each plus the ring's bytes at `PCIE_BUS_SHARE` of the link's one-way figure (the bus
bandwidth those servers reach at 32 MiB, 37.6-41.1 GB/s of PCIe 5.0 x16's 64), which gives the measured times
within 10 % from 32 KiB to 32 MiB; another PCIe link (the L40S's PCIe 4.0) at the same share of its own figure,
and 2-4 GPUs at the same share (no measurement of them here). The collectives are taken
as run between the layer's kernels, not overlapped with them (as vLLM and TensorRT-LLM run tensor parallelism by
default), so their time is added to the step's roofline. Not counted: pipeline-parallel stages' hand-off (one
T × hidden send per stage boundary), and communication on hardware without a link figure (``link_gbs`` empty):
`Communication.counted` is then False and the estimate says so. Every layer of a mixture of experts is taken as
an expert layer (DeepSeek's first dense layers are few).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any, Protocol

from tokometer.perf.hardwarespec import HardwareSpec
from tokometer.perf.model import ModelSpec

__all__ = ["ACTIVATION_BYTES", "COLLECTIVE_LATENCY_S", "COLLECTIVE_LATENCY_SOURCE", "CUSTOM_ALL_REDUCE_US",
           "CUSTOM_SOURCE", "NCCL_ALL_REDUCE_US", "NCCL_SOURCE", "PCIE_BUS_SHARE", "PCIE_LINK_GBS", "Communication",
           "Parallel", "all_reduce_s", "communication", "communication_s", "fabric", "scale_up"]

ACTIVATION_BYTES = 2
"""Bytes of one activation element on the wire (bf16 / fp16)."""
COLLECTIVE_LATENCY_S = 25e-6
"""Fixed time of one collective over PCIe, whatever its size: NCCL's all-reduce of 32 KiB over eight RTX PRO 6000s,
26.2 µs, less its bytes (`COLLECTIVE_LATENCY_SOURCE`)."""
PCIE_BUS_SHARE = 39.4 / 64
"""The share of a PCIe link's one-way figure a collective's ring bytes move at: NCCL's all-reduce bus bandwidth at
32 MiB over eight RTX PRO 6000s, 39.4 GB/s (the middle of three tuned servers' 37.6, 39.4 and 41.1) of PCIe 5.0
x16's 64 GB/s (`COLLECTIVE_LATENCY_SOURCE`)."""
COLLECTIVE_LATENCY_SOURCE = ("NCCL all-reduce over 8 RTX PRO 6000 Blackwell on PCIe 5.0, tuned (8 channels): 26.2 µs "
                             "at 32 KiB, 25.6 at 64 KiB, 37.3 at 256 KiB, bus bandwidth 37.6-41.1 GB/s at 32 MiB on "
                             "three servers (voipmonitor/rtx6kpro, optimization/nccl-tuning.md, 2026-05-04; the "
                             "default 2 channels: 48 µs and 22.2 GB/s)")
PCIE_LINK_GBS = 128.0
"""PCIe 5.0 x16, both directions: a link at most this fast is PCIe, one faster a scale-up fabric."""

H100_ONE_WAY_GBS = 450.0
"""The one-way figure of the H100's NVLink in the hardware table (``link_gbs`` 900 / 2): the curves' link."""
NCCL_GPUS = 4
"""GPUs of the NCCL measurement (`NCCL_ALL_REDUCE_US`)."""
NCCL_ALL_REDUCE_US: tuple[tuple[int, float], ...] = (
    (8, 23.30), (16, 23.44), (32, 23.23), (64, 23.34), (128, 23.17), (256, 23.30), (512, 23.27), (1024, 23.28),
    (2048, 23.23), (4096, 23.17), (8192, 23.75), (16384, 24.34), (32768, 25.05), (65536, 25.49), (131072, 26.32),
    (262144, 27.19), (524288, 27.88), (1048576, 26.76), (2097152, 30.32), (4194304, 43.43), (8388608, 63.07),
    (16777216, 101.86), (33554432, 175.81), (67108864, 329.39), (134217728, 617.74), (268435456, 1186.22),
    (536870912, 2315.40), (1073741824, 4532.51), (2147483648, 8926.72), (4294967296, 17744.6),
    (8589934592, 35187.6))
"""One NCCL all-reduce over `NCCL_GPUS` H100s: (message bytes, µs), bf16 sum, out of place (`NCCL_SOURCE`)."""
NCCL_SOURCE = ("nccl-tests all_reduce_perf on 4 H100 80GB SXM5 of an NVSwitch host, NCCL 2.18.3, 8 B to 8 GB, "
               "a quiet run (waynehacking8/nccl-collectives-bench, results/quiet/all_reduce.txt; \"Where "
               "tensor-parallel inference hits the NVLink wall\", waynehacking8.github.io, 2026-05-31): 23 µs to "
               "512 KiB, bus bandwidth 145 GB/s at 4 MiB, 247 at 16 MiB, 366 at 8 GiB")
CUSTOM_ALL_REDUCE_US: dict[int, tuple[tuple[int, float], ...]] = {
    2: ((512, 9.5), (4096, 8.8), (32768, 8.7), (262144, 12.9), (524288, 17.7), (1048576, 26.6)),
    4: ((512, 9.1), (4096, 8.5), (32768, 9.2), (262144, 20.6), (524288, 26.9), (1048576, 40.2)),
    8: ((512, 10.1), (4096, 9.3), (32768, 11.8), (262144, 24.1), (524288, 30.4), (1048576, 45.0)),
}
"""vLLM's custom all-reduce on H100 NVLink by GPUs: (message bytes, µs), up to its largest measured message."""
CUSTOM_SOURCE = ("vLLM's custom all-reduce on H100, TP 2/4/8, 512 B to 1 MiB (the table in sgl-project/sglang pull "
                 "request 2904, 2025-01-15)")


def _interpolate(points: tuple[tuple[int, float], ...], size: float) -> float:
    """µs at ``size`` bytes, log-log between measured sizes; flat below the first, in proportion above the last."""
    if size <= points[0][0]:
        return points[0][1]
    for (x0, y0), (x1, y1) in itertools.pairwise(points):
        if size <= x1:
            f = (math.log(size) - math.log(x0)) / (math.log(x1) - math.log(x0))
            return math.exp(math.log(y0) * (1 - f) + math.log(y1) * f)
    last, micros = points[-1]
    return micros * size / last


def scale_up(link_gbs: float | None) -> bool:
    """True for a scale-up fabric (a link faster than `PCIE_LINK_GBS`), whose collectives follow the measured
    curves (`all_reduce_s`); False for PCIe (or no link figure)."""
    return link_gbs is not None and link_gbs > PCIE_LINK_GBS


def fabric(link_gbs: float | None) -> str | None:
    """``scale-up`` (`scale_up`), ``pcie`` (a slower link figure) or None (no link figure)."""
    return "scale-up" if scale_up(link_gbs) else "pcie" if link_gbs else None


def all_reduce_s(message_bytes: float, gpus: int, link_gbs: float) -> float:
    """Seconds of one all-reduce of ``message_bytes`` over ``gpus`` GPUs on a scale-up link of ``link_gbs`` (both
    directions): the faster of vLLM's custom all-reduce (to 1 MiB) and NCCL, each as measured on H100 NVLink, at
    the message the H100 would move in the same time (module docstring); 0 with one GPU, no message or no link."""
    if gpus <= 1 or message_bytes <= 0 or link_gbs <= 0:
        return 0.0
    size = message_bytes * H100_ONE_WAY_GBS / (link_gbs / 2)
    ring = 2 * (gpus - 1) / gpus
    micros = _interpolate(NCCL_ALL_REDUCE_US, size) * ring / (2 * (NCCL_GPUS - 1) / NCCL_GPUS)
    custom = CUSTOM_ALL_REDUCE_US[2 if gpus <= 2 else 4 if gpus <= 4 else 8]
    if size <= custom[-1][0]:
        micros = min(micros, _interpolate(custom, size))
    return micros * 1e-6


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
    link_gbs: float | None
    """The hardware's link figure, both directions (``link_gbs``); None: no figure (nothing is counted)."""
    kind: str
    """``none`` (one GPU), ``all-reduce`` (tensor parallel, with or without expert parallelism) or ``all-gather +
    reduce-scatter`` (attention data parallel)."""
    message_bytes: float = 0.0
    """One collective's message: the step's tokens × hidden × 2 B (an all-reduce's; half that for a gather's)."""
    gpus: int = 1

    @property
    def counted(self) -> bool:
        """False when GPUs must talk but the hardware has no link figure: the time is then left out (0)."""
        return self.collectives == 0 or self.link_gbs is not None

    @property
    def each_s(self) -> float:
        """Seconds of one collective: the measured curves on a scale-up fabric (`all_reduce_s`), else
        `COLLECTIVE_LATENCY_S` plus its ring bytes at `PCIE_BUS_SHARE` of the link's one-way figure, as NCCL
        measured over PCIe (module docstring)."""
        if not self.collectives or not self.link_gbs:
            return 0.0
        if scale_up(self.link_gbs):
            return all_reduce_s(self.message_bytes, self.gpus, self.link_gbs)
        return COLLECTIVE_LATENCY_S + self.bytes_per_gpu / self.collectives / (PCIE_BUS_SHARE * self.link_gbs * 1e9 / 2)

    @property
    def seconds(self) -> float:
        return self.collectives * self.each_s

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "counted": self.counted, "tokens": self.tokens, "collectives": self.collectives,
                "message_bytes": self.message_bytes, "bytes_per_gpu": self.bytes_per_gpu, "link_gbs": self.link_gbs,
                "fabric": fabric(self.link_gbs),
                "us_each": self.each_s * 1e6, "ms": self.seconds * 1e3}


def communication(d: Parallel, tokens: float) -> Communication:
    """The collectives of one step of ``d`` over ``tokens`` tokens (module docstring)."""
    link = d.hardware.link_gbs or None
    if d.tp <= 1 or tokens <= 0:
        return Communication(tokens, 0, 0.0, link, "none")
    m, tp = d.model, d.tp
    activations = tokens * m.hidden * ACTIVATION_BYTES
    ring = 2 * (tp - 1) / tp * activations
    if d.attention_dp:  # no attention all-reduce; each experts' layer gathers every token and scatters the sums
        return Communication(tokens, 2 * m.layers, m.layers * ring, link, "all-gather + reduce-scatter",
                             activations / 2, tp)
    # tensor-parallel attention: every GPU holds every token, so whole experts (--ep) need no dispatch either
    return Communication(tokens, 2 * m.layers, 2 * m.layers * ring, link, "all-reduce", activations, tp)


def communication_s(d: Parallel, tokens: float) -> float:
    """Seconds of `communication` (0 with one GPU, or without a link figure)."""
    return communication(d, tokens).seconds
