"""Fuzzing the mix file (``bench --mix``): whatever the file holds, `read_mix` returns a checked `TenantMix` or
raises `ConfigError` with one line; an accepted mix's shares add up to 1 or 100 (weights to 1), its names are
distinct, printable single lines, and its tenants' headers can be sent."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tokometer.datasets.mix import MAX_TENANTS, read_mix
from tokometer.util.errors import ConfigError
from tokometer.util.secrets import header_problem

_KEYS = ("name", "share", "rate", "model", "input_tokens", "output_tokens", "prompt", "dataset", "dataset_kind",
         "slo_ttft_ms", "slo_tpot_ms", "slo_e2e_ms", "headers", "other")
_SCALARS = st.one_of(st.text(max_size=12), st.integers(-5, 10**12), st.floats(allow_nan=True, allow_infinity=True),
                     st.booleans())


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_toml(k)} = {_toml(v)}" for k, v in value.items()) + " }"
    return '"' + "".join(_toml_char(ch) for ch in str(value)) + '"'


def _toml_char(ch: str) -> str:
    """One character in a TOML basic string: printable ASCII as it is, the rest as TOML's \\u or \\U escape
    (Python's \\x escapes are not TOML)."""
    if ch in '"\\':
        return "\\" + ch
    if " " <= ch <= "~":
        return ch
    return f"\\u{ord(ch):04x}" if ord(ch) < 0x10000 else f"\\U{ord(ch):08x}"


_TABLE = st.dictionaries(st.sampled_from(_KEYS),
                         st.one_of(_SCALARS, st.dictionaries(st.text(max_size=6), st.text(max_size=6), max_size=2)),
                         max_size=6)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mix")


@given(tables=st.lists(_TABLE, min_size=0, max_size=4), junk=st.binary(max_size=40))
def test_any_mix_file_is_a_checked_mix_or_one_line(folder: Path, tables: list[dict[str, Any]], junk: bytes) -> None:
    text = "".join("[[tenant]]\n" + "".join(f"{k} = {_toml(v)}\n" for k, v in t.items()) for t in tables)
    for raw in (text.encode(), text.encode() + junk):
        path = folder / "mix.toml"
        path.write_bytes(raw)
        try:
            mix = read_mix(path)
        except ConfigError as exc:
            assert "\n" not in str(exc) and str(exc).startswith(f"--mix {path}"), str(exc)
            continue
        assert 1 <= len(mix.tenants) <= MAX_TENANTS
        names = mix.names()
        assert len(set(names)) == len(names) and all(n.isprintable() and n.strip() for n in names)
        assert math.isclose(sum(mix.weights()), 1.0)
        shares = [t.share for t in mix.tenants]
        if all(s is not None for s in shares):
            total = sum(s or 0.0 for s in shares)
            assert math.isclose(total, 1, abs_tol=1e-3) or math.isclose(total, 100, abs_tol=0.1)
        for tenant in mix.tenants:
            assert all(header_problem(k, v) is None for k, v in tenant.headers.items())


@given(weights=st.lists(st.floats(0.001, 1000), min_size=1, max_size=6), scale=st.sampled_from([1.0, 100.0]),
       drift=st.floats(-0.01, 0.01), names=st.lists(st.text(min_size=1, max_size=8), min_size=6, max_size=6))
def test_shares_near_a_whole_are_read_by_their_sum(folder: Path, weights: list[float], scale: float, drift: float,
                                                   names: list[str]) -> None:
    shares = [scale * w / sum(weights) for w in weights]
    shares[0] += drift * scale
    text = "".join(f"[[tenant]]\nname = {_toml(names[k])}\nshare = {shares[k]!r}\n" for k in range(len(shares)))
    path = folder / "near.toml"
    path.write_text(text, encoding="utf-8")
    total = sum(shares)
    fits = math.isclose(total, 1, abs_tol=1e-3) if scale == 1 else math.isclose(total, 100, abs_tol=0.1)
    clean = len(set(names[:len(shares)])) == len(shares) and all(
        n.isprintable() and n.strip() for n in names[:len(shares)]) and all(s > 0 for s in shares)
    try:
        mix = read_mix(path)
    except ConfigError as exc:
        assert "\n" not in str(exc)
        assert not (fits and clean), str(exc)
        return
    assert fits and clean and mix.weights() == pytest.approx([s / total for s in shares])
