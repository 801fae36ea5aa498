"""``estimate --calibrate RUN...``: efficiencies fitted to the user's own measured runs, stored and reused.

The estimate's expected times are the roofline at stated fractions of peak (`Efficiency`: typical values
by default). A measured run says what fractions *this* engine reached on *this* hardware: each step's MBU
(bytes a decode step moves / TPOT / peak bandwidth), decode MFU and prefill MFU (`tokometer.perf.efficiency`).
`fit` takes them as samples:

- a step whose bottleneck is the client, the network or queueing says nothing about the engine: skipped;
- decode: where the roofline (at the typical efficiencies) calls the step's decode bandwidth bound, its MBU
  is a sample of ``decode_bandwidth``; where compute bound, its decode MFU is one of ``decode_compute``;
- prefill: each step's prefill MFU is a sample of ``prefill_compute`` (from the server's own prompt time
  where it reports one, else TTFT);
- each efficiency is the median of its samples; one without samples keeps the typical value and says so;
  a sample above 100 % (`tokometer.perf.efficiency`: the peak is wrong) counts, and a median above 100 % is
  not stored: the typical value is kept and the calibration says that the peak used is too low for these
  runs (fix the peak, then calibrate again);
- a calibrated efficiency has no per-layer step overhead (`Efficiency.layer_overhead_s` 0): the measured
  MBU and MFU were taken over the steps' whole time, their fixed costs included.

The result is stored per hardware name (``<user config dir>/tokometer/calibration.json``; another file:
``TOKOMETER_CALIBRATION``), and every later estimate for that hardware (``estimate``, ``--target``,
``--run``) uses it unless efficiencies are given on the command line or ``--no-calibration``; the output
then says "calibrated from runs …" instead of "typical".
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from tokometer.perf.efficiency import RunEfficiency, StepEfficiency
from tokometer.perf.roofline import Efficiency, decode_limiter
from tokometer.util.atomicfile import write_atomic
from tokometer.util.errors import ConfigError
from tokometer.util.jsontext import dumps
from tokometer.util.readlimit import read_json

__all__ = ["MAX_CALIBRATION_BYTES", "Calibration", "calibration_path", "fit", "load_calibration", "save_calibration"]

MAX_CALIBRATION_BYTES: Final = 4 << 20
"""The calibrations file, read whole: 4 MiB, thousands of hardware entries of a few hundred bytes each."""

_MEASURED_OVERHEAD = 0.0
"""A calibrated efficiency's per-layer step overhead: none, its MBU / MFU already hold the fixed costs."""

_SKIPPED = ("client", "network", "queueing")


@dataclass(frozen=True)
class Calibration:
    """Efficiencies fitted to measured runs of one hardware."""

    hardware: str
    efficiency: Efficiency
    runs: tuple[int, ...]
    samples: dict[str, int]
    """Samples behind each efficiency (0: the typical value was kept)."""
    models: tuple[str, ...] = ()
    created_at: str = ""
    over_peak: dict[str, str] = field(default_factory=dict)
    """Efficiencies whose fitted median exceeded 100 %, kept typical: why, by name."""
    skipped: tuple[str, ...] = ()
    """Steps that said nothing about the engine, each as ``run R step S: <bottleneck>``."""

    def describe(self) -> str:
        e = self.efficiency
        parts = []
        for name, value in (("decode bandwidth", e.decode_bandwidth), ("prefill compute", e.prefill_compute),
                            ("decode compute", e.decode_compute)):
            key = name.replace(" ", "_")
            if key in self.over_peak:
                parts.append(f"{name} {value:.0%} (typical: {self.over_peak[key]})")
            else:
                parts.append(f"{name} {value:.0%}" + ("" if self.samples.get(key) else " (typical: no sample)"))
        runs = ", ".join(str(r) for r in self.runs)
        return f"calibrated from run{'s' if len(self.runs) > 1 else ''} {runs} on {self.hardware}: {'; '.join(parts)}"

    def to_json(self) -> dict[str, Any]:
        e = self.efficiency
        return {"hardware": self.hardware, "runs": list(self.runs), "models": list(self.models),
                "created_at": self.created_at, "samples": dict(self.samples), "over_peak": dict(self.over_peak),
                "skipped": list(self.skipped),
                "efficiency": {"decode_bandwidth": e.decode_bandwidth, "prefill_compute": e.prefill_compute,
                               "decode_compute": e.decode_compute}}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Calibration:
        e = data["efficiency"]
        return cls(hardware=str(data["hardware"]),
                   efficiency=Efficiency(float(e["decode_bandwidth"]), float(e["prefill_compute"]),
                                         float(e["decode_compute"]), _MEASURED_OVERHEAD),
                   runs=tuple(int(r) for r in data.get("runs", ())), samples=dict(data.get("samples", {})),
                   models=tuple(data.get("models", ())), created_at=str(data.get("created_at", "")),
                   over_peak={str(k): str(v) for k, v in (data.get("over_peak") or {}).items()},
                   skipped=tuple(str(s) for s in data.get("skipped", ())))


