"""Tensor- and expert-parallel communication of one step: what each GPU sends over the scale-up link, and its time.

A step over T tokens (decode tokens and prompt tokens together) on TP GPUs moves activations between them
in the activation format, `ACTIVATION_BYTES` (bf16/fp16: the engines reduce in the activation dtype
whatever the weights' format):

    tensor parallel    each of the L layers ends its attention and its MLP with an all-reduce of the
                       step's T × hidden activations: 2 × L all-reduces of S = T × hidden × 2 B.
                       A ring all-reduce sends 2 (TP − 1) / TP × S from each GPU, over one direction
                       of its link (half of ``link_gbs``, which sums both directions):
                           all-reduce time = latency + 2 (TP − 1) / TP × S / (link / 2)
    expert parallel    (``--ep``) the MLP's all-reduce of each layer is replaced by an all-to-all pair:
                       each GPU sends its T / TP tokens' activations to the GPUs holding their k experts
                       (dispatch) and receives the results back (combine); (TP − 1) / TP of the k copies
                       leave the GPU: each of the two moves T / TP × k × hidden × 2 B × (TP − 1) / TP
                       over one direction of the link, plus its latency. The attention's all-reduce stays.

`COLLECTIVE_LATENCY_S` is the fixed cost of one collective whatever its size. The collectives are taken
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

__all__ = ["ACTIVATION_BYTES", "COLLECTIVE_LATENCY_S", "COLLECTIVE_LATENCY_SOURCE", "Communication",
           "Parallel", "communication", "communication_s"]

ACTIVATION_BYTES = 2
"""Bytes of one activation element on the wire (bf16 / fp16)."""
COLLECTIVE_LATENCY_S = 9e-6
"""Fixed time of one collective between GPUs of one server, whatever its size."""
COLLECTIVE_LATENCY_SOURCE = ("vLLM's custom all-reduce on H100 NVLink, 512 B to 32 KB at TP 2/4/8: 8.7–10.1 µs "
                             "(measurements in sgl-project/sglang pull request 2904)")


class Parallel(Protocol):
    """What the communication depends on: a `roofline.Deployment` (a leaf below it: no import cycle)."""

    @property
    def model(self) -> ModelSpec: ...

    @property
    def hardware(self) -> HardwareSpec: ...

    @property
    def tp(self) -> int: ...

    @property
    def expert_parallel(self) -> bool: ...

    @property
    def attention_dp(self) -> bool: ...


@dataclass(frozen=True)
class Communication:
    """One step's collectives: how many, the bytes one GPU sends over one direction of its link, the time."""

    tokens: float
    collectives: int
    bytes_per_gpu: float
    link_one_way_bytes_s: float | None
    """Half the hardware's ``link_gbs`` (bytes/s); None: no link figure (nothing is counted)."""
    kind: str
    """``none`` (one GPU), ``all-reduce`` (tensor parallel) or ``all-reduce + all-to-all`` (expert parallel)."""

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
    link = link_gbs * 1e9 / 2 if link_gbs else None
    if d.tp <= 1 or tokens <= 0:
        return Communication(tokens, 0, 0.0, link, "none")
    m, tp = d.model, d.tp
    activations = tokens * m.hidden * ACTIVATION_BYTES
    ring = 2 * (tp - 1) / tp * activations
    routed = tokens / tp * m.experts_per_token * m.hidden * ACTIVATION_BYTES * (tp - 1) / tp
    if d.attention_dp:  # no attention all-reduce; each experts' layer gathers every token and scatters the sums
        return Communication(tokens, 2 * m.layers, m.layers * ring, link, "all-gather + reduce-scatter")
    if d.expert_parallel:
        return Communication(tokens, 3 * m.layers, m.layers * (ring + 2 * routed), link, "all-reduce + all-to-all")
    return Communication(tokens, 2 * m.layers, 2 * m.layers * ring, link, "all-reduce")


def communication_s(d: Parallel, tokens: float) -> float:
    """Seconds of `communication` (0 with one GPU, or without a link figure)."""
    return communication(d, tokens).seconds
