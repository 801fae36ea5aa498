"""What each GPU did over a window (a benchmark step), from the `GpuSample` s taken in it. Pure.

Gauges (utilisation, power, clocks, temperature, PCIe rates) are summarised over the samples
inside the window; where ``start_ns``/``end_ns`` are given, samples outside it serve only the
energy counter. Energy is the increase of the counter over the window, interpolated linearly at
the window's ends when samples on both sides are given, with counter resets (a driver reload)
handled as Prometheus's ``increase()`` does: after a drop, the new value is the energy since the
reset. Without a counter, energy is the time integral of power (trapezoids) over the samples.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tokometer.observe.snapshot import GpuSample

__all__ = ["POWER_CAP_FRACTION", "GpuStepSummary", "GpuWindow", "summarize_gpu", "summarize_gpus"]

POWER_CAP_FRACTION = 0.98
"""A sample is "at the power limit" when its power is at least this fraction of the limit."""

_NOTABLE_SHARE = 0.10
"""A condition (power cap, a throttle reason) becomes a finding when it held this share of samples."""
_ALARM_REASONS = ("thermal", "hw slowdown", "power brake")
"""Reasons worth a finding whenever they appear at all: the hardware protected itself."""


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _percent(share: float) -> str:
    return f"{share * 100:.0f} %"


@dataclass(frozen=True, slots=True)
class GpuWindow:
    """One GPU over one window. ``None``: no sample in the window reported it."""

    index: int
    name: str
    source: str
    samples: int
    utilization_mean: float | None = None
    utilization_max: float | None = None
    memory_used_max_bytes: float | None = None
    memory_total_bytes: float | None = None
    power_mean_w: float | None = None
    power_max_w: float | None = None
    power_limit_w: float | None = None
    """The highest limit seen in the window."""
    power_capped_share: float | None = None
    """Share of the samples with power ≥ `POWER_CAP_FRACTION` of that sample's limit."""
    throttle_share: dict[str, float] = field(default_factory=dict)
    """Share of the samples in which each throttle reason was active (reasons never seen absent)."""
    temperature_max_c: float | None = None
    sm_clock_mean_mhz: float | None = None
    memory_clock_mean_mhz: float | None = None
    pcie_rx_mean_bytes_s: float | None = None
    pcie_tx_mean_bytes_s: float | None = None
    pcie_generation: int | None = None
    pcie_width: int | None = None
    energy_j: float | None = None
    energy_from: str | None = None
    """``counter`` (the energy counter's increase) or ``power`` (power integrated over time)."""
    joules_per_output_token: float | None = None
    """This GPU's energy over the step's output tokens (a share where several GPUs serve one model)."""

    @property
    def label(self) -> str:
        return f"GPU {self.index}" + (f" ({self.name})" if self.name else "")

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index, "name": self.name, "source": self.source, "samples": self.samples,
            "utilization_mean": self.utilization_mean, "utilization_max": self.utilization_max,
            "memory_used_max_bytes": self.memory_used_max_bytes, "memory_total_bytes": self.memory_total_bytes,
            "power_mean_w": self.power_mean_w, "power_max_w": self.power_max_w,
            "power_limit_w": self.power_limit_w, "power_capped_share": self.power_capped_share,
            "throttle_share": dict(self.throttle_share), "temperature_max_c": self.temperature_max_c,
            "sm_clock_mean_mhz": self.sm_clock_mean_mhz, "memory_clock_mean_mhz": self.memory_clock_mean_mhz,
            "pcie_rx_mean_bytes_s": self.pcie_rx_mean_bytes_s, "pcie_tx_mean_bytes_s": self.pcie_tx_mean_bytes_s,
            "pcie_generation": self.pcie_generation, "pcie_width": self.pcie_width,
            "energy_j": self.energy_j, "energy_from": self.energy_from,
            "joules_per_output_token": self.joules_per_output_token,
        }

    def findings(self) -> list[str]:
        """One-line sentences on what held this GPU back (empty: nothing notable).

        Memory use is not judged: engines (vLLM, SGLang) reserve most of it for the KV cache by design.
        """
        out: list[str] = []
        capped = self.power_capped_share
        if capped is not None and capped >= _NOTABLE_SHARE and self.power_limit_w is not None:
            out.append(f"{self.label} power-capped: {self.power_limit_w:.0f} W limit reached "
                       f"{_percent(capped)} of the step")
        elif self.throttle_share.get("power cap", 0.0) >= _NOTABLE_SHARE:
            out.append(f"{self.label} clocks held down by the power cap "
                       f"{_percent(self.throttle_share['power cap'])} of the step")
        for reason in _ALARM_REASONS:
            share = self.throttle_share.get(reason, 0.0)
            if share > 0:
                hot = f" (max {self.temperature_max_c:.0f} °C)" if reason == "thermal" and \
                    self.temperature_max_c is not None else ""
                out.append(f"{self.label} {reason} throttling {_percent(share)} of the step{hot}")
        if self.utilization_mean is not None and self.utilization_mean < 0.5:
            out.append(f"{self.label} busy only {_percent(self.utilization_mean)} of the time: the load "
                       "did not keep it busy")
        return out


