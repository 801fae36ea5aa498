"""The hardware table and `resolve_hardware`: a `HardwareSpec` (`tokometer.perf.hardwarespec`) by name.

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

Compute columns, each a dense (not 2:4 sparse) datasheet peak: ``bf16_tflops_dense``,
``fp8_tflops_dense``, ``int8_tops_dense`` and ``fp4_tflops_dense`` (the FP4 tensor cores), with
``fp4_formats`` the 4-bit block formats those take, names separated by spaces or commas (empty: both
``nvfp4 mxfp4``, as Blackwell's; an MI355X's: ``mxfp4``). A format whose column a row lacks, or a 4-bit
format its fp4 units do not take, is dequantised and multiplied at the bf16 figure (`tokometer.perf.quant`).
Vendors who give only sparse figures are halved; rack figures (GB200/GB300 NVL72) are divided by the GPUs in the rack.
FP6 has no column: no weight format here is stored in it.

``link_gbs``: the link between the devices of one server or rack that tensor- and expert-parallel
traffic crosses, per device, in GB/s with **both directions summed**, as NVIDIA quotes NVLink
(H100: 18 links × 50 GB/s = 900 GB/s, 450 each way); AMD's Infinity Fabric, Google's ICI and
Gaudi's RoCE ports are quoted the same way. One direction carries half. Where a device has no
such link, the PCIe slot it sits in: Gen4 x16 64 GB/s, Gen5 x16 128 GB/s. Empty: a single device.

``resolve_hardware("host")`` measures this machine instead (see `tokometer.perf.host`, which builds its
`HardwareSpec` from the leaf `tokometer.perf.hardwarespec`, not from this table): its peaks come per
data type (fp32, bf16, fp16, int8), each a `ComputePeak` saying whether it was measured or is theoretical.
A table row's figures are its datasheet's; a data type it lacks falls back to its bf16 figure.
"""

from __future__ import annotations

import csv
import difflib
import io
import math
import re
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from tokometer.perf.hardwarespec import FP4_FORMATS, HardwareSpec
from tokometer.util.errors import ConfigError

__all__ = ["HARDWARE_ALIASES", "hardware_table", "resolve_hardware", "user_hardware_file"]

HARDWARE_ALIASES = {"h100": "H100-SXM", "h200": "H200-SXM", "a100": "A100-80GB-SXM", "a100-80gb": "A100-80GB-SXM",
                    "a100-40gb": "A100-40GB-SXM", "4090": "RTX-4090", "3090": "RTX-3090", "mi300": "MI300X",
                    "5090": "RTX-5090", "mi355": "MI355X", "mi325": "MI325X", "mi350": "MI350X", "trillium": "TPU-v6e",
                    "ironwood": "TPU7x", "tpu-v7x": "TPU7x", "v7x": "TPU7x"}


def _num(value: Any, column: str, name: str) -> float | None:
    """A row's figure: None when empty; a finite positive number, else one ConfigError naming the column."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ConfigError(f"hardware {name!r}: {column} = {value!r} is not a number") from exc
    if isinstance(value, bool) or not math.isfinite(number) or number <= 0:
        raise ConfigError(f"hardware {name!r}: {column} = {value!r} is not a positive number: give the "
                          "datasheet's figure, or leave it out")
    return number


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
        fp4_tflops=_num(row.get("fp4_tflops_dense"), "fp4_tflops_dense", name),
        link_gbs=_num(row.get("link_gbs"), "link_gbs", name), gemm_fraction=_fraction(row, name),
        source=str(row.get("source") or where), note=str(row.get("note") or ""), fp4_formats=_fp4_formats(row, name))


def _fp4_formats(row: dict[str, Any], name: str) -> tuple[str, ...]:
    """The row's ``fp4_formats``: `FP4_FORMATS` when empty, else the names it gives (a string of names separated
    by spaces or commas, or a TOML list of them), each one of `FP4_FORMATS` (one ConfigError otherwise)."""
    value = row.get("fp4_formats")
    if value is None or value == "":
        return FP4_FORMATS
    names = re.split(r"[\s,]+", value.strip()) if isinstance(value, str) else value
    if not isinstance(names, list | tuple) or not names or not all(n in FP4_FORMATS for n in names):
        raise ConfigError(f"hardware {name!r}: fp4_formats = {value!r}: give the 4-bit formats its fp4 units take, "
                          f"of {' and '.join(FP4_FORMATS)} (e.g. \"mxfp4\"), or leave it out for both")
    return tuple(dict.fromkeys(names))


def _fraction(row: dict[str, Any], name: str) -> float | None:
    """The row's ``gemm_fraction``: None when empty, else a number in (0, 1] (one ConfigError otherwise)."""
    value = _num(row.get("gemm_fraction"), "gemm_fraction", name)
    if value is not None and value > 1:
        raise ConfigError(f"hardware {name!r}: gemm_fraction = {value!r} is above 1: give the share of the "
                          "datasheet peak a dense GEMM sustained (e.g. 0.55), or leave it out")
    return value


@cache
def _builtin() -> tuple[HardwareSpec, ...]:
    text = resources.files("tokometer.perf").joinpath("data/hardware.csv").read_text("utf-8")
    return tuple(_row(row, "hardware.csv") for row in csv.DictReader(io.StringIO(text)))


def user_hardware_file() -> Path:
    """Where user hardware rows are read from by default."""
    import platformdirs

    return Path(platformdirs.user_config_dir("tokometer")) / "hardware.toml"


_HARDWARE_FILE_BYTES = 1 << 20
"""The most of a hardware file read (a FIFO or /dev/zero given as one costs this and one line)."""


def _user_rows(path: Path) -> list[HardwareSpec]:
    from tokometer.util.readlimit import read_toml

    data = read_toml(path, _HARDWARE_FILE_BYTES, "a hardware file is a short list of [[hardware]] tables",
                     f"the hardware file {path}")
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
