"""The results store keeps every record exactly, written from a background thread."""

from __future__ import annotations

from pathlib import Path

from tokometer.records import RequestRecord, ServerTiming
from tokometer.store import ResultStore


def test_records_round_trip(tmp_path: Path) -> None:
    store = ResultStore(f"sqlite:///{tmp_path / 'r.db'}")
    run_id = store.create_run(target="http://x/v1", api="openai-chat", model="m", spec={"a": 1}, engine=None,
                              host={"cpu": "c"}, label="l")
    store.start_step(run_id, 0, {"concurrency": 2})
    original = RequestRecord(index=3, due_ns=1, connect_ns=2, sent_ns=3, first_byte_ns=4, first_token_ns=5,
                             last_token_ns=9, end_ns=10, event_ns=[5, 7, 9], event_tokens=[1.0, 2.0, 0.5],
                             chunk_count=4, input_tokens=11, input_tokens_source="usage", output_tokens=4,
                             output_tokens_source="native", status=200, finish_reason="length",
                             server=ServerTiming(prompt_tokens=11, prompt_ms=1.5))
    failed = RequestRecord(index=4, sent_ns=3, end_ns=4, error="http_5xx", error_detail="HTTP 500: x", status=500)
    for record in (original, failed):
        store.append(run_id, record)
    store.finish_step(run_id, 0, {"requests_completed": 1}, {"saturated": False}, interrupted=False)
    store.finish_run(run_id, "completed")
    loaded = store.load_records(run_id)
    original.output_text = ""  # answers' text is not stored
    assert loaded == [original, failed]
    run = store.get_run(run_id)
    assert run is not None and run["status"] == "completed" and run["steps"][0]["load"] == {"concurrency": 2}
    assert [r["id"] for r in store.list_runs()] == [run_id]
    store.close()


def test_store_survives_reopen(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'nested' / 'r.db'}"
    store = ResultStore(url)
    run_id = store.create_run(target="t", api="a", model="m", spec={}, engine=None, host=None)
    store.append(run_id, RequestRecord(index=0, sent_ns=1, end_ns=2))
    store.close()
    again = ResultStore(url)
    assert len(again.load_records(run_id)) == 1
    again.close()
