"""`HardwareSpec`: memory, bandwidth and peak compute of one accelerator (or this host), with a source.

The table ships as ``data/hardware.csv`` (the project's reference table: dense, not sparse,
figures; every row names its source). Users add or override rows in a TOML file, by default
``<user config dir>/tokometer/hardware.toml`` (``--hardware-file`` elsewhere), same columns::

    [[hardware]]
    name = "my-L40"
    kind = "gpu"
    memory_gb = 48
    bandwidth_gbs = 864
    bf16_tflops_dense = 181
    source = "our vendor's sheet"

Units: ``memory_gb`` per device in GiB (2^30 B: an "80 GB" H100 has 80 GiB, as nvidia-smi shows);
``bandwidth_gbs`` in GB/s (10^9 B/s, as datasheets give it); compute in 10^12 FLOP/s (int8: ops/s).
``resolve_hardware("host")`` measures this machine instead (see `tokometer.perf.host`): its peaks come per
data type (fp32, bf16, fp16, int8), each a `ComputePeak` saying whether it was measured or is theoretical.
A table row's figures are its datasheet's; a data type it lacks falls back to its bf16 figure.
"""

from __future__ import annotations

import csv
import difflib
import io
import re
import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from tokometer.errors import ConfigError

__all__ = ["HARDWARE_ALIASES", "ComputePeak", "HardwareSpec", "hardware_table", "resolve_hardware",
           "user_hardware_file"]

GIB = 2**30

HARDWARE_ALIASES = {"h100": "H100-SXM", "h200": "H200-SXM", "a100": "A100-80GB-SXM", "a100-80gb": "A100-80GB-SXM",
                    "a100-40gb": "A100-40GB-SXM", "4090": "RTX-4090", "3090": "RTX-3090", "mi300": "MI300X"}


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
    source: str = ""
    note: str = ""
    compute_label: str = "bf16"  # what the main compute figure is
    peaks: tuple[ComputePeak, ...] = ()
    """Per data type (the host's: measured or theoretical); empty: the datasheet columns above."""

    @property
    def memory_bytes(self) -> float | None:
        return self.memory_gb * GIB if self.memory_gb else None

    @property
    def bandwidth(self) -> float:
        """Bytes per second."""
        return self.bandwidth_gbs * 1e9

    def compute_peak(self, compute: str = "bf16") -> ComputePeak | None:
        """The peak for ``compute`` ("fp32", "bf16", "fp16", "fp8", "int8"): the per-dtype figure where there is one,
        else bf16's (a table row without the column; fp8 on a CPU); None without any compute figure."""
        by_dtype = {p.dtype: p for p in self.peaks}
        if not by_dtype:
            columns = {"bf16": self.bf16_tflops, "fp8": self.fp8_tflops, "int8": self.int8_tops}
            by_dtype = {k: ComputePeak(k, v * 1e12, "datasheet", self.source) for k, v in columns.items() if v}
        return by_dtype.get(compute) or by_dtype.get("bf16") or by_dtype.get("fp32")

    def peak_flops(self, compute: str = "bf16") -> float | None:
        """FLOP/s for ``compute`` (`compute_peak`)."""
        peak = self.compute_peak(compute)
        return peak.flops if peak else None

    def describe(self, source: bool = True) -> str:
        pairs = [(v, label) for v, label in ((self.bf16_tflops, self.compute_label), (self.fp8_tflops, "fp8"),
                                             (self.int8_tops, "int8")) if v]
        scale, unit = (1000, "GFLOP/s") if pairs and max(v for v, _ in pairs) < 1 else (1, "TFLOP/s")
        figures = " / ".join(f"{v * scale:,.4g} {label}" for v, label in pairs)
        flops = f", {figures} {unit}" if pairs else ", no compute figure"
        if self.peaks:
            flops = ", " + " / ".join(f"{p.dtype} {p.figure()} ({p.basis})" for p in self.peaks)
        memory = f"{self.memory_gb:,.4g} GiB" if self.memory_gb else "memory size unknown"
        where = f" (source: {self.source or 'not given'})" if source else ""
        return f"{self.name}: {memory}, {self.bandwidth_gbs:,.4g} GB/s{flops}{where}"


