"""A CPU's theoretical peak per data type, from its instruction-set flags: FLOPs (int8: ops) per cycle per core.

The figure is what the widest matrix path the flags announce can retire per cycle on one core; × cores ×
clock it is the host's theoretical peak (`tokometer.perf.host`). Per data type, the first path that applies:

    fp32   AVX-512 (avx512f)   2 FMA units × 16 lanes × 2 = 64; AMD Zen 4 (family 0x19) runs a 512-bit
                               op as two 256-bit halves on its two 256-bit FMA pipes: 2 × 8 × 2 = 32
                               (Zen 5, family 0x1A, has full 512-bit datapaths: 64)
           AVX2 + FMA          2 FMA units × 8 lanes × 2 = 32 (Zen 1, family 0x17 below model 0x30,
                               has 128-bit pipes: 16)
           AVX                 one 8-wide multiply + one 8-wide add = 16
           SSE2                4 + 4 = 8
    bf16   AMX (amx_bf16)      TDPBF16PS: a 16×32 by 32×16 tile product, 16 × 16 × 32 × 2 FLOPs, every 16
                               cycles = 1,024 (Intel: "1024 BF16 operations per cycle" per core, 4th Gen Xeon)
           AVX-512 BF16        VDPBF16PS: each fp32 lane accumulates a pair of bf16 products: 2 × fp32
           otherwise           widened to fp32 (a shift) and multiplied there: the fp32 figure
    fp16   AMX (amx_fp16)      TDPFP16PS, as bf16: 1,024
           AVX-512 FP16        32 fp16 lanes per 512-bit FMA: 2 × fp32
           otherwise           converted to fp32 (F16C) and multiplied there: the fp32 figure
    int8   AMX (amx_int8)      TDPBUSD: 16 × 16 × 64 × 2 ops every 16 cycles = 2,048
           AVX-512 VNNI        VPDPBUSD: 4 u8×s8 products summed into each 32-bit lane: 4 × fp32
           AVX-VNNI            the same in 256 bits: 4 × the AVX2 fp32 figure
           AVX2 / AVX-512BW    VPMADDUBSW (2 products per 16-bit lane) on the FMA ports, the widening adds
                               assumed on other ports: at most 2 × fp32

Assumptions, stated with every figure: an Intel core with AVX-512 has two 512-bit FMA units (every Xeon
since Ice Lake; some Skylake-SP Silver/Gold 5xxx parts have one, half this); the dot-product instructions
issue on the FMA ports at the FMA rate; a VM may hide flags (no avx512f shown: the AVX2 figure, though the
silicon may do more). Sources: Intel 64 and IA-32 Architectures Optimization Reference Manual (AMX, AVX-512
FMA units); Intel's 4th Gen Xeon AMX overview (1,024 bf16 / 2,048 int8 ops per cycle per core); A. Yee, "Zen4's
AVX512 teardown" and "Zen5's AVX512 teardown" (numberworld.org: Zen 4 double-pumps 512-bit on 256-bit
units; Zen 5 desktop/server is native 512-bit). Other architectures (ARM, ...) are not modelled: no figure.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

__all__ = ["DTYPES", "CpuFeatures", "CyclePeak", "cycle_peaks", "read_cpu_features"]

DTYPES = ("fp32", "bf16", "fp16", "int8")

_TWO_FMA = ("assumed two 512-bit FMA units per core (every Xeon since Ice Lake; some Skylake-SP Silver/Gold 5xxx "
            "have one: half this)")


@dataclass(frozen=True)
class CpuFeatures:
    """What /proc/cpuinfo says about the CPU: vendor, family, model, instruction-set flags."""

    vendor: str = ""
    family: int | None = None
    model: int | None = None
    flags: frozenset[str] = frozenset()
    model_name: str = ""

    @classmethod
    def of(cls, flags: str, vendor: str = "", family: int | None = None, model: int | None = None,
           model_name: str = "") -> CpuFeatures:
        """From a space-separated flags line (as /proc/cpuinfo prints it)."""
        return cls(vendor, family, model, frozenset(flags.split()), model_name)

    @property
    def is_amd(self) -> bool:
        return self.vendor == "AuthenticAMD"

    @property
    def is_intel(self) -> bool:
        return self.vendor == "GenuineIntel"


@dataclass(frozen=True)
class CyclePeak:
    """One data type's theoretical FLOPs (int8: ops) per cycle per core, the path and what was assumed."""

    dtype: str
    per_cycle: float
    path: str
    assumption: str = ""


