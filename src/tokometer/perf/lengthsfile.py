"""A file of requests' lengths, one request a line (``estimate --lengths FILE``): their means and the tokens a
full engine's decoding sequences hold on average (`tokometer.perf.lengths`).

Two shapes, told apart by the first character that is not a space:

- CSV: two columns, a prompt's tokens and its answer's; a header line names them (``input_tokens,output_tokens``,
  or MLPerf's digests' ``input_length,output_length``: `INPUT_NAMES`, `OUTPUT_NAMES`, in either order, other
  columns ignored); a first line with no letter in it is a request, the prompt's column first.
- JSONL (a line starting with ``{``): an object a line with one of `INPUT_NAMES` and one of `OUTPUT_NAMES`.

The file is the user's and may be anything: it is read within `MAX_LENGTHS_BYTES` (and, from a pipe, within
`tokometer.util.readlimit.READ_DEADLINE_S`), at most `MAX_REQUESTS` requests; each length a whole number from 0 to
`tokometer.util.limits.MAX_TOKENS`; a bad line is one error naming its number. Blank lines are skipped.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from tokometer.perf.lengths import LengthSums
from tokometer.util.errors import ConfigError
from tokometer.util.jsontext import loads_object
from tokometer.util.limits import MAX_TOKENS
from tokometer.util.readlimit import read_text
from tokometer.util.shown import clipped

__all__ = ["INPUT_NAMES", "MAX_LENGTHS_BYTES", "MAX_REQUESTS", "OUTPUT_NAMES", "RequestLengths", "read_lengths"]

MAX_LENGTHS_BYTES: Final = 256 << 20
"""The largest lengths file read (ten million requests of two six-digit numbers take about 140 MiB)."""
MAX_REQUESTS: Final = 10_000_000
"""The most requests a lengths file may list."""
INPUT_NAMES: Final = ("input_tokens", "input_length", "prompt_tokens", "input_len", "isl")
"""Names a prompt's length goes by (a CSV header's column, a JSONL object's key)."""
OUTPUT_NAMES: Final = ("output_tokens", "output_length", "completion_tokens", "output_len", "osl")
"""Names an answer's length goes by."""


@dataclass(frozen=True)
class RequestLengths:
    """The requests of a lengths file: how many, their means and the tokens a decoding sequence holds on average."""

    source: str
    requests: int
    input_mean: float
    output_mean: float
    decode_context: float

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
                "output_mean": self.output_mean, "decode_context_tokens": self.decode_context}


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


def _csv_rows(text: str, where: str) -> tuple[list[tuple[int, list[str]]], int, int]:
    """The data rows (line number, fields) and the prompt's and answer's columns."""
    rows = [(n, fields) for n, fields in enumerate(csv.reader(io.StringIO(text)), 1) if any(f.strip() for f in fields)]
    if not rows:
        raise ConfigError(f"{where}: no request in it (give a line a request: input_tokens,output_tokens)")
    first = rows[0][1]
    if not any(c.isalpha() for field in first for c in field):  # no names in it: a request, the prompt first
        return rows, 0, 1
    i, o = _named(first, INPUT_NAMES), _named(first, OUTPUT_NAMES)
    if i is None or o is None:
        raise ConfigError(f"{where}: its header {clipped(','.join(first))} names no "
                          f"{'prompt' if i is None else 'answer'} column (one of "
                          f"{', '.join(INPUT_NAMES if i is None else OUTPUT_NAMES)})")
    return rows[1:], i, o


def _add_csv(sums: LengthSums, text: str, where: str) -> None:
    rows, i, o = _csv_rows(text, where)
    for number, fields in rows:
        line = f"{where} line {number}"
        if len(fields) <= max(i, o):
            raise ConfigError(f"{line}: {len(fields)} column(s), the lengths are in columns {i + 1} and {o + 1}")
        _add(sums, _length(fields[i], line, "prompt"), _length(fields[o], line, "answer"), line)


def _add_jsonl(sums: LengthSums, text: str, where: str) -> None:
    for number, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        line = f"{where} line {number}"
        try:
            obj = loads_object(raw, "the line")
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


def read_lengths(path: Path) -> RequestLengths:
    """The requests listed in ``path`` (module docstring): one ConfigError line for a file that is not one."""
    where = f"--lengths {path}"
    text = read_text(path, MAX_LENGTHS_BYTES, "give a sample of the requests", where)
    sums = LengthSums()
    (_add_jsonl if text.lstrip().startswith("{") else _add_csv)(sums, text, where)
    if not sums.requests:
        raise ConfigError(f"{where}: no request in it (give a line a request: input_tokens,output_tokens)")
    if sums.outputs <= 0:
        raise ConfigError(f"{where}: every answer is 0 tokens: nothing decodes (give the answers' lengths)")
    return RequestLengths(str(path), sums.requests, sums.input_mean, sums.output_mean, sums.decode_context())
