"""What the hardware allows for a tune variant's run: ``estimate --run``'s judgement of a run saved in a real store
(SQLite in a temporary directory, written as ``bench`` writes it), with the roofline's decode speed beside each
step's measured one, and a reason instead of an exception where the run does not say what ran on what."""

from __future__ import annotations

import struct
from collections.abc import Mapping
from pathlib import Path

import pytest

from tests.unit.perf.test_perf_models import _gguf_string, _write_gguf
from tokometer.bundled import bundled_model_path
from tokometer.perf.questions import EstimateSpec, judge_run
from tokometer.perf.roofline import decode_step_s
from tokometer.records import RequestRecord, ServerTiming
from tokometer.store import ResultStore, StoredRun
from tokometer.tune.hardware import allowed_for
from tokometer.util.gguf import FILE_TYPES

MS = 1_000_000
HW_TOML = ('[[hardware]]\nname = "box"\nkind = "cpu"\nmemory_gb = 16\nbandwidth_gbs = 100\n'
           'bf16_tflops_dense = 1\nsource = "made up"\n')


def _records(step: int, concurrency: int) -> list[RequestRecord]:
    """Six requests of 100 prompt tokens and 11 answer tokens, ``concurrency`` at a time, 10 ms a token."""
    out = []
    for i in range(6):
        sent = (i // concurrency) * 500 * MS
        first, last = sent + 100 * MS, sent + 200 * MS
        out.append(RequestRecord(
            index=i, step=step, sent_ns=sent, first_token_ns=first, last_token_ns=last, end_ns=last + MS,
            event_ns=[first + k * 10 * MS for k in range(11)], event_tokens=[1.0] * 11, input_tokens=100,
            output_tokens=11, status=200, finish_reason="length",
            server=ServerTiming(prompt_tokens=100, prompt_ms=80, decode_tokens=10, decode_ms=100)))
    return out


def _saved_run(tmp_path: Path, engine: Mapping[str, object] | None,
               name: str = "runs.db") -> tuple[Path, StoredRun, list[RequestRecord]]:
    """A two-step run (concurrency 1, then 2) saved in a store of its own, read back as `tokometer.tune` reads it."""
    db = tmp_path / name
    store = ResultStore(f"sqlite:///{db}")
    try:
        run_id = store.create_run(target="http://127.0.0.1:1/v1", api="openai-completions", model="m", spec={},
                                  engine=dict(engine) if engine is not None else None, host=None)
        for step, concurrency in enumerate((1, 2)):
            store.start_step(run_id, step, {"concurrency": concurrency})
            for record in _records(step, concurrency):
                store.append(run_id, record)
            store.finish_step(run_id, step, {}, {"saturated": False}, False)
        store.finish_run(run_id, "completed")
        run = store.run(run_id)
        records = store.load_records(run_id)
    finally:
        store.close()
    assert run is not None
    return db, run, records


def _box(tmp_path: Path) -> EstimateSpec:
    hw = tmp_path / "hw.toml"
    hw.write_text(HW_TOML)
    return EstimateSpec(hardware="box", hardware_file=hw)


def test_an_embedded_engine_run_gets_estimates_figures_and_the_roofline_beside_them(tmp_path: Path) -> None:
    engine = {"engine": "llama.cpp", "model_file": str(bundled_model_path()), "argv": ["llama-server", "-ctk", "q8_0"]}
    db, run, records = _saved_run(tmp_path, engine)
    spec = _box(tmp_path)
    allowed = allowed_for(run, records, spec)
    judged = judge_run(spec, run.id, str(db))  # what `estimate --run N --hardware box` works out
    assert "reason" not in allowed
    assert (allowed["model"], allowed["hardware"]) == ("Gemma 3 270m", "box")
    assert (allowed["weight_dtype"], allowed["kv_dtype"]) == ("Q4_K_M", "q8_0")  # the GGUF's type, -ctk's
    assert allowed["bandwidth_gbs"] == 100 and allowed["efficiency_source"]
    assert [s["load"] for s in allowed["steps"]] == ["c=1", "c=2"]
    for step, mine in zip(judged.steps, allowed["steps"], strict=True):
        assert (mine["mbu"], mine["bottleneck"], mine["decode_batch"]) == (step.mbu, step.bottleneck,
                                                                            step.decode_batch)
        assert mine["measured_tok_s"] == pytest.approx(100.0)  # 10 ms a token
        batch = round(step.decode_batch)
        bound = 1 / decode_step_s(judged.deployment, batch, round(step.decode_batch * step.context_tokens))
        assert mine["bound_tok_s"] == pytest.approx(bound)
        assert mine["aggregate_bound_tok_s"] == pytest.approx(bound * step.decode_batch)
        assert mine["expected_tok_s"] < mine["bound_tok_s"]
        # a 270M model at 100 GB/s is bandwidth-bound: measured over bound is the bandwidth used, MBU (the
        # roofline's context is a whole number of tokens, 106 for 105.5: hence not to the last digit)
        assert mine["measured_tok_s"] / mine["bound_tok_s"] == pytest.approx(step.mbu, rel=1e-4)
    assert allowed["steps"][1]["decode_batch"] == pytest.approx(2.0)
    assert allowed["line"].startswith("c=1: 100 tok/s per request of ")
    assert "; c=2: 100 tok/s per request of " in allowed["line"]


def test_a_run_that_does_not_say_what_ran_where_gets_a_reason(tmp_path: Path) -> None:
    _, run, records = _saved_run(tmp_path, None)  # a server at a URL: no identity, no model file
    assert allowed_for(run, records, _box(tmp_path)) == {
        "reason": f"--model is required for run {run.id} (it does not name a model file the estimate can read) "
                  "(see --list-models / --list-hardware)"}
    unknown = allowed_for(run, records, EstimateSpec(model="gemma-3-270m", hardware="no-such-device"))
    assert "no-such-device" in unknown["reason"] and set(unknown) == {"reason"}


def test_a_missing_model_file_no_records_or_no_finished_request_give_a_reason(tmp_path: Path) -> None:
    gone = {"engine": "llama.cpp", "model_file": str(tmp_path / "gone.gguf"), "argv": []}
    _, run, records = _saved_run(tmp_path, gone)
    assert set(allowed_for(run, records, _box(tmp_path))) == {"reason"}
    engine = {"engine": "llama.cpp", "model_file": str(bundled_model_path()), "argv": []}
    _, run, records = _saved_run(tmp_path, engine, "other.db")
    assert allowed_for(run) == {"reason": f"run {run.id}: the bound needs the run's requests (give its records)"}
    failed = [RequestRecord(index=0, step=0, sent_ns=0, status=500, error="http_5xx")]
    assert allowed_for(run, failed, _box(tmp_path)) == {
        "reason": f"run {run.id} has no completed measured requests to judge"}


@pytest.mark.parametrize("file_type", [10, 11, 12, 13, 14, 15, 16, 17, 18])  # Q2_K ... Q6_K: the k-quants
def test_every_k_quant_llama_quantize_makes_gets_a_bound(tmp_path: Path, file_type: int) -> None:
    """A variant requantised to Q2_K (or Q3_K_M, Q5_K_S ...) is judged like the Q4_K_M baseline, not refused."""
    model = tmp_path / "tiny.gguf"
    _write_gguf(model)  # a two-layer model whose header says Q4_K_M (file type 15)
    said = _gguf_string("general.file_type") + struct.pack("<II", 4, 15)
    model.write_bytes(model.read_bytes().replace(said, said[:-4] + struct.pack("<I", file_type), 1))
    _, run, records = _saved_run(tmp_path, {"engine": "llama.cpp", "model_file": str(model), "argv": []})
    allowed = allowed_for(run, records, _box(tmp_path))
    assert "reason" not in allowed, allowed
    assert allowed["weight_dtype"] == FILE_TYPES[file_type] and allowed["weight_bytes"] == 5000
    assert all(step["bound_tok_s"] > 0 for step in allowed["steps"])
