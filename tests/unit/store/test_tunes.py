"""Tunes in the results store, on SQLite and PostgreSQL: one document per name, replaced as the tune goes on, read
back bounded and type-checked (a document changed outside tokometer is one line, never a traceback)."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import create_engine, text

from tokometer.store import ResultStore
from tokometer.tune.outcome import Startup, TuneRecord, Variant, VariantOutcome
from tokometer.tune.saved import load_tune
from tokometer.util.errors import StoreError


def _record(name: str = "t1", outcomes: int = 1) -> TuneRecord:
    variants = (Variant(0, "baseline", {"parallel": "1"}),
                Variant(1, "parallel=2", {"parallel": "2"}, ("parallel",)))
    tried = (VariantOutcome(variants[0], "finished", run_id=3, startup=Startup(1.5, 0.5),
                            command_line=("llama-server", "--parallel", "1")),
             VariantOutcome(variants[1], "failed to start", engine_last_words="out of memory", error="no start"))
    return TuneRecord(name, "llamacpp", "abc", 7, {"requests": 8, "concurrency": [1, 2]}, variants,
                      tried[:outcomes], started_at="2026-12-03T10:00:00.000+00:00")


def _sql(url: str, sql: str, **params: object) -> None:
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(text(sql), params)
    finally:
        engine.dispose()


def test_a_tune_is_saved_replaced_and_read_back(store_url: str) -> None:
    store = ResultStore(store_url)
    assert store.tune_names() == [] and load_tune(store, "t1") is None
    store.save_tune(_record(outcomes=1))
    store.save_tune(_record(outcomes=2))  # after the next variant: replaced, not added
    store.save_tune(_record("t2"))
    store.close()
    reader = ResultStore(store_url, read_only=True)
    try:
        assert sorted(reader.tune_names()) == ["t1", "t2"]
        assert load_tune(reader, "t1") == _record(outcomes=2)
        assert load_tune(reader, "missing") is None
    finally:
        reader.close()


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d["variants"][0].update(status="maybe"), "variants.*status|outcomes\\[0\\].status: not one of"),
    (lambda d: d["variants"][1].update(engine_last_words=5), "engine_last_words: not text"),
    (lambda d: d.update(seed="seven"), "cannot be read \\(ValueError"),
    (lambda d: d.update(schema="tokometer.tune/9"), "not a tokometer.tune/1 document"),
    (lambda d: d["variants"][0].update(warm_startup_s="fast"), "startup.second_s: not a finite number"),
    (lambda d: d["variants"].clear(), "variants: 0 of them"),
    (lambda d: d["variants"][1].update(index=5), "not numbered 0, 1, 2"),
])
def test_a_document_changed_outside_tokometer_is_one_line(store_url: str, change: object, message: str) -> None:
    store = ResultStore(store_url)
    try:
        document = _record(outcomes=2).to_json()
        change(document)  # type: ignore[operator]
        _sql(store_url, "INSERT INTO tunes (name, document, updated_at) VALUES ('bad', :d, 't')",
             d=json.dumps(document))
        with pytest.raises(StoreError, match=message) as caught:
            load_tune(store, "bad")
        assert "\n" not in str(caught.value) and "tune 'bad'" in str(caught.value)
    finally:
        store.close()


def test_a_document_that_is_not_an_object_is_one_line(store_url: str) -> None:
    store = ResultStore(store_url)
    try:
        _sql(store_url, "INSERT INTO tunes (name, document, updated_at) VALUES ('bad', :d, 't')", d="[1, 2]")
        with pytest.raises(StoreError, match="tune 'bad': document: not an object"):
            load_tune(store, "bad")
    finally:
        store.close()
