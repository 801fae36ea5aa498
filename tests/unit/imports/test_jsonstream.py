"""`ImportStream`: the streamed parse gives what ``json.loads`` gives, whatever the window, and refuses in one line
what an import must not hold (a huge string, a list past the count limit, a budget of values, deep nesting)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokometer.imports import jsonstream, source
from tokometer.imports.jsonstream import ImportStream
from tokometer.imports.source import MAX_NESTING, ImportFormatError

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "imports"
DOCUMENTS = [FIXTURES / "vllm-bench-serve-0.32.0.json", FIXTURES / "guidellm-0.8.1.json",
             FIXTURES / "aiperf-0.13.0" / "profile_export_aiperf.json"]


@pytest.mark.parametrize("window", [1, 2, 3, 7, 64, 4096, 1 << 20])
@pytest.mark.parametrize("fixture", DOCUMENTS, ids=lambda p: p.name)
def test_every_window_gives_the_document(fixture: Path, window: int) -> None:
    assert ImportStream(fixture, window=window).document() == json.loads(fixture.read_bytes())


@pytest.mark.parametrize("window", [1, 5, 4096])
def test_lines_one_at_a_time(window: int) -> None:
    path = FIXTURES / "aiperf-0.13.0" / "profile_export.jsonl"
    expected = [json.loads(line) for line in path.read_bytes().splitlines() if line.strip()]
    assert [value for _, value in ImportStream(path, window=window).lines()] == expected


@pytest.mark.parametrize(("content", "says"), [
    (b'{"a": 1} x', "more after the JSON document ends"),
    (b'{"a": [1, 2', "the file ends inside a list"),
    (b'{"a": [1, ', "the file ends where a value should be"),
    (b'{"a": [1 2]}', "',' or ']' expected"),
    (b'{"a" 1}', "':' expected"),
    (b'{"a": "\xff"}', "not UTF-8"),
    (b'{"a": tru}', "a value expected"),
    (b"\x00" * 100, "a value expected"),
    (b"[" * (MAX_NESTING + 1) + b"]" * (MAX_NESTING + 1), "nested deeper"),
])
@pytest.mark.parametrize("window", [1, 3, 4096])
def test_bad_documents_are_one_line(tmp_path: Path, content: bytes, says: str, window: int) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(ImportFormatError, match=says) as refused:
        ImportStream(path, window=window).document()
    assert "\n" not in str(refused.value) and str(path) in str(refused.value)


def test_a_huge_string_a_long_list_and_many_values_are_refused(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jsonstream, "MAX_TOKEN_CHARS", 1000)
    monkeypatch.setattr(source, "MAX_EVENTS", 50)
    monkeypatch.setattr(jsonstream, "MAX_TREE_BYTES", 20_000)
    cases = {b'{"a": "' + b"x" * 5000 + b'"}': "longer than", b"[" + b"1," * 60 + b"1]": "more than 50 entries",
             b"[" + (b'["' + b"y" * 900 + b'"],') * 40 + b"[]]": "holds more values"}
    for content, says in cases.items():
        path = tmp_path / "big.json"
        path.write_bytes(content)
        with pytest.raises(ImportFormatError, match=says):
            ImportStream(path, window=16).document()


def test_a_line_past_the_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jsonstream, "MAX_LINE_BYTES", 100)
    path = tmp_path / "lines.jsonl"
    path.write_bytes(b'{"a": 1}\n' + b"x" * 500)
    with pytest.raises(ImportFormatError, match="line 2 is longer than"):
        list(ImportStream(path, window=7).lines())
