"""A UTF-8 byte-order mark at the start of a user's text file (Notepad's and Excel's "CSV UTF-8" write one) is not
text: every reader of a user's text file takes the file as without it, where each had refused it in its own way
(a CSV header not found, "not JSON" on line 1, a ShareGPT list read as JSON lines, another tool's result not
recognised). The readers share `tokometer.util.readlimit.without_bom`, so a new one built on them inherits it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokometer.datasets import JsonlSource, ShareGPTSource, load_source_file
from tokometer.imports import read_import
from tokometer.perf.lengthsfile import read_lengths
from tokometer.util.readlimit import UTF8_BOM, read_json, read_text, read_toml, split_lines, without_bom

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "imports"


@pytest.mark.parametrize(("chunks", "expected"), [
    ([UTF8_BOM + b"ab"], b"ab"),
    ([b"\xef", b"\xbb", b"\xbfab", b"c"], b"abc"),  # the mark split over reads
    ([b"\xef\xbb"], b"\xef\xbb"),  # two of its bytes alone are not the mark: kept (and not UTF-8: refused later)
    ([b"\xef\xbbX"], b"\xef\xbbX"),
    ([b"ab" + UTF8_BOM], b"ab" + UTF8_BOM),  # only at the very start
    ([UTF8_BOM + UTF8_BOM + b"a"], UTF8_BOM + b"a"),  # one mark is dropped, not every one
    ([], b""),
    ([UTF8_BOM], b""),
])
def test_without_bom_drops_the_mark_at_the_start_only(chunks: list[bytes], expected: bytes) -> None:
    assert b"".join(without_bom(chunks)) == expected


def test_split_lines_numbers_the_first_line_without_the_mark() -> None:
    lines = list(split_lines([UTF8_BOM + b'{"a": 1}\n{"b"', b': 2}\n'], 1024, ValueError))
    assert lines == [(1, b'{"a": 1}'), (2, b'{"b": 2}')]


def test_whole_file_readers_take_a_marked_file(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(UTF8_BOM + b'{"a": "caf\xc3\xa9"}')
    assert read_text(path, 1 << 20, "too big", "the file") == '{"a": "café"}'
    assert read_json(path, 1 << 20, "too big", "the file") == {"a": "café"}
    path.write_bytes(UTF8_BOM + b'[server]\nport = 8080\n')
    assert read_toml(path, 1 << 20, "too big", "the file") == {"server": {"port": 8080}}


def test_a_lengths_file_saved_by_a_spreadsheet(tmp_path: Path) -> None:
    path = tmp_path / "lengths.csv"
    path.write_bytes(UTF8_BOM + b"input_tokens,output_tokens\r\n100,200\r\n300,400\r\n")
    lengths = read_lengths(path)
    assert (lengths.requests, lengths.input_mean, lengths.output_mean) == (2, 200.0, 300.0)


def test_datasets_of_each_kind_with_the_mark(tmp_path: Path) -> None:
    jsonl = tmp_path / "prompts.jsonl"
    jsonl.write_bytes(UTF8_BOM + b'{"prompt": "hello there"}\n{"prompt": "and again"}\n')
    source = load_source_file(jsonl)
    assert isinstance(source, JsonlSource) and len(source) == 2
    conversations = [{"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello"}]}]
    sharegpt = tmp_path / "sharegpt.json"
    sharegpt.write_bytes(UTF8_BOM + json.dumps(conversations).encode())
    shared = load_source_file(sharegpt)
    assert isinstance(shared, ShareGPTSource) and len(shared) == 1


def test_another_tools_result_with_the_mark(tmp_path: Path) -> None:
    path = tmp_path / "vllm.json"
    path.write_bytes(UTF8_BOM + (FIXTURES / "vllm-bench-serve-0.32.0.json").read_bytes())
    assert read_import(path).tool == read_import(FIXTURES / "vllm-bench-serve-0.32.0.json").tool
