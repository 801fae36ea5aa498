"""`HardwareSpec`: memory, bandwidth and peak compute of one accelerator (or this host), with a source.

`ComputePeak` is one data type's peak and how it is known (measured, theoretical or datasheet). A
leaf: the table's rows (`tokometer.perf.hardware`) and this host's measurement (`tokometer.perf.host`)
both produce a `HardwareSpec`, and the roofline reads one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tokometer.util.units import GIB

if TYPE_CHECKING:  # a leaf: the format is handed in, not looked up
    from tokometer.perf.quant import WeightDtype

__all__ = ["FP4_FORMATS", "ComputePeak", "HardwareSpec"]

FP4_FORMATS = ("nvfp4", "mxfp4")
"""The 4-bit block formats a device's fp4 units may take: NVFP4 (an FP8 E4M3 scale per 16) and MXFP4 (an E8M0
scale per 32). Blackwell's tensor cores take both; an MI355X's take MXFP4 only (its scaled matrix instructions
take E8M0 block scales: the MX formats)."""


@dataclass(frozen=True)
class ComputePeak:
    """One data type's peak FLOP/s (int8: op/s) and how it is known: ``measured``, ``theoretical`` or ``datasheet``."""

    dtype: str
    flops: float
    basis: str
    detail: str = ""

    def figure(self) -> str:
        """``46.5 GFLOP/s``, ``4.096 TFLOP/s`` (int8: OP/s)."""
        unit = "OP/s" if self.dtype == "int8" else "FLOP/s"
        return f"{self.flops / 1e9:,.4g} G{unit}" if self.flops < 1e12 else f"{self.flops / 1e12:,.4g} T{unit}"

    def label(self) -> str:
        """``bf16, theoretical 4.096 TFLOP/s``: what a message names as the peak used."""
        return f"{self.dtype}, {self.basis} {self.figure()}"

    def to_json(self) -> dict[str, object]:
        return {"dtype": self.dtype, "flops": self.flops, "basis": self.basis, "detail": self.detail}


@dataclass(frozen=True)
class HardwareSpec:
    """One device: memory (GiB), bandwidth (GB/s), dense peak compute (TFLOP/s) and where they come from."""

    name: str
    kind: str
    memory_gb: float | None
    bandwidth_gbs: float
    bf16_tflops: float | None = None
    fp8_tflops: float | None = None
    int8_tops: float | None = None
    fp4_tflops: float | None = None
    link_gbs: float | None = None
    """Scale-up link (NVLink, Infinity Fabric, ICI, ...) per device, GB/s in both directions together."""
    gemm_fraction: float | None = None
    """The share of its datasheet peak a large dense GEMM was measured to sustain on this device, where published
    (`tokometer.perf.roofline.Deployment.compute_scale`); None: not published."""
    source: str = ""
    note: str = ""
    compute_label: str = "bf16"  # what the main compute figure is
    peaks: tuple[ComputePeak, ...] = ()
    """Per data type (the host's: measured or theoretical); empty: the datasheet columns above."""
    fp4_formats: tuple[str, ...] = FP4_FORMATS
    """The block formats its fp4 column's units take (`FP4_FORMATS`); another 4-bit format is dequantised and
    multiplied in bf16, as vLLM runs NVFP4 on an MI355X (its emulation backend, the default on ROCm: vLLM pull
    request 35733)."""

    @property
    def fp4_label(self) -> str:
        """``fp4``, or ``fp4 (mxfp4)`` where its fp4 units take only some of `FP4_FORMATS`."""
        return "fp4" if set(FP4_FORMATS) <= set(self.fp4_formats) else f"fp4 ({', '.join(self.fp4_formats)})"

    def multiplies_in(self, fmt: WeightDtype) -> str:
        """The data type weights of format ``fmt`` multiply in here: on a CPU its own (``cpu_compute``); on an
        accelerator its tensor cores' (``compute``: fp8, int8, fp4, else bf16), but bf16 for a 4-bit block format
        its fp4 units do not take (`fp4_formats`). A type without a peak of its own falls back to bf16's too
        (`compute_peak`)."""
        if self.kind == "cpu":
            return fmt.cpu_compute
        return "bf16" if fmt.compute == "fp4" and fmt.name not in self.fp4_formats else fmt.compute

    @property
    def memory_bytes(self) -> float | None:
        return self.memory_gb * GIB if self.memory_gb else None

    @property
    def bandwidth(self) -> float:
        """Bytes per second."""
        return self.bandwidth_gbs * 1e9

    def compute_peak(self, compute: str = "bf16") -> ComputePeak | None:
        """The peak for ``compute`` ("fp32", "bf16", "fp16", "fp8", "int8", "fp4"): the per-dtype figure where there is
        one, else bf16's (a table row without the column, its weights dequantised: fp8 on an A100, fp4 on an H100;
        fp8 on a CPU); None without any compute figure."""
        by_dtype = {p.dtype: p for p in self.peaks}
        if not by_dtype:
            columns = {"bf16": self.bf16_tflops, "fp8": self.fp8_tflops, "int8": self.int8_tops,
                       "fp4": self.fp4_tflops}
            by_dtype = {k: ComputePeak(k, v * 1e12, "datasheet", self.source) for k, v in columns.items() if v}
        return by_dtype.get(compute) or by_dtype.get("bf16") or by_dtype.get("fp32")

    def peak_flops(self, compute: str = "bf16") -> float | None:
        """FLOP/s for ``compute`` (`compute_peak`)."""
        peak = self.compute_peak(compute)
        return peak.flops if peak else None

    def describe(self, source: bool = True) -> str:
        pairs = [(v, label) for v, label in ((self.bf16_tflops, self.compute_label), (self.fp8_tflops, "fp8"),
                                             (self.int8_tops, "int8"), (self.fp4_tflops, self.fp4_label)) if v]
        scale, unit = (1000, "GFLOP/s") if pairs and max(v for v, _ in pairs) < 1 else (1, "TFLOP/s")
        figures = " / ".join(f"{v * scale:,.4g} {label}" for v, label in pairs)
        flops = f", {figures} {unit}" if pairs else ", no compute figure"
        if self.peaks:
            flops = ", " + " / ".join(f"{p.dtype} {p.figure()} ({p.basis})" for p in self.peaks)
        memory = f"{self.memory_gb:,.4g} GiB" if self.memory_gb else "memory size unknown"
        where = f" (source: {self.source or 'not given'})" if source else ""
        return f"{self.name}: {memory}, {self.bandwidth_gbs:,.4g} GB/s{flops}{where}"
