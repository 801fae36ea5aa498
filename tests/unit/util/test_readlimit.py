"""The whole-file readers of `tokometer.util.readlimit`: each bounded, and each bad file one error naming it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokometer.util.errors import ConfigError, DatasetError
from tokometer.util.readlimit import read_at_most, read_json, read_text, read_toml


def test_a_file_larger_than_the_limit_is_refused_by_its_size_or_its_bytes(tmp_path: Path) -> None:
    """A regular file says its size, and is refused before a byte is read (a 1 TiB hole takes no time); a device
    that says nothing (``/dev/zero``) is read up to the limit, then refused."""
    hole = tmp_path / "hole"
    with hole.open("wb") as handle:
        handle.truncate(1 << 40)
    with pytest.raises(DatasetError, match=r"hole is larger than 1 MiB: too big"):
        read_at_most(hole, 1 << 20, "too big", DatasetError)
    with pytest.raises(ConfigError, match=r"^/dev/zero is larger than 1 MiB: too big$"):
        read_at_most(Path("/dev/zero"), 1 << 20, "too big")


def test_text_and_json_errors_are_one_line_naming_the_file(tmp_path: Path) -> None:
    """Not UTF-8: the first bad byte; not JSON: the parser's words; nested past the parser's depth (which used
    to be a RecursionError's traceback wherever a JSON file was parsed): said so."""
    path = tmp_path / "f.json"
    path.write_bytes(b'{"a": "caf\xe9"}')
    with pytest.raises(DatasetError, match=r"^the file: not UTF-8 text \(byte 10\)$"):
        read_text(path, 1 << 20, "x", "the file", DatasetError)
    path.write_bytes(b"[" * 100_000)
    with pytest.raises(ConfigError, match=r"^the file: not valid JSON: nested too deep$"):
        read_json(path, 1 << 20, "x", "the file")
    path.write_bytes(b"{nope")
    with pytest.raises(ConfigError, match=r"^the file: not valid JSON: Expecting property name"):
        read_json(path, 1 << 20, "x", "the file")
    path.write_bytes(b'{"a": [1, "\xc3\xa9"]}')
    assert read_json(path, 1 << 20, "x", "the file") == {"a": [1, "é"]}


def test_toml_nested_past_the_parser_or_an_endless_integer_is_one_error(tmp_path: Path) -> None:
    """tomllib meets 100,000 ``[`` as a RecursionError and an integer of more digits than Python converts as a
    bare ValueError: each was a traceback wherever a TOML file was read (``--mix``, variants, hardware)."""
    path = tmp_path / "f.toml"
    for text, said in (("a = " + "[" * 100_000, "nested too deep"), ("a = " + "{b = " * 100_000, "nested too deep"),
                       ("a = " + "9" * 5000, "Exceeds the limit")):
        path.write_text(text)
        with pytest.raises(ConfigError, match=rf"^--mix f: not valid TOML: {said}"):
            read_toml(path, 1 << 20, "x", "--mix f")
