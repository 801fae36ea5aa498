"""A CPU's theoretical peak per data type from its flags, and the host's peaks (measured or theoretical).

The flag sets are what /proc/cpuinfo prints on each CPU (trimmed to the flags that matter plus a few
others); the expected FLOPs per cycle per core are worked out by hand in each test from vector width,
FMA units and the dot-product / tile instructions (`tokometer.perf.cpupeak`'s docstring).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tokometer.perf.cpupeak import CpuFeatures, cycle_peaks, read_cpu_features
from tokometer.perf.host import host_peaks

_BASE = "fpu sse sse2 ssse3 sse4_1 sse4_2 popcnt avx f16c fma avx2 bmi2"
_AVX512 = "avx512f avx512dq avx512cd avx512bw avx512vl"
SPR = CpuFeatures.of(f"{_BASE} {_AVX512} avx512_vnni avx512_bf16 avx_vnni avx512_fp16 amx_bf16 amx_tile amx_int8",
                     "GenuineIntel", 6, 143, "Intel(R) Xeon(R) Platinum 8480+")
ZEN4 = CpuFeatures.of(f"{_BASE} {_AVX512} avx512_vnni avx512_bf16 avx512ifma", "AuthenticAMD", 25, 17,
                      "AMD EPYC 9654 96-Core Processor")
ZEN5 = CpuFeatures.of(f"{_BASE} {_AVX512} avx512_vnni avx512_bf16 avx_vnni", "AuthenticAMD", 26, 2,
                      "AMD EPYC 9755 128-Core Processor")
HASWELL = CpuFeatures.of(_BASE, "GenuineIntel", 6, 63, "Intel(R) Xeon(R) CPU E5-2680 v3")
VM_HIDING_AVX512 = CpuFeatures.of(f"{_BASE} hypervisor", "GenuineIntel", 6, 143, "Intel(R) Xeon(R) Platinum 8480+")
ALDER_LAKE = CpuFeatures.of(f"{_BASE} avx_vnni", "GenuineIntel", 6, 151, "12th Gen Intel(R) Core(TM) i9-12900K")


def _per_cycle(cpu: CpuFeatures) -> dict[str, float]:
    return {dtype: peak.per_cycle for dtype, peak in cycle_peaks(cpu).items()}


def test_sapphire_rapids_with_amx() -> None:
    # fp32: 2 FMA units × 16 lanes × 2; bf16: AMX 16×16×32 × 2 / 16 cycles; fp16: AVX-512 FP16 32 lanes (no amx_fp16);
    # int8: AMX 16×16×64 × 2 / 16 cycles
    assert _per_cycle(SPR) == {"fp32": 64, "bf16": 1024, "fp16": 128, "int8": 2048}
    peaks = cycle_peaks(SPR)
    assert peaks["bf16"].path == "AMX TDPBF16PS" and "two 512-bit FMA units" in peaks["fp32"].assumption


def test_amd_zen4_runs_512_bit_as_two_halves() -> None:
    # fp32: two 256-bit FMA pipes × 8 × 2 = 32 (not 64); bf16: VDPBF16PS 2 × 32; no avx512_fp16: fp32's;
    # int8: VPDPBUSD 4 × 32
    assert _per_cycle(ZEN4) == {"fp32": 32, "bf16": 64, "fp16": 32, "int8": 128}
    assert "two 256-bit halves" in cycle_peaks(ZEN4)["fp32"].path
    assert _per_cycle(ZEN5)["fp32"] == 64  # Zen 5: native 512-bit


def test_avx2_only() -> None:
    # fp32: 2 × 8 × 2; bf16 and fp16 are converted and multiplied in fp32; int8: VPMADDUBSW, 2 × fp32 at most
    assert _per_cycle(HASWELL) == {"fp32": 32, "bf16": 32, "fp16": 32, "int8": 64}
    assert "F16C" in cycle_peaks(HASWELL)["fp16"].path
    assert _per_cycle(ALDER_LAKE)["int8"] == 128  # AVX-VNNI: 4 × the 256-bit rate


def test_a_vm_hiding_avx512_gets_the_avx2_figure_and_says_so() -> None:
    peaks = cycle_peaks(VM_HIDING_AVX512)
    assert peaks["fp32"].per_cycle == 32 and "a VM may hide" in peaks["fp32"].assumption
    assert peaks["bf16"].per_cycle == 32 and peaks["int8"].per_cycle == 64


def test_other_architectures_get_no_theoretical_figure() -> None:
    assert cycle_peaks(CpuFeatures.of("fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics", "")) == {}
    assert cycle_peaks(CpuFeatures()) == {}


def test_read_cpu_features_takes_the_first_processor(tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\n"
                       "model name\t: AMD EPYC 9654\nflags\t\t: fpu avx2 fma avx512f avx512_bf16\n\n"
                       "processor\t: 1\nvendor_id\t: GenuineIntel\nflags\t\t: sse2\n\n")
    cpu = read_cpu_features(cpuinfo)
    assert (cpu.vendor, cpu.family, cpu.model, cpu.model_name) == ("AuthenticAMD", 25, 17, "AMD EPYC 9654")
    assert {"avx512f", "avx512_bf16"} <= cpu.flags and "sse2" not in cpu.flags
    assert read_cpu_features(tmp_path / "missing") == CpuFeatures()


def _measured(torch: dict[str, object] | None = None) -> dict[str, object]:
    return {"physical_cores": 2, "clock_ghz": 2.0, "matmul_gflops": 250.0, "matmul_n": 1536, "threads": 2,
            "torch": torch or {"error": "no torch here"}}


def test_host_peaks_are_measured_where_measured_else_theoretical() -> None:
    peaks = {p.dtype: p for p in host_peaks(_measured(), SPR)}
    assert [p.basis for p in peaks.values()] == ["measured", "theoretical", "theoretical", "theoretical"]
    assert peaks["fp32"].flops == 250e9 and "theoretical 256 GFLOP/s" in peaks["fp32"].detail  # 2 × 64 × 2 GHz
    assert peaks["bf16"].flops == pytest.approx(2 * 1024 * 2.0e9)  # 4.096 TFLOP/s
    assert "not measured: no torch here" in peaks["bf16"].detail
    assert peaks["int8"].label() == "int8, theoretical 8.192 TOP/s"
    with_torch = {p.dtype: p for p in host_peaks(_measured({"bf16": 430.0, "fp16": 89.0, "torch": "2.13"}), SPR)}
    assert with_torch["bf16"].basis == "measured" and with_torch["bf16"].flops == 430e9
    assert with_torch["bf16"].label() == "bf16, measured 430 GFLOP/s"
    # Zen 4 at 2 GHz: the fp32 matmul (250) beats 2 × 32 × 2 = 128: the clock is the one that is off
    zen = {p.dtype: p for p in host_peaks(_measured(), ZEN4)}
    assert "above it: the clock reported is below the one it ran at" in zen["fp32"].detail


def test_without_a_clock_only_what_was_measured() -> None:
    peaks = host_peaks({**_measured(), "clock_ghz": None}, SPR)
    assert [(p.dtype, p.basis) for p in peaks] == [("fp32", "measured")]