def fit(results: Sequence[RunEfficiency], typical: Efficiency | None = None) -> Calibration:
    """Efficiencies from the judged steps of ``results`` (all on one hardware); see the module docstring."""
    if not results:
        raise ConfigError("--calibrate needs at least one run")
    base = typical or Efficiency()
    hardware = {r.deployment.hardware.name for r in results}
    if len(hardware) > 1:
        raise ConfigError(f"--calibrate: the runs are on different hardware ({', '.join(sorted(hardware))}); "
                          "calibrate each hardware from its own runs")
    samples: dict[str, list[float]] = {"decode_bandwidth": [], "prefill_compute": [], "decode_compute": []}
    skipped: list[str] = []
    for result in results:
        d = result.deployment
        for step in result.steps:
            if step.bottleneck in _SKIPPED:
                skipped.append(f"run {result.run_id} step {step.step}: {step.bottleneck}")
                continue
            batch = max(1, round(step.decode_batch))
            context = round(batch * step.context_tokens)

            def ratio(name: str, value: float | None, step: StepEfficiency = step) -> float | None:
                over = step.over_peak.get(name)
                return over.ratio if over else value

            if decode_limiter(d, batch, context, base) == "bandwidth":
                if mbu := ratio("mbu", step.mbu):
                    samples["decode_bandwidth"].append(mbu)
            elif decode_mfu := ratio("decode_mfu", step.decode_mfu):
                samples["decode_compute"].append(decode_mfu)
            if prefill_mfu := ratio("prefill_mfu", step.prefill_mfu):
                samples["prefill_compute"].append(prefill_mfu)
    if not any(samples.values()):
        raise ConfigError("--calibrate: no step of these runs measures the engine (every one was limited by the "
                          "client, the network or queueing); calibrate from runs at lower load")

    d = results[0].deployment
    peaks = {"decode_bandwidth": f"bandwidth {d.hardware.bandwidth_gbs:,.4g} GB/s",
             "prefill_compute": d.compute_peak.label() if d.compute_peak else "none",
             "decode_compute": d.compute_peak.label() if d.compute_peak else "none"}
    over: dict[str, str] = {}

    def value(name: str, default: float) -> float:
        if not samples[name]:
            return default
        median = statistics.median(samples[name])
        if median > 1:
            over[name] = (f"the runs reached {median:,.0%} — above 100 %: the {d.hardware.name} peak used "
                          f"({peaks[name]}) is too low for them; give a better peak, then calibrate again")
            return default
        return median

    efficiency = Efficiency(value("decode_bandwidth", base.decode_bandwidth),
                            value("prefill_compute", base.prefill_compute),
                            value("decode_compute", base.decode_compute), _MEASURED_OVERHEAD)
    return Calibration(hardware=hardware.pop(), efficiency=efficiency, runs=tuple(r.run_id for r in results),
                       samples={k: len(v) for k, v in samples.items()},
                       models=tuple(sorted({r.deployment.model.name for r in results})),
                       created_at=datetime.now(UTC).isoformat(timespec="seconds"), over_peak=over,
                       skipped=tuple(skipped))


def calibration_path() -> Path:
    """Where calibrations live: ``TOKOMETER_CALIBRATION``, else ``<user config dir>/tokometer/calibration.json``."""
    override = os.environ.get("TOKOMETER_CALIBRATION")
    if override:
        return Path(override).expanduser()
    import platformdirs

    return Path(platformdirs.user_config_dir("tokometer")) / "calibration.json"


def _read(path: Path) -> dict[str, Any]:
    """The calibrations in ``path`` (none if it is not there), read with `read_json`: at most
    `MAX_CALIBRATION_BYTES`, so ``TOKOMETER_CALIBRATION=/dev/zero`` is one error and a FIFO reads as empty."""
    if not path.exists():
        return {}
    try:
        data = read_json(path, MAX_CALIBRATION_BYTES, "not a calibrations file", f"the calibrations in {path}")
    except ConfigError as exc:
        raise ConfigError(f"{exc}; delete the file to start over") from None
    return data if isinstance(data, dict) else {}


def load_calibration(hardware: str, path: Path | None = None) -> Calibration | None:
    """The stored calibration of ``hardware`` (by name), if any."""
    entry = _read(path or calibration_path()).get(hardware)
    return Calibration.from_json(entry) if isinstance(entry, dict) else None


def save_calibration(calibration: Calibration, path: Path | None = None) -> Path:
    """Store ``calibration`` under its hardware's name (replacing an earlier one); returns the file."""
    target = path or calibration_path()
    data = _read(target)
    data[calibration.hardware] = calibration.to_json()
    write_atomic(target, dumps(data, indent=2) + "\n")
    return target
