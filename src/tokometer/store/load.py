"""Everything read back from the results store, bounded and validated in one place.

A store is input like any file: one written by an older tokometer, edited by hand, or crafted to break its
readers (wrong column types, NULLs, malformed or huge JSON, blobs of odd lengths, views in place of tables).
So every reader (`ResultStore.list_runs`, ``run``, ``load_records``; the recovery of killed runs) reads
through here:

- each column is selected bounded (`bounded_columns`: text to `MAX_TEXT_CHARS`, JSON to `MAX_JSON_CHARS`,
  blobs to `MAX_BLOB_BYTES`) and checked against the schema's type (`column_values`): a whole number within
  64 bits, a finite number, text that is UTF-8, true or false, bytes; NULL only where the schema allows it;
  JSON parsed here, of the kind the column holds (an object, a list) and no deeper than the type checker's
  bound;
- a step's rows and a run's requests are read to at most `MAX_STEPS_READ` and `MAX_REQUESTS_READ` (each
  statement also has the reader's deadline: `tokometer.store.database.READ_DEADLINE_S`);
- the typed run (`StoredRun`) and each request (`RequestRecord`) are built from the checked values and the run
  is then checked against its own declared types (`tokometer.store.typecheck`).

Whatever fails is one `StoreError` line naming the run and the field (``run 3: steps[0].summary.ttft_ms.p50:
not a finite number``), which every command shows as its error (exit status 2).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import SimpleNamespace
from typing import Any, Final

from sqlalchemy import JSON, Boolean, Column, Float, Integer, LargeBinary, String, Text, cast, func, type_coerce
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.types import NullType

from tokometer.records import RequestRecord
from tokometer.store.database import NotText
from tokometer.store.rows import RECORD_HINTS, SERVER_HINTS, row_record
from tokometer.store.runs import StoredRun
from tokometer.store.typecheck import problem
from tokometer.util.errors import StoreError

__all__ = ["MAX_BLOB_BYTES", "MAX_JSON_CHARS", "MAX_REQUESTS_READ", "MAX_STEPS_READ", "MAX_TEXT_CHARS",
           "BadRow", "BadStoredRun", "bad_run", "bounded_columns", "column_values", "record_of", "run_of"]

MAX_TEXT_CHARS: Final = 65_536
"""The longest text column read back (a target URL, a label, an error's detail)."""
MAX_JSON_CHARS: Final = 16 * 1024 * 1024
"""The longest JSON column read back (a step's summary with its time slices is well under 1 MiB)."""
MAX_BLOB_BYTES: Final = 16 * 1024 * 1024
"""The longest per-event array of one request (2 million events of 8 bytes)."""
MAX_STEPS_READ: Final = 100_000
"""The most steps of one run read back."""
MAX_REQUESTS_READ: Final = 2_000_000
"""The most requests of one run read back (each becomes a `RequestRecord` in memory)."""

_JSON_KINDS: Final[dict[str, Any]] = {
    "spec": dict[str, Any], "engine": dict[str, Any] | None, "host": dict[str, Any] | None,
    "warnings": list[str] | None, "load": dict[str, Any], "summary": dict[str, Any] | None,
    "health": dict[str, Any] | None, "server": dict[str, Any] | None, "gpu": list[dict[str, Any]] | None,
    "workload": dict[str, Any] | None, "document": dict[str, Any],
}
"""What each JSON column holds (NULL where the schema allows it)."""


class BadStoredRun(StoreError):
    """A run the store holds that this version cannot read: its one line names the run and the field."""


class BadRow(ValueError):
    """A stored value that is not what its column holds: ``field`` and ``what`` was wrong."""

    def __init__(self, field: str, what: str) -> None:
        super().__init__(f"{field}: {what}")
        self.field, self.what = field, what


def bad_run(where: str, run_id: Any, exc: BadRow) -> BadStoredRun:
    """The one line that says which run of the store at ``where`` holds what, and what to do."""
    return BadStoredRun(f"the results store {where}: run {run_id}: {exc} (the store was changed outside tokometer, "
                      f"or is not one it wrote: delete that run or restore the store from a copy)")


def bounded_columns(columns: Iterable[Column[Any]]) -> list[ColumnElement[Any]]:
    """``columns`` as a select's expressions, each read no further than its bound and without the database
    library's own conversions (they are `column_values`' to make)."""
    out: list[ColumnElement[Any]] = []
    for c in columns:
        if isinstance(c.type, JSON):
            out.append(type_coerce(func.substr(cast(c, Text), 1, MAX_JSON_CHARS + 1), NullType()).label(c.name))
        elif isinstance(c.type, LargeBinary):
            out.append(type_coerce(func.substr(c, 1, MAX_BLOB_BYTES + 1), NullType()).label(c.name))
        elif isinstance(c.type, (String, Text)):
            out.append(type_coerce(func.substr(cast(c, Text), 1, MAX_TEXT_CHARS + 1), NullType()).label(c.name))
        else:
            out.append(type_coerce(c, NullType()).label(c.name))
    return out


def column_values(row: Mapping[Any, Any], columns: Sequence[Column[Any]], prefix: str = "") -> dict[str, Any]:
    """The values of a row selected by `bounded_columns`, each checked against its column (see the module
    docstring); BadRow naming the first that is not."""
    return {c.name: _value(row[c.name], c, prefix + c.name) for c in columns}


def _value(value: Any, column: Column[Any], field: str) -> Any:
    if value is None:
        if not column.nullable:
            raise BadRow(field, "missing (NULL)")
        return None
    kind = column.type
    if isinstance(kind, JSON):
        return _json(value, field)
    if isinstance(kind, LargeBinary):
        if not isinstance(value, bytes) or len(value) > MAX_BLOB_BYTES or len(value) % 8:
            raise BadRow(field, f"not an array of 8-byte values of at most {MAX_BLOB_BYTES} bytes")
        return value
    if isinstance(kind, (String, Text)):
        if not isinstance(value, str) or isinstance(value, NotText) or len(value) > MAX_TEXT_CHARS:
            raise BadRow(field, f"not UTF-8 text of at most {MAX_TEXT_CHARS} characters")
        return value
    if isinstance(kind, Boolean):
        if value not in (0, 1) or isinstance(value, float):
            raise BadRow(field, "not true or false")
        return bool(value)
    hint = float if isinstance(kind, Float) else int if isinstance(kind, Integer) else Any
    if (found := problem(value, hint, field)) is not None:
        raise BadRow(*found.split(": ", 1))
    return float(value) if hint is float else value


def _json(value: Any, field: str) -> Any:
    """A JSON column's text parsed, of the kind `_JSON_KINDS` says (NULL inside the JSON too where allowed)."""
    if isinstance(value, (bytes, NotText)) or not isinstance(value, str):
        raise BadRow(field, "not JSON text")
    if len(value) > MAX_JSON_CHARS:
        raise BadRow(field, f"JSON longer than {MAX_JSON_CHARS // (1024 * 1024)} MiB")
    try:
        parsed = json.loads(value)
    except (ValueError, RecursionError):
        raise BadRow(field, "not valid JSON") from None
    name = field.rsplit(".", 1)[-1]
    if (found := problem(parsed, _JSON_KINDS.get(name, Any), field)) is not None:
        raise BadRow(*found.split(": ", 1))
    return parsed


def run_of(head: Mapping[str, Any], steps: Sequence[Mapping[str, Any]]) -> StoredRun:
    """The typed run of checked values (``head``: the run's row; ``steps``: its steps' rows, in order), itself
    checked against its declared types; BadRow naming the field otherwise."""
    data = {**head, "steps": list(steps)}
    built = _built(lambda: StoredRun.from_json(data), "the run", data)
    if (found := problem(built, StoredRun, "run")) is not None:
        field, _, what = found.partition(": ")
        raise BadRow(field.removeprefix("run."), what)
    return built


def _built(build: Callable[[], StoredRun], field: str, data: Mapping[str, Any]) -> StoredRun:
    """``build()``; a value its builder cannot take is a BadRow naming the part of ``data`` it is in."""
    try:
        return build()
    except (ValueError, TypeError, KeyError, AttributeError, IndexError, OverflowError, ArithmeticError) as exc:
        raise BadRow(_where_it_failed(data), f"cannot be read ({type(exc).__name__}: {exc})"[:300]) from None


def _where_it_failed(data: Mapping[str, Any]) -> str:
    """Which step part of a run its builder could not read (found by building each step alone)."""
    from tokometer.store.runs import StoredStep

    for i, step in enumerate(data.get("steps") or ()):
        for name in ("load", "summary", "health"):
            try:
                StoredStep.from_json({"step": step["step"], "started_at": step["started_at"], name: step.get(name)})
            except (ValueError, TypeError, KeyError, AttributeError, IndexError, OverflowError, ArithmeticError):
                return f"steps[{i}].{name}"
    return "engine" if data.get("engine") else "the run"


def record_of(values: Mapping[str, Any]) -> RequestRecord:
    """A request of checked values (`column_values` of a `requests` row); BadRow for what its record cannot
    hold (per-event arrays of different lengths, non-finite token counts, a malformed server timing)."""
    field = f"requests[step {values.get('step')}, index {values.get('idx')}]"
    event_ns, event_tokens = values.get("event_ns") or b"", values.get("event_tokens") or b""
    if len(event_ns) != len(event_tokens):
        raise BadRow(f"{field}.event_tokens", "not as many values as event_ns")
    _check_items(values.get("server"), SERVER_HINTS, f"{field}.server")
    _check_items(values.get("workload"), RECORD_HINTS, f"{field}.workload")
    try:
        record = row_record(SimpleNamespace(**values))
    except (TypeError, ValueError) as exc:
        raise BadRow(field, f"cannot be read ({exc})"[:300]) from None
    if not math.isfinite(math.fsum(record.event_tokens)):
        raise BadRow(f"{field}.event_tokens", "not finite numbers")
    for name in _CHECKED_FIELDS:
        if (found := problem(getattr(record, name), RECORD_HINTS[name], f"{field}.{name}")) is not None:
            raise BadRow(*found.split(": ", 1))
    return record


def _check_items(saved: Mapping[str, Any] | None, hints: Mapping[str, Any], field: str) -> None:
    """Each item of a saved object whose name ``hints`` declares is of that type (others are dropped on
    reading); BadRow otherwise."""
    for name, value in (saved or {}).items():
        if name in hints and (found := problem(value, hints[name], f"{field}.{name}")) is not None:
            raise BadRow(*found.split(": ", 1))


_PLAIN: Final = (int, str, bool, float, int | None, str | None, bool | None, float | None)
_CHECKED_FIELDS: Final = tuple(name for name, hint in RECORD_HINTS.items()
                               if hint not in _PLAIN and name not in ("event_ns", "event_tokens"))
"""The record's fields whose type says more than its column's (a category's names): checked on each record."""
