"""The shape of a request body, declared once per protocol and checked at the inbound boundary: `check`.

Each protocol's package declares what its clients' requests look like (``tokometer.protocols.<name>.request``:
a `Shape` per endpoint) out of the few pieces here: `Obj` (named fields, any others left to the engine),
`Arr` and `Map` (with a count limit), `Str`, `Int`, `Num`, `Bool`, `OneOf`, `Anything`. The count and size
limits are named, not written into the shapes: their values are the server's `RequestLimits` (one table,
`tokometer.inbound.request_limits`), so a gateway configured for more messages takes more everywhere.

`check` walks only the fields a shape names, in time linear in what it visits, without recursion deeper
than the shape, and raises `FieldError` at the first field that is wrong: its path in the body
(``messages[3].content[0].text``) and what it must be, or how many it holds and the most the server
takes. Its ``code`` is ``invalid_type`` or, for a limit, ``too_many_<what>`` / ``string_too_long``: what
the client's error shape carries. Every field may be null (absent), as OpenAI's reference reads, unless an
`Obj` lists it as ``required``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tokometer.inbound.request_limits import RequestLimits

__all__ = ["Anything", "Arr", "Bool", "FieldError", "Int", "Map", "Num", "Obj", "OneOf", "Shape", "Str", "check"]


class FieldError(ValueError):
    """A field of the wrong type, or over a limit: the message names it; ``code`` is for the error body."""

    def __init__(self, message: str, code: str = "invalid_type") -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class Anything:
    """Any JSON value (its size and depth are the body's limits)."""

    says: str = "any value"

    def visit(self, value: Any, where: str, limits: RequestLimits) -> None:
        """Accept."""


@dataclass(frozen=True, slots=True)
class Str:
    """A string of at most the ``most`` limit's characters (None: the body's size), one of ``options`` if given."""

    most: str | None = None
    options: tuple[str, ...] | None = None

    @property
    def says(self) -> str:
        return "one of " + ", ".join(repr(o) for o in self.options) if self.options else "a string"

    def visit(self, value: Any, where: str, limits: RequestLimits) -> None:
        if not isinstance(value, str):
            raise _wrong(where, self.says)
        if self.options is not None and value not in self.options:
            raise _wrong(where, self.says)
        if self.most is not None and len(value) > (most := _limit(limits, self.most)):
            raise FieldError(f"'{where}' has {len(value):,} characters, more than this server takes ({most:,}): "
                             "send a shorter one", "string_too_long")


@dataclass(frozen=True, slots=True)
class Int:
    """A whole number from ``low`` to ``high``."""

    low: int
    high: int

    @property
    def says(self) -> str:
        return f"a whole number from {self.low:,} to {self.high:,}"

    def visit(self, value: Any, where: str, limits: RequestLimits) -> None:
        if not isinstance(value, int) or isinstance(value, bool) or not self.low <= value <= self.high:
            raise _wrong(where, self.says)


@dataclass(frozen=True, slots=True)
class Num:
    """A finite number from ``low`` to ``high``."""

    low: float = -math.inf
    high: float = math.inf

    @property
    def says(self) -> str:
        if math.isinf(self.low) and math.isinf(self.high):
            return "a finite number"
        return f"a number from {self.low:g} to {self.high:g}"

    def visit(self, value: Any, where: str, limits: RequestLimits) -> None:
        if (not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value)
                or not self.low <= value <= self.high):
            raise _wrong(where, self.says)


@dataclass(frozen=True, slots=True)
class Bool:
    """True or false."""

    says: str = "a boolean (true or false)"

    def visit(self, value: Any, where: str, limits: RequestLimits) -> None:
        if not isinstance(value, bool):
            raise _wrong(where, self.says)


