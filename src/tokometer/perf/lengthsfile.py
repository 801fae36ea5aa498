"""A file of requests' lengths, one request a line (``estimate --lengths FILE``): their means and the tokens a
full engine's decoding sequences hold on average (`tokometer.perf.lengths`).

Two shapes, told apart by the first character that is not a space:

- CSV: two columns, a prompt's tokens and its answer's; a header line names them (``input_tokens,output_tokens``,
  or MLPerf's digests' ``input_length,output_length``: `INPUT_NAMES`, `OUTPUT_NAMES`, in either order, other
  columns ignored); a first line with no letter in it is a request, the prompt's column first.
- JSONL (a line starting with ``{``): an object a line with one of `INPUT_NAMES` and one of `OUTPUT_NAMES`.

The file is the user's and may be anything: it is read a line at a time (memory: a chunk and a line), within
`MAX_LENGTHS_BYTES` (and, from a pipe, `tokometer.util.readlimit.READ_DEADLINE_S`), each line within
`MAX_LINE_BYTES`, at most `MAX_REQUESTS` requests; each length a whole number from 0 to
`tokometer.util.limits.MAX_TOKENS`; a bad line is one error naming its number. Blank lines are skipped; a CSV
field may not hold a line break.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from tokometer.perf.lengths import LengthSums
from tokometer.util.errors import ConfigError
from tokometer.util.jsontext import loads_object
from tokometer.util.limits import MAX_TOKENS
from tokometer.util.readlimit import READ_DEADLINE_S, iter_at_most, split_lines
from tokometer.util.shown import clipped

__all__ = ["INPUT_NAMES", "MAX_LENGTHS_BYTES", "MAX_LINE_BYTES", "MAX_REQUESTS", "OUTPUT_NAMES", "RequestLengths",
           "read_lengths"]

MAX_LENGTHS_BYTES: Final = 256 << 20
"""The largest lengths file read (ten million requests of two six-digit numbers take about 140 MiB); it is read a
line at a time, so this bounds the time it takes, not the memory."""
MAX_LINE_BYTES: Final = 64 << 10
"""The longest line of a lengths file (a request's two numbers, and in JSONL whatever else its object holds)."""
MAX_REQUESTS: Final = 10_000_000
"""The most requests a lengths file may list."""
INPUT_NAMES: Final = ("input_tokens", "input_length", "prompt_tokens", "input_len", "isl")
"""Names a prompt's length goes by (a CSV header's column, a JSONL object's key)."""
OUTPUT_NAMES: Final = ("output_tokens", "output_length", "completion_tokens", "output_len", "osl")
"""Names an answer's length goes by."""


@dataclass(frozen=True)
class RequestLengths:
    """The requests of a lengths file: how many, their means, the tokens a decoding sequence holds on average and
    the room a slot holds reserved on average (`tokometer.perf.lengths`)."""

    source: str
    requests: int
    input_mean: float
    output_mean: float
    decode_context: float
    room: float

    @property
    def input_tokens(self) -> int:
        """The prompts' mean, rounded (at least 1): the estimate's ``--input-tokens``."""
        return max(1, round(self.input_mean))

    @property
    def output_tokens(self) -> int:
        """The answers' mean, rounded (at least 1): the estimate's ``--output-tokens``."""
        return max(1, round(self.output_mean))

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "requests": self.requests, "input_mean": self.input_mean,
                "output_mean": self.output_mean, "decode_context_tokens": self.decode_context,
                "reserved_room_tokens": self.room}


def _length(text: Any, where: str, what: str) -> int:
    """A whole number of tokens from 0 to MAX_TOKENS, or one ConfigError naming ``where`` and ``what``."""
    digits = str(text).strip()
    if isinstance(text, bool) or not isinstance(text, (int, str)) or not (digits.isascii() and digits.isdigit()):
        raise ConfigError(f"{where}: the {what} length {clipped(repr(text))} is not a whole number of tokens")
    value = int(digits)
    if value > MAX_TOKENS:
        raise ConfigError(f"{where}: the {what} length {value:,} is past {MAX_TOKENS:,} tokens")
    return value


def _named(keys: list[str], names: tuple[str, ...]) -> int | None:
    lowered = [k.strip().lower() for k in keys]
    return next((lowered.index(n) for n in names if n in lowered), None)


