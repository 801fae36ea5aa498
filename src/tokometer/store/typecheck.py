"""`problem`: whether a value read back from the store is what its declared type says, and if not, where.

The store's loader (`tokometer.store.load`) builds the typed run (`StoredRun`, its `StoredStep` s, their
`StepSummary`, `ClientHealth`, `LoadStep`, ...) from the JSON a store holds; those builders take what they find
(a value of the wrong type passes through). So the built objects are checked here against their own
annotations, field by field: a number where a number is declared (finite, within 64 bits), text, a mapping of
text keys, a list, a literal's values, another dataclass checked the same way; ``Any`` is any JSON value, no
deeper than `MAX_DEPTH`. The answer is the first problem with its path (``summary.ttft_ms.p50: not a
number``), or None.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Union

__all__ = ["MAX_DEPTH", "problem"]

MAX_DEPTH = 64
"""The deepest nesting of a JSON value read back from the store."""

_INT64 = 2**63


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def problem(value: Any, hint: Any, path: str, depth: int = 0) -> str | None:
    """The first place where ``value`` is not of type ``hint``, as ``path: what``; None when it is."""
    if depth > MAX_DEPTH:
        return f"{path}: nested deeper than {MAX_DEPTH} levels"
    origin = typing.get_origin(hint)
    if hint is Any:
        return _json_problem(value, path, depth)
    if origin in (Union, types.UnionType):
        return _union_problem(value, typing.get_args(hint), path, depth)
    if origin is Literal:
        return None if value in typing.get_args(hint) else f"{path}: not one of {list(typing.get_args(hint))}"
    if origin is not None:
        return _container_problem(value, origin, typing.get_args(hint), path, depth)
    return _plain_problem(value, hint, path, depth)


def _union_problem(value: Any, options: tuple[Any, ...], path: str, depth: int) -> str | None:
    if value is None and type(None) in options:
        return None
    found = [problem(value, option, path, depth) for option in options if option is not type(None)]
    return None if any(p is None for p in found) else (found[0] if found else f"{path}: null")


def _container_problem(value: Any, origin: Any, args: tuple[Any, ...], path: str, depth: int) -> str | None:
    if origin in (dict, Mapping) or (isinstance(origin, type) and issubclass(origin, Mapping)):
        if not isinstance(value, Mapping):
            return f"{path}: not an object"
        value_hint = args[1] if len(args) == 2 else Any
        for key, item in value.items():
            if not isinstance(key, str):
                return f"{path}: a key that is not text"
            if (found := problem(item, value_hint, f"{path}.{key}", depth + 1)) is not None:
                return found
        return None
    if origin in (list, tuple, Sequence):
        if not isinstance(value, (list, tuple)):
            return f"{path}: not a list"
        if origin is tuple and args and args[-1] is not Ellipsis:
            if len(args) != len(value):
                return f"{path}: not {len(args)} items"
            item_hints = list(args)
        else:
            item_hints = [args[0] if args else Any] * len(value)
        for i, (item, item_hint) in enumerate(zip(value, item_hints, strict=True)):
            if (found := problem(item, item_hint, f"{path}[{i}]", depth + 1)) is not None:
                return found
        return None
    return None if isinstance(value, origin) else f"{path}: not a {origin.__name__}"


def _plain_problem(value: Any, hint: Any, path: str, depth: int) -> str | None:
    if hint is type(None):
        return None if value is None else f"{path}: not null"
    if hint is bool:
        return None if isinstance(value, bool) else f"{path}: not true or false"
    if hint is int:
        ok = isinstance(value, int) and not isinstance(value, bool) and -_INT64 <= value < _INT64
        return None if ok else f"{path}: not a whole number within 64 bits"
    if hint is float:
        return None if _is_number(value) else f"{path}: not a finite number"
    if hint is str:
        return None if isinstance(value, str) else f"{path}: not text"
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        if not isinstance(value, hint):
            return f"{path}: not a {hint.__name__}"
        hints = _hints(hint)
        for f in dataclasses.fields(hint):
            if (found := problem(getattr(value, f.name), hints[f.name], f"{path}.{f.name}", depth + 1)) is not None:
                return found
        return None
    return None if not isinstance(hint, type) or isinstance(value, hint) else f"{path}: not a {hint.__name__}"


def _is_number(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return -_INT64 <= value < _INT64 if isinstance(value, int) else math.isfinite(value)


def _json_problem(value: Any, path: str, depth: int) -> str | None:
    """Whether ``value`` is a JSON value this version could have written (finite numbers, text keys), bounded."""
    if depth > MAX_DEPTH:
        return f"{path}: nested deeper than {MAX_DEPTH} levels"
    if value is None or isinstance(value, (bool, str)):
        return None
    if isinstance(value, (int, float)):
        return None if _is_number(value) else f"{path}: not a finite number within 64 bits"
    if isinstance(value, Mapping):
        return _container_problem(value, dict, (str, Any), path, depth)
    if isinstance(value, (list, tuple)):
        return _container_problem(value, list, (Any,), path, depth)
    return f"{path}: not a JSON value"