@dataclass(frozen=True, slots=True)
class Arr:
    """An array of ``item``s: at most the ``most`` limit's count (None: the body's size), at least ``least``."""

    item: Shape
    most: str | None = None
    least: int = 0
    says: str = "an array"

    def visit(self, value: Any, where: str, limits: RequestLimits) -> None:
        if not isinstance(value, list):
            raise _wrong(where, self.says)
        if len(value) < self.least:
            raise _wrong(where, f"{self.says} of at least {self.least}")
        _count(where, len(value), self.most, limits)
        item = self.item
        if isinstance(item, Anything):
            return
        if isinstance(item, Int):  # token ids: a million of them in C-speed passes, not a call each
            whole = all(type(v) is int for v in value)
            if value and not (whole and item.low <= min(value) and max(value) <= item.high):
                raise _wrong(where, f"{self.says} of whole numbers from {item.low:,} to {item.high:,}")
            return
        for index, element in enumerate(value):
            item.visit(element, f"{where}[{index}]", limits)


@dataclass(frozen=True, slots=True)
class Map:
    """An object of any keys (each a ``key``) to ``value``s, at most the ``most`` limit's count."""

    value: Shape
    most: str
    key: Str = Str()
    says: str = "an object"

    def visit(self, value: Any, where: str, limits: RequestLimits) -> None:
        if not isinstance(value, dict):
            raise _wrong(where, self.says)
        _count(where, len(value), self.most, limits)
        for name, element in value.items():
            self.key.visit(name, f"{where} key", limits)
            self.value.visit(element, f"{where}.{name}", limits)


@dataclass(frozen=True, slots=True)
class Obj:
    """An object whose named ``fields`` have their shapes (other fields are anything: left to the engine)."""

    fields: Mapping[str, Shape] = field(default_factory=dict)
    required: tuple[str, ...] = ()
    says: str = "an object"

    def visit(self, value: Any, where: str, limits: RequestLimits) -> None:
        if not isinstance(value, dict):
            raise _wrong(where, self.says)
        for name in self.required:
            if value.get(name) is None:
                raise FieldError(f"'{_join(where, name)}' is required")
        for name, shape in self.fields.items():
            element = value.get(name)
            if element is not None:
                shape.visit(element, _join(where, name), limits)


@dataclass(frozen=True, slots=True)
class OneOf:
    """The first of ``options`` a value fits (tried by kind: a value that fits none names ``says``)."""

    options: tuple[Shape, ...]
    says: str

    def visit(self, value: Any, where: str, limits: RequestLimits) -> None:
        errors: list[FieldError] = []
        for option in self.options:
            try:
                option.visit(value, where, limits)
            except FieldError as exc:
                if exc.code != "invalid_type":
                    raise  # the value is this option's kind, and over one of its limits
                if _fits_kind(option, value):
                    errors.append(exc)
                continue
            return
        if len(errors) == 1:
            raise errors[0]  # the one option of the value's kind: what is wrong inside it
        raise _wrong(where, self.says)


Shape = Anything | Str | Int | Num | Bool | Arr | Map | Obj | OneOf
"""A piece of a request's shape."""


def check(shape: Shape, body: Any, limits: RequestLimits) -> None:
    """Raise `FieldError` at the first field of ``body`` that does not fit ``shape`` within ``limits``."""
    shape.visit(body, "", limits)


def _join(where: str, name: str) -> str:
    return f"{where}.{name}" if where else name


def _wrong(where: str, says: str) -> FieldError:
    return FieldError(f"'{where or 'the body'}' must be {says}")


_KINDS: dict[type, tuple[type, ...]] = {Str: (str,), Int: (int,), Num: (int, float), Bool: (bool,), Arr: (list,),
                                        Map: (dict,), Obj: (dict,)}


def _fits_kind(shape: Shape, value: Any) -> bool:
    """``value`` is of the JSON kind ``shape`` takes (a boolean is no number)."""
    if isinstance(shape, OneOf):
        return any(_fits_kind(option, value) for option in shape.options)
    kinds = _KINDS.get(type(shape))
    if kinds is None:
        return True
    return isinstance(value, kinds) and (isinstance(shape, Bool) or not isinstance(value, bool))


def _limit(limits: RequestLimits, name: str) -> int:
    most: int = getattr(limits, name)
    return most


def _count(where: str, count: int, most_name: str | None, limits: RequestLimits) -> None:
    if most_name is not None and count > (most := _limit(limits, most_name)):
        what = most_name.removeprefix("max_")
        raise FieldError(f"'{where}' has {count:,} entries, more than this server takes ({most:,}, {most_name}): "
                         "send fewer", f"too_many_{what}")