def read_cpu_features(path: Path = Path("/proc/cpuinfo")) -> CpuFeatures:
    """The first processor's vendor, family, model and flags (empty where the file is missing: not Linux)."""
    fields: dict[str, str] = {}
    try:
        with path.open(encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if not line.strip():
                    if fields:
                        break  # the first processor is enough
                    continue
                key, _, value = line.partition(":")
                fields.setdefault(key.strip(), value.strip())
    except OSError:
        return CpuFeatures()

    def number(key: str) -> int | None:
        try:
            return int(fields[key])
        except (KeyError, ValueError):
            return None

    return CpuFeatures.of(fields.get("flags", ""), fields.get("vendor_id", ""), number("cpu family"),
                          number("model"), fields.get("model name", ""))


def _fp32(cpu: CpuFeatures) -> CyclePeak | None:
    f = cpu.flags
    if "avx512f" in f:
        if cpu.is_amd and cpu.family == 0x19:
            return CyclePeak("fp32", 32, "AVX-512 FMA, executed as two 256-bit halves (AMD Zen 4)",
                             "two 256-bit FMA pipes × 8 lanes × 2 FLOPs")
        if cpu.is_amd:
            return CyclePeak("fp32", 64, "AVX-512 FMA (AMD Zen 5: full 512-bit datapaths)",
                             "two 512-bit FMA pipes × 16 lanes × 2 FLOPs (mobile Zen 5 runs 512-bit in halves: "
                             "half this)")
        return CyclePeak("fp32", 64, "AVX-512 FMA", f"{_TWO_FMA}; × 16 lanes × 2 FLOPs")
    if "avx2" in f and "fma" in f:
        hidden = (" (the flags show no AVX-512, which a VM may hide: the silicon may do more)"
                  if cpu.is_intel and "xeon" in cpu.model_name.lower() else "")
        if cpu.is_amd and cpu.family == 0x17 and cpu.model is not None and cpu.model < 0x30:
            return CyclePeak("fp32", 16, "AVX2 FMA on 128-bit pipes (AMD Zen 1)",
                             "two 128-bit FMA pipes × 4 lanes × 2 FLOPs")
        return CyclePeak("fp32", 32, "AVX2 FMA", f"two 256-bit FMA units × 8 lanes × 2 FLOPs{hidden}")
    if "avx" in f:
        return CyclePeak("fp32", 16, "AVX (no FMA)", "one 8-wide multiply + one 8-wide add per cycle")
    if "sse2" in f:
        return CyclePeak("fp32", 8, "SSE2", "one 4-wide multiply + one 4-wide add per cycle")
    return None


def cycle_peaks(cpu: CpuFeatures) -> dict[str, CyclePeak]:
    """Per data type (fp32, bf16, fp16, int8), this CPU's theoretical peak per cycle per core (see the module
    docstring); empty for a CPU whose flags say nothing known (another architecture, no /proc/cpuinfo)."""
    fp32 = _fp32(cpu)
    if fp32 is None:
        return {}
    f, rate, width = cpu.flags, fp32.per_cycle, fp32.path
    out = {"fp32": fp32}
    if "amx_bf16" in f:
        out["bf16"] = CyclePeak("bf16", 1024, "AMX TDPBF16PS", "16×16×32 tile product (× 2 FLOPs) every 16 cycles")
    elif "avx512_bf16" in f:
        out["bf16"] = CyclePeak("bf16", 2 * rate, "AVX-512 BF16 VDPBF16PS",
                                f"2 bf16 products per fp32 lane at the FMA rate ({width}: {rate:g})")
    else:
        out["bf16"] = CyclePeak("bf16", rate, f"converted to fp32, then {width}", "no bf16 arithmetic in the flags")
    if "amx_fp16" in f:
        out["fp16"] = CyclePeak("fp16", 1024, "AMX TDPFP16PS", "16×16×32 tile product (× 2 FLOPs) every 16 cycles")
    elif "avx512_fp16" in f:
        out["fp16"] = CyclePeak("fp16", 2 * rate, "AVX-512 FP16 FMA",
                                f"32 fp16 lanes per 512-bit FMA, 2 × the fp32 rate ({rate:g})")
    else:
        how = "F16C" if "f16c" in f else "scalar conversion"
        out["fp16"] = CyclePeak("fp16", rate, f"converted to fp32 ({how}), then {width}",
                                "no fp16 arithmetic in the flags")
    if "amx_int8" in f:
        out["int8"] = CyclePeak("int8", 2048, "AMX TDPBUSD", "16×16×64 tile product (× 2 ops) every 16 cycles")
    elif "avx512_vnni" in f and "avx512f" in f:
        out["int8"] = CyclePeak("int8", 4 * rate, "AVX-512 VNNI VPDPBUSD",
                                f"4 int8 products per 32-bit lane at the FMA rate ({width}: {rate:g})")
    elif "avx_vnni" in f or "avx512_vnni" in f:
        out["int8"] = CyclePeak("int8", 4 * min(rate, 32), "AVX-VNNI VPDPBUSD (256-bit)",
                                "4 int8 products per 32-bit lane, 8 lanes, two units")
    else:
        out["int8"] = CyclePeak("int8", 2 * rate, "VPMADDUBSW (no VNNI)",
                                "2 products per 16-bit lane on the FMA ports, the widening adds on other ports: an "
                                "upper bound")
    return out
