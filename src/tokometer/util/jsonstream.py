"""JSON files parsed as they are read, within a fixed memory budget: `JsonStream`, for every reader of a
file a user hands over whole (another tool's results, a ``bench --json`` file, a dataset).

The file's bytes come a window at a time (`tokometer.util.readlimit.iter_at_most`, at most
`JsonLimits.file_bytes` in all), so neither the whole file nor its decoded text is ever held. A JSON document
(`JsonStream.document`) is parsed container by container: what fits in the window is handed to the C
parser whole, a larger container is walked member by member, and every value parsed is charged to a budget
of `JsonLimits.tree_bytes` (estimated as Python holds it), so a file of a hundred million ``[]`` costs the
budget and a one-line error, not the machine's memory. One string or number is at most
`JsonLimits.token_chars`, the nesting at most `JsonLimits.nesting`, a list at most `JsonLimits.entries`
long. A document that is one list can be read an entry at a time (`JsonStream.items`), a file of JSON lines
a line at a time (`JsonStream.lines`, each at most `JsonLimits.line_bytes`). Every error is one line naming
the file and the line or character, of the caller's error type.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from json.decoder import scanstring  # type: ignore[attr-defined]
from pathlib import Path
from typing import Any, Final

from tokometer.util.errors import TokometerError
from tokometer.util.readlimit import iter_at_most, split_lines, without_bom

__all__ = ["WINDOW_BYTES", "JsonLimits", "JsonStream"]

WINDOW_BYTES: Final = 1 << 20
"""Bytes read at a time."""
_NUMBER: Final = re.compile(r"(-?(?:0|[1-9]\d*))(\.\d+)?([eE][-+]?\d+)?")
_NUMBERISH: Final = re.compile(r"[-+.\deE]+")
"""The characters a number may hold: where they run to the window's end, the number may go on."""
_CONSTANTS: Final = {"true": True, "false": False, "null": None, "NaN": float("nan"), "Infinity": float("inf"),
                     "-Infinity": float("-inf")}
_DECODER: Final = json.JSONDecoder()
_WHITESPACE: Final = re.compile(r"[ \t\n\r]*")


@dataclass(frozen=True)
class JsonLimits:
    """What one file may hold, and what it is told when it holds more."""

    file_bytes: int
    """The most bytes read."""
    tree_bytes: int
    """The most memory a parsed document (or one entry of `JsonStream.items`) may take, estimated per value (a
    float 32 bytes, a list 56 + 8 a slot, a dict 64 + 40 a member, a string 49 + its length)."""
    token_chars: int
    """The longest one string or number may be."""
    line_bytes: int
    """The longest line of a JSON-lines file."""
    nesting: int
    """The deepest nesting of lists and objects."""
    entries: int
    """The longest list."""
    refusal: str
    """What a file past a limit is told it was not (``not imported``)."""
    what: str = ""
    """What the file is, for messages (``dataset``)."""


