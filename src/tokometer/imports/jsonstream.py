"""Imported files parsed as they are read, within a fixed memory budget: `ImportStream`.

The file's bytes come a window at a time (`tokometer.util.readlimit.iter_at_most`, at most
`MAX_IMPORT_BYTES` in all), so neither the whole file nor its decoded text is ever held. A JSON document
(`ImportStream.document`) is parsed container by container: what fits in the window is handed to the C
parser whole, a larger container is walked member by member, and every value parsed is charged to a budget
of `MAX_TREE_BYTES` (estimated as Python holds it), so a file of a hundred million ``[]`` costs the budget
and a one-line error, not the machine's memory. One string or number is at most `MAX_TOKEN_CHARS`, the
nesting at most `MAX_NESTING`. A file of JSON lines (`ImportStream.lines`) is read one line at a time, each
at most `MAX_LINE_BYTES`. Every error is an `ImportFormatError` naming the file and the line or byte.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Iterator, Mapping
from json.decoder import scanstring  # type: ignore[attr-defined]
from pathlib import Path
from typing import Any, Final

from tokometer.imports.source import (
    MAX_EVENTS,
    MAX_IMPORT_BYTES,
    MAX_NESTING,
    ImportFormatError,
    check_nesting,
)
from tokometer.util.readlimit import iter_at_most, split_lines

__all__ = ["MAX_LINE_BYTES", "MAX_TOKEN_CHARS", "MAX_TREE_BYTES", "WINDOW_BYTES", "ImportStream"]

MAX_TREE_BYTES: Final = 256 * 1024 * 1024
"""The memory a parsed document may take, estimated per value (a float 32 bytes, a list 56 + 8 a slot, a dict
64 + 40 a member, a string 49 + its length): a vLLM file of 10,000 requests takes ~90 MiB."""
MAX_TOKEN_CHARS: Final = 16 * 1024 * 1024
"""The longest one string or number may be (a generated text, a prompt)."""
MAX_LINE_BYTES: Final = 4 * 1024 * 1024
"""The longest line of a JSON-lines file (an AIPerf record of 100,000 chunk gaps is ~1 MiB)."""
WINDOW_BYTES: Final = 1 << 20
"""Bytes read at a time."""
_NUMBER: Final = re.compile(r"(-?(?:0|[1-9]\d*))(\.\d+)?([eE][-+]?\d+)?")
_NUMBERISH: Final = re.compile(r"[-+.\deE]+")
"""The characters a number may hold: where they run to the window's end, the number may go on."""
_CONSTANTS: Final = {"true": True, "false": False, "null": None, "NaN": float("nan"), "Infinity": float("inf"),
                     "-Infinity": float("-inf")}
_DECODER: Final = json.JSONDecoder()
_WHITESPACE: Final = re.compile(r"[ \t\n\r]*")


