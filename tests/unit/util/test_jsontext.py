"""`tokometer.util.jsontext`: JSON that is always valid (no NaN, no Infinity), the one writer of tokometer's JSON
outputs."""

from __future__ import annotations

import json
import math

import pytest

from tokometer.util.jsontext import dumps, finite


def test_non_finite_numbers_are_null_anywhere() -> None:
    value = {"a": math.nan, "b": [1.0, math.inf, {"c": -math.inf}], "d": (2, "x"), "e": None, "f": True}
    assert finite(value) == {"a": None, "b": [1.0, None, {"c": None}], "d": [2, "x"], "e": None, "f": True}
    text = dumps(value, indent=1)
    assert json.loads(text) == finite(value) and "NaN" not in text and "Infinity" not in text


def test_finite_json_is_written_as_json_dumps_writes_it() -> None:
    value = {"x": [1, 2.5, "é"], "y": {"z": None}}
    assert dumps(value, indent=2) == json.dumps(value, indent=2)
    assert dumps(value, ensure_ascii=False) == json.dumps(value, ensure_ascii=False)
    assert dumps({"t": object}, default=str) == json.dumps({"t": object}, default=str)


def test_a_numpy_float_is_a_float() -> None:
    np = pytest.importorskip("numpy")
    assert dumps([np.float64("nan"), np.float64(1.5)]) == "[null, 1.5]"


def test_every_json_writer_of_reports_store_and_commands_uses_it() -> None:
    """No ``json.dumps`` in ``report``, ``store``, ``cli`` or ``perf`` without ``allow_nan=False``: each goes through
    `dumps` (or says allow_nan=False itself)."""
    import re
    from pathlib import Path

    src = Path(__file__).resolve().parents[2] / "src" / "tokometer"
    stray = []
    for folder in ("report", "store", "cli", "perf"):
        for path in sorted((src / folder).rglob("*.py")):
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if re.search(r"\bjson\.dumps?\(", line) and "allow_nan=False" not in line:
                    stray.append(f"{path.relative_to(src)}:{number}")
    assert not stray, stray