@dataclass(frozen=True, slots=True)
class GpuStepSummary:
    """Every GPU over one window, with their energy together."""

    gpus: tuple[GpuWindow, ...]
    output_tokens: int | None = None
    energy_j: float | None = None
    """The sum of the GPUs' energy; None where some GPU's is unknown."""
    joules_per_output_token: float | None = None
    """All GPUs' energy per output token of the step."""

    def to_json(self) -> dict[str, Any]:
        return {"gpus": [g.to_json() for g in self.gpus], "output_tokens": self.output_tokens,
                "energy_j": self.energy_j, "joules_per_output_token": self.joules_per_output_token}

    def findings(self) -> list[str]:
        return [line for gpu in self.gpus for line in gpu.findings()]


def _unwrapped(points: Sequence[tuple[int, float]]) -> list[tuple[int, float]]:
    """A counter's readings made monotonic: after a drop (a reset), the new value counts from zero."""
    out: list[tuple[int, float]] = []
    total = 0.0
    previous: float | None = None
    for at, value in points:
        if previous is not None:
            total += value - previous if value >= previous else value
        out.append((at, total))
        previous = value
    return out


def _at(points: Sequence[tuple[int, float]], at: int) -> float:
    """Linear interpolation of ``points`` (ascending time) at ``at``, clamped to their span."""
    if at <= points[0][0]:
        return points[0][1]
    if at >= points[-1][0]:
        return points[-1][1]
    for (t0, v0), (t1, v1) in itertools.pairwise(points):
        if t0 <= at <= t1:
            return v0 if t1 == t0 else v0 + (v1 - v0) * (at - t0) / (t1 - t0)
    return points[-1][1]  # not reached: the points are ascending


def _energy(samples: Sequence[GpuSample], start_ns: int | None, end_ns: int | None) -> tuple[float | None, str | None]:
    counter = [(s.at_ns, s.energy_j) for s in samples if s.energy_j is not None]
    if len(counter) >= 2:
        points = _unwrapped(counter)
        start = points[0][0] if start_ns is None else start_ns
        end = points[-1][0] if end_ns is None else end_ns
        return _at(points, end) - _at(points, start), "counter"
    power = [(s.at_ns, s.power_w) for s in samples if s.power_w is not None]
    if len(power) >= 2:
        lo = power[0][0] if start_ns is None else max(start_ns, power[0][0])
        hi = power[-1][0] if end_ns is None else min(end_ns, power[-1][0])
        times = sorted({lo, hi, *(t for t, _ in power if lo < t < hi)})
        joules = sum((_at(power, b) + _at(power, a)) / 2 * (b - a) / 1e9 for a, b in itertools.pairwise(times))
        return joules, "power"
    return None, None


