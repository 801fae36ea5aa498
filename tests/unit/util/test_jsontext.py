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


STDLIB_PARSERS = {
    "util/jsonstream.py": "files a user hands over, parsed within their limits (nesting, tree bytes)",
    "util/readlimit.py": "read_json: a bounded file, RecursionError caught",
    "datasets/files.py": "a line of a JSON-lines file within its line bound, RecursionError caught",
    "datasets/agentic_workload.py": "a bounded head of a file, RecursionError caught",
    "imports/aiperf.py": "a bounded head of another tool's file (which may hold NaN), RecursionError caught",
    "quality/evalset.py": "a line of a bounded eval set, RecursionError caught",
    "store/load.py": "a JSON column within MAX_JSON_CHARS, RecursionError caught",
    "engines/vllm_convert.py": "tokenizer and config files of a model this tool converts",
    "engines/vllm_env.py": "the answer of this tool's own subprocess",
    "perf/host.py": "the answer of this tool's own subprocess",
}
"""The modules that call `json.loads` / `json.load` themselves, and why that is not JSON a peer sent."""


def test_json_a_peer_sends_is_parsed_only_through_loads() -> None:
    import ast
    from pathlib import Path

    src = Path(__file__).resolve().parents[3] / "src" / "tokometer"
    found = set()
    for path in src.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Attribute) and node.attr in ("loads", "load")
                    and isinstance(node.value, ast.Name) and node.value.id == "json"):
                found.add(path.relative_to(src).as_posix())
    listed = set(STDLIB_PARSERS)
    assert found <= listed, f"parse a peer's JSON with util.jsontext.loads (or say here why not): {found - listed}"
    assert listed <= found, f"no longer calling json.loads, drop from the list: {sorted(listed - found)}"


def test_readable_json_keeps_the_texts_characters_and_escapes_what_a_terminal_acts_on() -> None:
    import json

    from tokometer.util.jsontext import dumps_readable

    value = {"pieces": ["café", "中文", "😀", "a\x9b2Jb", "rtl\u202eevil", "zw\u200bj", "del\x7f", "esc\x1b[2J"]}
    text = dumps_readable(value, indent=1)
    assert json.loads(text) == value  # the same value read back
    assert "café" in text and "中文" in text and "😀" in text  # the text's own characters as they are
    assert not any(c in text for c in "\x9b\u202e\u200b\x7f\x1b")  # nothing a terminal would act on or hide
    assert "\\u009b" in text and "\\u202e" in text and "\\u200b" in text and "\\u007f" in text
    assert "\\u001b" in text  # JSON's own escape of a C0 control
    assert dumps_readable({"a": "plain"}) == '{"a": "plain"}'
    # past the Basic Multilingual Plane, a non-printable character is a surrogate pair (a private-use one here)
    assert json.loads(dumps_readable(["\U000f0000"])) == ["\U000f0000"]
    assert "\\udb80\\udc00" in dumps_readable(["\U000f0000"])