class JsonStream:
    """One JSON (or JSON-lines) file, read once, front to back, within `JsonLimits`."""

    def __init__(self, path: Path, limits: JsonLimits, error: type[TokometerError], *,
                 window: int = WINDOW_BYTES) -> None:
        """``error``: the one-line error raised (naming ``path``); ``window``: bytes read at a time (small in
        tests, so that every value straddles a window's end)."""
        self.path = path
        self._limits = limits
        self._fail = error
        self._refusal = limits.refusal
        self._chunks = without_bom(iter_at_most(path, limits.file_bytes, limits.refusal, error, chunk=window,
                                                what=limits.what))
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
        for number, raw in split_lines(self._bytes(), self._limits.line_bytes, self._too_long):
            yield from self._line(number, raw)

    def _too_long(self, number: int) -> TokometerError:
        return self._fail(f"{self.path}: line {number} is longer than {self._limits.line_bytes // 2**20} MiB: "
                                 f"{self._refusal}")

    def _line(self, number: int, raw: bytes) -> Iterator[tuple[int, Any]]:
        if not raw.strip():
            return
        try:
            value = json.loads(raw)
        except RecursionError:
            raise self._fail(f"{self.path}: line {number}: nested deeper than {self._limits.nesting} levels: "
                                    f"{self._refusal}") from None
        except (ValueError, UnicodeDecodeError) as exc:
            raise self._fail(f"{self.path}: line {number}: not JSON ({exc})") from None
        self._cost_of(value, 1, f"line {number}")  # nesting checked; a line is at most line_bytes: not charged
        yield number, value

    # one JSON document

    def document(self) -> Any:
        """The file's one JSON document; nothing but whitespace may follow it."""
        value = self._value(1)
        if self._peek():
            raise self._error("more after the JSON document ends")
        return value

    def items(self) -> Iterator[tuple[int, Any]]:
        """``(index, value)`` of each entry of a document that is one list, one at a time: the budget is each
        entry's, for a reader that keeps only what it makes of each."""
        if self._peek() != "[":
            raise self._error("a list expected")
        self._pos += 1
        index = 0
        while self._peek() not in ("]", ""):
            if index:
                if self._peek() != ",":
                    raise self._error("',' or ']' expected")
                self._pos += 1
            self._cost = 0
            yield index, self._value(2)
            index += 1
        if not self._peek():
            raise self._error("the file ends inside a list")
        self._pos += 1
        if self._peek():
            raise self._error("more after the JSON document ends")

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
            raise self._fail(f"{self.path}: not UTF-8 text near byte {self._dropped + len(self._text)}: "
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

    def _error(self, what: str, at: int | None = None) -> TokometerError:
        where = self._dropped + (self._pos if at is None else at)
        return self._fail(f"{self.path}: not JSON: {what} at character {where}")

    def _value(self, depth: int) -> Any:
        char = self._peek()
        if not char:
            raise self._error("the file ends where a value should be")
        if char in "[{":
            if depth > self._limits.nesting:
                raise self._fail(f"{self.path}: nested deeper than {self._limits.nesting} levels: {self._refusal}")
            return self._container(char, depth)
        if char == '"':
            return self._string()
        return self._scalar()

    def _container(self, char: str, depth: int) -> Any:
        """A list or object: whole by the C parser when the window holds it, else member by member."""
        try:
            value, end = _DECODER.raw_decode(self._text, self._pos)
        except RecursionError:
            raise self._fail(f"{self.path}: nested deeper than {self._limits.nesting} levels: "
                             f"{self._refusal}") from None
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
            if len(out) > self._limits.entries:
                raise self._fail(f"{self.path}: a list of more than {self._limits.entries:,} entries: {self._refusal}")
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
        """One more window for a string or number the window ends inside (at most `self._limits.token_chars` long)."""
        if len(self._text) - self._pos > self._limits.token_chars:
            raise self._error(f"a string or number longer than {self._limits.token_chars // 2**20} Mi characters")
        self._more()

    def _add(self, cost: int) -> None:
        self._cost += cost
        if self._cost > self._limits.tree_bytes:
            raise self._fail(f"{self.path} holds more values than an import takes "
                                    f"(~{self._limits.tree_bytes // 2**20} MiB parsed): {self._refusal}")

    def _charge(self, value: Any, depth: int, where: str) -> None:
        """Charge ``value``, parsed whole, to the budget."""
        self._add(self._cost_of(value, depth, where))

    def _cost_of(self, value: Any, depth: int, where: str) -> int:
        """What ``value`` costs the budget; the error when it nests too deeply (``depth``: where it starts)."""
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
            if level > self._limits.nesting:
                raise self._fail(f"{self.path}: {where}: nested deeper than {self._limits.nesting} levels: "
                                 f"{self._refusal}")
            stack.extend((child, level + 1) for child in children)
        return cost
