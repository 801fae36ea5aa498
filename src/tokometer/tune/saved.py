"""A tune read back from the results store, typed and checked: `load_tune`.

The store keeps each tune as one JSON document (`tokometer.store.store.ResultStore.save_tune`) and reads it back
bounded and checked to be a JSON object (`ResultStore.tune_document`); here it becomes a `TuneRecord` and the
record is checked against its own declared types (`tokometer.store.typecheck`), as a run is. A document this
version cannot read (edited by hand, another schema, a wrong type anywhere) is one `StoreError` line naming the
tune and the field, never a traceback.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tokometer.store.typecheck import problem
from tokometer.tune.outcome import TuneRecord
from tokometer.tune.variants import MAX_VARIANTS
from tokometer.util.errors import StoreError

if TYPE_CHECKING:
    from tokometer.store import ResultStore

__all__ = ["load_tune", "read_tune"]


def load_tune(store: ResultStore, name: str) -> TuneRecord | None:
    """Tune ``name`` from ``store``, typed; None when the store has none of that name."""
    document = store.tune_document(name)
    if document is None:
        return None
    where = f"the results store {store.display_url}: tune {name!r}"
    fix = "(the store was changed outside tokometer: delete that tune or restore the store from a copy)"
    try:
        return read_tune(document)
    except ValueError as exc:
        raise StoreError(f"{where}: {exc} {fix}") from None


def read_tune(document: Mapping[str, Any]) -> TuneRecord:
    """A ``tokometer.tune/1`` document (from the store or a ``tune --json`` file) as a `TuneRecord`, checked against
    its declared types, its variants 1 to `MAX_VARIANTS` numbered in order; ValueError (one line, no place) if not."""
    rows = document.get("variants")
    if isinstance(rows, list) and not 0 < len(rows) <= MAX_VARIANTS:
        raise ValueError(f"variants: {len(rows)} of them, not 1 to {MAX_VARIANTS}")
    try:
        record = TuneRecord.from_json(document)
    except (ValueError, TypeError, KeyError, AttributeError, IndexError, OverflowError, ArithmeticError,
            RecursionError) as exc:
        raise ValueError(f"cannot be read ({type(exc).__name__}: {exc})"[:300]) from None
    if (found := problem(record, TuneRecord, "tune")) is not None:
        raise ValueError(found.removeprefix("tune."))
    if [v.index for v in record.variants] != list(range(len(record.variants))):
        raise ValueError("variants: not numbered 0, 1, 2, ... in order")
    return record
