"""Fuzzing what `estimate` reads from the user: a format's name (`--dtype`, `--kv-dtype`) and a hardware row
from a TOML file.

Documented behaviour: a weight or KV-cache format name gives its format or one `ConfigError` (never another
exception); a hardware row gives figures that are each None or a finite positive number, or one
`ConfigError` naming the column.
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.strategies import texts
from tokometer.perf.hardware import hardware_table
from tokometer.perf.quant import kv_bytes, normalize_dtype, weight_dtype
from tokometer.util.errors import ConfigError

names = texts | st.sampled_from(["fp4", " NVFP4 ", "mxfp4", "MXFP4\t", "modelopt_fp4", "fp8", "q4_k_m", "Q8_0",
                                 "nvfp4a16", "fp4_e2m1", "\x00fp4", "ﬀp4"])
COLUMNS = ("memory_gb", "bf16_tflops_dense", "fp8_tflops_dense", "int8_tops_dense", "fp4_tflops_dense", "link_gbs")
toml_values = st.sampled_from(["nan", "inf", "-inf", "-1", "0", "0.0", "1e400", "true", '"12"', '"x"', '""', "[1]",
                               "{a = 1}", "12.5", "9000", '"1e308"', "-0.0"]) \
    | st.floats(allow_nan=False, allow_infinity=False).map(repr) | st.integers(-(2**70), 2**70).map(str)


@given(names)
def test_a_format_name_gives_its_format_or_one_error(name: str) -> None:
    normalize_dtype(name)
    try:
        fmt = weight_dtype(name)
    except ConfigError as exc:
        assert "unknown weight dtype" in str(exc)
    else:
        assert 0 < fmt.bits <= 32 and fmt.compute in ("bf16", "fp8", "int8", "fp4")
    try:
        size = kv_bytes(name)
    except ConfigError as exc:
        assert "KV-cache dtype" in str(exc) or "FP4 KV cache" in str(exc)
    else:
        assert 0 < size <= 4


@given(st.dictionaries(st.sampled_from(COLUMNS), toml_values, max_size=len(COLUMNS)))
def test_a_hardware_row_gives_positive_figures_or_one_error(values: dict[str, str]) -> None:
    lines = ['[[hardware]]', 'name = "fuzzed"', "bandwidth_gbs = 1000", *(f"{k} = {v}" for k, v in values.items())]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "hw.toml"
        path.write_text("\n".join(lines) + "\n", "utf-8")
        try:
            row = hardware_table(path)["fuzzed"]
        except ConfigError as exc:
            assert "hardware" in str(exc)
            return
    for figure in (row.memory_gb, row.bf16_tflops, row.fp8_tflops, row.int8_tops, row.fp4_tflops, row.link_gbs):
        assert figure is None or (math.isfinite(figure) and figure > 0)