def _lines(path: Path, where: str) -> Iterator[tuple[int, str]]:
    """``(number, text)`` of each line that is not blank, read a chunk at a time (memory: a chunk and a line, not
    the file), within `MAX_LENGTHS_BYTES` and, from a pipe, `READ_DEADLINE_S`; each at most `MAX_LINE_BYTES`."""
    chunks = iter_at_most(path, MAX_LENGTHS_BYTES, "give a sample of the requests", what="--lengths",
                          deadline_s=READ_DEADLINE_S)

    def too_long(number: int) -> ConfigError:
        return ConfigError(f"{where} line {number}: longer than {MAX_LINE_BYTES:,} bytes (a request a line)")

    for number, raw in split_lines(chunks, MAX_LINE_BYTES, too_long):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{where} line {number}: not UTF-8 text (byte {exc.start})") from None
        if text.strip():
            yield number, text


def _csv_columns(first: list[str], where: str) -> tuple[int, int] | None:
    """The prompt's and the answer's columns a header line names; None when the first line is a request (no
    letter in it: the prompt's column first)."""
    if not any(c.isalpha() for field in first for c in field):
        return None
    i, o = _named(first, INPUT_NAMES), _named(first, OUTPUT_NAMES)
    if i is None or o is None:
        raise ConfigError(f"{where}: its header {clipped(','.join(first))} names no "
                          f"{'prompt' if i is None else 'answer'} column (one of "
                          f"{', '.join(INPUT_NAMES if i is None else OUTPUT_NAMES)})")
    return i, o


def _add_csv(sums: LengthSums, number: int, text: str, columns: tuple[int, int], where: str) -> None:
    fields = next(csv.reader([text]), [])
    line, (i, o) = f"{where} line {number}", columns
    if len(fields) <= max(i, o):
        raise ConfigError(f"{line}: {len(fields)} column(s), the lengths are in columns {i + 1} and {o + 1}")
    _add(sums, _length(fields[i], line, "prompt"), _length(fields[o], line, "answer"), line)


def _add_json(sums: LengthSums, number: int, text: str, where: str) -> None:
    line = f"{where} line {number}"
    try:
        obj = loads_object(text, "the line")
    except ValueError as exc:
        raise ConfigError(f"{line}: not a JSON object ({clipped(str(exc))})") from None
    keys = list(obj)
    i, o = _named(keys, INPUT_NAMES), _named(keys, OUTPUT_NAMES)
    if i is None or o is None:
        raise ConfigError(f"{line}: no {'prompt' if i is None else 'answer'} length (one of "
                          f"{', '.join(INPUT_NAMES if i is None else OUTPUT_NAMES)})")
    _add(sums, _length(obj[keys[i]], line, "prompt"), _length(obj[keys[o]], line, "answer"), line)


def _add(sums: LengthSums, input_tokens: int, output_tokens: int, line: str) -> None:
    if sums.requests >= MAX_REQUESTS:
        raise ConfigError(f"{line}: more than {MAX_REQUESTS:,} requests; give a sample of them")
    sums.add(input_tokens, output_tokens)


def _sums(path: Path, where: str) -> LengthSums:
    """The file's requests, a line at a time: JSONL when its first line starts with ``{``, else CSV."""
    sums, lines = LengthSums(), _lines(path, where)
    number, first = next(lines, (0, ""))
    if not first:
        return sums
    if first.lstrip().startswith("{"):
        _add_json(sums, number, first, where)
        for number, text in lines:
            _add_json(sums, number, text, where)
        return sums
    header = next(csv.reader([first]), [])
    columns = _csv_columns(header, where)
    if columns is None:
        columns = (0, 1)
        _add_csv(sums, number, first, columns, where)
    for number, text in lines:
        _add_csv(sums, number, text, columns, where)
    return sums


def read_lengths(path: Path) -> RequestLengths:
    """The requests listed in ``path`` (module docstring): one ConfigError line for a file that is not one."""
    where = f"--lengths {path}"
    sums = _sums(path, where)
    if not sums.requests:
        raise ConfigError(f"{where}: no request in it (give a line a request: input_tokens,output_tokens)")
    if sums.outputs <= 0:
        raise ConfigError(f"{where}: every answer is 0 tokens: nothing decodes (give the answers' lengths)")
    return RequestLengths(str(path), sums.requests, sums.input_mean, sums.output_mean, sums.decode_context(),
                          sums.reserved_room())