def _num(value: Any, column: str, name: str) -> float | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    try:
        return float(value)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"hardware {name!r}: {column} = {value!r} is not a number") from exc


def _row(row: dict[str, Any], where: str) -> HardwareSpec:
    name = str(row.get("name") or "").strip()
    if not name:
        raise ConfigError(f"{where}: a hardware row has no name")
    bandwidth = _num(row.get("bandwidth_gbs"), "bandwidth_gbs", name)
    if not bandwidth or bandwidth <= 0:
        raise ConfigError(f"{where}: hardware {name!r} needs bandwidth_gbs (GB/s)")
    return HardwareSpec(
        name=name, kind=str(row.get("kind") or "gpu"), memory_gb=_num(row.get("memory_gb"), "memory_gb", name),
        bandwidth_gbs=bandwidth, bf16_tflops=_num(row.get("bf16_tflops_dense"), "bf16_tflops_dense", name),
        fp8_tflops=_num(row.get("fp8_tflops_dense"), "fp8_tflops_dense", name),
        int8_tops=_num(row.get("int8_tops_dense"), "int8_tops_dense", name),
        source=str(row.get("source") or where), note=str(row.get("note") or ""))


@cache
def _builtin() -> tuple[HardwareSpec, ...]:
    text = resources.files("tokometer.perf").joinpath("data/hardware.csv").read_text("utf-8")
    return tuple(_row(row, "hardware.csv") for row in csv.DictReader(io.StringIO(text)))


def user_hardware_file() -> Path:
    """Where user hardware rows are read from by default."""
    import platformdirs

    return Path(platformdirs.user_config_dir("tokometer")) / "hardware.toml"


def _user_rows(path: Path) -> list[HardwareSpec]:
    try:
        data = tomllib.loads(path.read_text("utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read the hardware file {path}: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"the hardware file {path} is not valid TOML: {exc}") from exc
    rows = data.get("hardware", [])
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise ConfigError(f"{path}: expected [[hardware]] tables with name, bandwidth_gbs, ...")
    return [_row({"source": str(path), **r}, str(path)) for r in rows]


def hardware_table(hardware_file: Path | None = None) -> dict[str, HardwareSpec]:
    """Built-in rows plus the user's (which win on equal names), by name."""
    table = {h.name: h for h in _builtin()}
    path = hardware_file or user_hardware_file()
    if hardware_file is not None and not path.is_file():
        raise ConfigError(f"no hardware file at {path}")
    if path.is_file():
        for row in _user_rows(path):
            table[row.name] = row
    return table


def _key(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def resolve_hardware(name: str, hardware_file: Path | None = None) -> HardwareSpec:
    """A table row by name (case-insensitive; ``H100`` means H100-SXM), or ``host`` (this machine, measured)."""
    if name.strip().lower() in ("host", "this", "local"):
        from tokometer.perf.host import host_hardware

        return host_hardware()
    table = hardware_table(hardware_file)
    by_key = {_key(n): spec for n, spec in table.items()}
    key = _key(name)
    if key in by_key:
        return by_key[key]
    alias = {_key(a): t for a, t in HARDWARE_ALIASES.items()}.get(key)
    if alias and _key(alias) in by_key:
        return by_key[_key(alias)]
    containing = [spec for k, spec in by_key.items() if key and key in k]
    if len(containing) == 1:
        return containing[0]
    close = [by_key[k].name for k in difflib.get_close_matches(key, list(by_key), n=4, cutoff=0.5)]
    close += [s.name for s in containing if s.name not in close]
    hint = f"did you mean {', '.join(close)}?" if close else f"known: {', '.join(table)}, or host."
    raise ConfigError(f"unknown hardware {name!r}: {hint} Add your own in {user_hardware_file()} "
                      "(or --hardware-file); --list-hardware shows the table")