def _window(samples: Sequence[GpuSample], start_ns: int | None, end_ns: int | None,
            output_tokens: int | None) -> GpuWindow:
    inside = [s for s in samples if (start_ns is None or s.at_ns >= start_ns) and (end_ns is None or s.at_ns <= end_ns)]
    last = samples[-1]

    def values(attribute: str) -> list[float]:
        return [v for s in inside if (v := getattr(s, attribute)) is not None]

    utilization = values("utilization")
    power = values("power_w")
    limits = values("power_limit_w")
    memory = values("memory_used_bytes")
    totals = values("memory_total_bytes")
    temperature = values("temperature_c")
    with_limit = [s for s in inside if s.power_w is not None and s.power_limit_w]
    capped = (sum(1 for s in with_limit if s.power_w is not None and s.power_limit_w is not None
                  and s.power_w >= POWER_CAP_FRACTION * s.power_limit_w) / len(with_limit)) if with_limit else None
    reasons: dict[str, float] = {}
    for s in inside:
        for reason in s.throttle:
            reasons[reason] = reasons.get(reason, 0.0) + 1
    energy, energy_from = _energy(samples, start_ns, end_ns)
    generations = [s.pcie_generation for s in inside if s.pcie_generation is not None]
    widths = [s.pcie_width for s in inside if s.pcie_width is not None]
    return GpuWindow(
        index=last.index, name=last.name, source=last.source, samples=len(inside),
        utilization_mean=_mean(utilization), utilization_max=max(utilization, default=None),
        memory_used_max_bytes=max(memory, default=None), memory_total_bytes=max(totals, default=None),
        power_mean_w=_mean(power), power_max_w=max(power, default=None), power_limit_w=max(limits, default=None),
        power_capped_share=capped,
        throttle_share={reason: count / len(inside) for reason, count in sorted(reasons.items())},
        temperature_max_c=max(temperature, default=None),
        sm_clock_mean_mhz=_mean(values("sm_clock_mhz")), memory_clock_mean_mhz=_mean(values("memory_clock_mhz")),
        pcie_rx_mean_bytes_s=_mean(values("pcie_rx_bytes_s")), pcie_tx_mean_bytes_s=_mean(values("pcie_tx_bytes_s")),
        pcie_generation=generations[-1] if generations else None, pcie_width=widths[-1] if widths else None,
        energy_j=energy, energy_from=energy_from,
        joules_per_output_token=energy / output_tokens if energy is not None and output_tokens else None,
    )


def summarize_gpus(samples: Iterable[GpuSample], output_tokens: int | None = None, start_ns: int | None = None,
                   end_ns: int | None = None) -> GpuStepSummary:
    """Each GPU's `GpuWindow` over ``[start_ns, end_ns]`` (default: the samples' span), by (source, index).

    ``samples`` may include one reading before and one after the window (the sampler's bounded
    window does): they serve the energy counter only. ``output_tokens``: the step's output tokens,
    for joules per output token. A GPU with no sample inside the window is left out.
    """
    by_gpu: dict[tuple[str, int], list[GpuSample]] = {}
    for sample in sorted(samples, key=lambda s: s.at_ns):
        by_gpu.setdefault((sample.source, sample.index), []).append(sample)
    windows = []
    for key in sorted(by_gpu):
        window = _window(by_gpu[key], start_ns, end_ns, output_tokens)
        if window.samples:
            windows.append(window)
    energies = [w.energy_j for w in windows]
    total = sum(e for e in energies if e is not None) if windows and None not in energies else None
    return GpuStepSummary(
        gpus=tuple(windows), output_tokens=output_tokens, energy_j=total,
        joules_per_output_token=total / output_tokens if total is not None and output_tokens else None,
    )


def summarize_gpu(samples: Iterable[GpuSample], output_tokens: int | None = None, start_ns: int | None = None,
                  end_ns: int | None = None) -> GpuWindow | None:
    """One GPU's `GpuWindow` (``samples`` all of one GPU), as `summarize_gpus`; None without a sample in it."""
    windows = summarize_gpus(samples, output_tokens, start_ns, end_ns).gpus
    if len(windows) > 1:
        raise ValueError("summarize_gpu: samples of more than one GPU; use summarize_gpus")
    return windows[0] if windows else None