class ImportStream:
    """One imported file, read once, front to back."""

    def __init__(self, path: Path, *, window: int = WINDOW_BYTES, refusal: str = "not imported",
                 limit: int = MAX_IMPORT_BYTES) -> None:
        """``window``: bytes read at a time (small in tests, so that every value straddles a window's end);
        ``refusal``: what a file past a limit is told it was not (``not imported``); ``limit``: its most bytes."""
        self.path = path
        self._refusal = refusal
        self._chunks = iter_at_most(path, limit, refusal, ImportFormatError, chunk=window)
        self._head = b""
        self._source: Iterator[bytes] | None = None
        self._decoder = codecs.getincrementaldecoder("utf-8")()
        self._text = ""
        self._pos = 0
        self._dropped = 0
        self._eof = False
        self._cost = 0

    def head(self, size: int = 65536) -> bytes:
        """The file's first ``size`` bytes (or all of a shorter one), read without losing them."""
        while len(self._head) < size and (block := next(self._chunks, b"")):
            self._head += block
        return self._head[:size]

    def _bytes(self) -> Iterator[bytes]:
        if self._head:
            head, self._head = self._head, b""
            yield head
        yield from self._chunks

    # JSON lines

    def lines(self) -> Iterator[tuple[int, Any]]:
        """``(line number, parsed value)`` for each non-blank line, one at a time."""
        for number, raw in split_lines(self._bytes(), MAX_LINE_BYTES, self._too_long):
            yield from self._line(number, raw)

    def _too_long(self, number: int) -> ImportFormatError:
        return ImportFormatError(f"{self.path}: line {number} is longer than {MAX_LINE_BYTES // 2**20} MiB: "
                                 f"{self._refusal}")

    def _line(self, number: int, raw: bytes) -> Iterator[tuple[int, Any]]:
        if not raw.strip():
            return
        try:
            value = json.loads(raw)
        except RecursionError:
            raise ImportFormatError(f"{self.path}: line {number}: nested deeper than {MAX_NESTING} levels: "
                                    f"{self._refusal}") from None
        except (ValueError, UnicodeDecodeError) as exc:
            raise ImportFormatError(f"{self.path}: line {number}: not JSON ({exc})") from None
        check_nesting(value, f"{self.path}: line {number}")  # a line is at most MAX_LINE_BYTES: not charged
        yield number, value

    # one JSON document

    def document(self) -> Any:
        """The file's one JSON document; nothing but whitespace may follow it."""
        value = self._value(1)
        if self._peek():
            raise self._error("more after the JSON document ends")
        return value

    def _more(self) -> bool:
        """Read one more window into the text (dropping what was parsed); False at the end of the file."""
        if self._eof:
            return False
        if self._source is None:
            self._source = self._bytes()
        block = next(self._source, None)
        try:
            text = self._decoder.decode(block or b"", final=block is None)
        except UnicodeDecodeError:
            raise ImportFormatError(f"{self.path}: not UTF-8 text near byte {self._dropped + len(self._text)}: "
                                    "not JSON") from None
        self._dropped += self._pos
        self._text = self._text[self._pos:] + text
        self._pos = 0
        self._eof = block is None
        return True

    def _peek(self) -> str:
        """The next character that is not whitespace ('' at the end of the file), not consumed."""
        while True:
            text = self._text
            pos = self._pos = _WHITESPACE.match(text, self._pos).end()  # type: ignore[union-attr]
            if pos < len(text):
                return text[pos]
            if not self._more():
                return ""

    def _error(self, what: str, at: int | None = None) -> ImportFormatError:
        where = self._dropped + (self._pos if at is None else at)
        return ImportFormatError(f"{self.path}: not JSON: {what} at character {where}")

    def _value(self, depth: int) -> Any:
        char = self._peek()
        if not char:
            raise self._error("the file ends where a value should be")
        if char in "[{":
            if depth > MAX_NESTING:
                raise ImportFormatError(f"{self.path}: nested deeper than {MAX_NESTING} levels: {self._refusal}")
            return self._container(char, depth)
        if char == '"':
            return self._string()
        return self._scalar()

    def _container(self, char: str, depth: int) -> Any:
        """A list or object: whole by the C parser when the window holds it, else member by member."""
        try:
            value, end = _DECODER.raw_decode(self._text, self._pos)
        except RecursionError:
            raise ImportFormatError(f"{self.path}: nested deeper than {MAX_NESTING} levels: {self._refusal}") from None
        except json.JSONDecodeError as exc:
            if self._eof:  # else the window may end inside it: walked member by member, which finds any error
                raise self._error(exc.msg, exc.pos) from None
        except ValueError as exc:  # an integer of more digits than Python converts
            raise self._error(str(exc).split(";")[0]) from None
        else:
            self._pos = end
            self._charge(value, depth, f"character {self._dropped + end}")
            return value
        self._pos += 1
        return self._list(depth) if char == "[" else self._object(depth)

    def _list(self, depth: int) -> list[Any]:
        out: list[Any] = []
        self._cost += 56
        if self._peek() == "]":
            self._pos += 1
            return out
        while True:
            out.append(self._value(depth + 1))
            self._cost += 8
            if len(out) > MAX_EVENTS:
                raise ImportFormatError(f"{self.path}: a list of more than {MAX_EVENTS:,} entries: {self._refusal}")
            char = self._peek()
            self._pos += 1
            if char == "]":
                return out
            if not char:
                raise self._error("the file ends inside a list")
            if char != ",":
                raise self._error("',' or ']' expected", self._pos - 1)

    def _object(self, depth: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        self._cost += 64
        if self._peek() == "}":
            self._pos += 1
            return out
        while True:
            if self._peek() != '"':
                raise self._error("a member's name expected")
            key = self._string()
            if self._peek() != ":":
                raise self._error("':' expected")
            self._pos += 1
            out[key] = self._value(depth + 1)
            self._cost += 40
            char = self._peek()
            self._pos += 1
            if char == "}":
                return out
            if not char:
                raise self._error("the file ends inside an object")
            if char != ",":
                raise self._error("',' or '}' expected", self._pos - 1)

    def _string(self) -> str:
        while True:
            try:
                value, end = scanstring(self._text, self._pos + 1, True)
            except json.JSONDecodeError as exc:
                cut = exc.msg.startswith("Unterminated") or exc.pos >= len(self._text) - 8  # in an escape
                if self._eof or not cut:
                    raise self._error(exc.msg, exc.pos) from None
                self._grow()
                continue
            self._pos = end
            self._add(49 + len(value))
            return str(value)

    def _scalar(self) -> Any:
        while len(self._text) - self._pos < 16 and self._more():
            pass  # a literal or a short number whole in the window
        while (extent := _NUMBERISH.match(self._text, self._pos)) is not None and extent.end() == len(self._text) \
                and not self._eof:
            self._grow()  # the window ends inside the number
        match = _NUMBER.match(self._text, self._pos)
        if match is None:
            for name, constant in _CONSTANTS.items():
                if self._text.startswith(name, self._pos):
                    self._pos += len(name)
                    return constant
            raise self._error("a value expected")
        integer, fraction, exponent = match.groups()
        text = match.group(0)
        try:
            value: Any = float(text) if fraction or exponent else int(integer)
        except ValueError:
            raise self._error(f"a number of {len(text):,} digits") from None
        self._pos = match.end()
        self._add(32)
        return value

    def _grow(self) -> None:
        """One more window for a string or number the window ends inside (at most `MAX_TOKEN_CHARS` long)."""
        if len(self._text) - self._pos > MAX_TOKEN_CHARS:
            raise self._error(f"a string or number longer than {MAX_TOKEN_CHARS // 2**20} Mi characters")
        self._more()

    def _add(self, cost: int) -> None:
        self._cost += cost
        if self._cost > MAX_TREE_BYTES:
            raise ImportFormatError(f"{self.path} holds more values than an import takes "
                                    f"(~{MAX_TREE_BYTES // 2**20} MiB parsed): {self._refusal}")

    def _charge(self, value: Any, depth: int, where: str) -> None:
        """Charge ``value``, parsed whole, to the budget; ImportFormatError when it nests too deeply."""
        stack: list[tuple[Any, int]] = [(value, depth)]
        cost = 0
        while stack:
            item, level = stack.pop()
            if isinstance(item, Mapping):
                children: Any = item.values()
                cost += 64 + 40 * len(item)
            elif isinstance(item, list):
                children = item
                cost += 56 + 8 * len(item)
            else:
                cost += 49 + len(item) if isinstance(item, str) else 32
                continue
            if level > MAX_NESTING:
                raise ImportFormatError(f"{self.path}: {where}: nested deeper than {MAX_NESTING} levels: "
                                        f"{self._refusal}")
            stack.extend((child, level + 1) for child in children)
        self._add(cost)

