"""A saved run's steps beside the closed-loop estimate of their own concurrency and lengths (``estimate --run``)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tokometer.load.profiles import LoadStep
from tokometer.perf import Deployment, Efficiency, HardwareSpec, resolve_model
from tokometer.perf.closedloop import closed_loop
from tokometer.perf.measuredloop import loops_beside
from tokometer.perf.questions import EstimateSpec, judge_stored_run
from tokometer.records import RequestRecord
from tokometer.runs.stored_spec import StoredSpec
from tokometer.store import StoredRun, StoredStep

MS = 1_000_000
HW = HardwareSpec(name="box", kind="cpu", memory_gb=16, bandwidth_gbs=100, bf16_tflops=1, source="made up")
D = Deployment(resolve_model("gemma-3-270m"), HW)


def _record(step: int, index: int, sent_ms: int, ttft_ms: int, itl_ms: int, prompt: int, answer: int) -> RequestRecord:
    first = (sent_ms + ttft_ms) * MS
    events = [first + k * itl_ms * MS for k in range(answer)]
    return RequestRecord(index=index, step=step, sent_ns=sent_ms * MS, first_token_ns=first, last_token_ns=events[-1],
                         end_ns=events[-1] + MS, event_ns=events, event_tokens=[1.0] * answer, input_tokens=prompt,
                         output_tokens=answer, status=200, finish_reason="length")


def _run() -> tuple[StoredRun, list[RequestRecord]]:
    # step 0: four users in a closed loop, prompts of 300 and 500 tokens (mean 400), answers of 20 and 40 (30);
    # step 1: a rate of 2/s (an open loop)
    closed = [_record(0, i, i * 10, 100 + 20 * i, 10 + i, 300 if i % 2 else 500, 20 if i % 2 else 40)
              for i in range(4)]
    rate = [_record(1, 10 + i, 5000 + 500 * i, 90, 12, 200, 30) for i in range(3)]
    steps = (StoredStep(0, LoadStep("concurrency", 4), "t"), StoredStep(1, LoadStep("rate", rate=2.0), "t"))
    run = StoredRun(id=3, status="completed", started_at="t", finished_at="t", target="http://x/v1",
                    api="openai-chat", model="m", label=None, spec=StoredSpec(), engine=None, host=None, steps=steps)
    return run, closed + rate


def test_a_closed_loop_step_is_set_beside_the_estimate_of_its_concurrency_and_lengths() -> None:
    run, records = _run()
    eff = Efficiency()
    closed, rate = loops_beside(run, records, D, eff)
    assert (closed.concurrency, closed.input_tokens, closed.output_tokens) == (4, 400, 30)
    # the steps' cached tokens from the step's own lengths, not the means' 400 + 30 / 2 = 415: the 500-token prompts'
    # answers are twice as long as the 300-token ones', so a step sees them twice as often (tokometer.perf.lengths):
    # (500 × 40 × 2 + 300 × 20 × 2) / 120 + (40² × 2 + 20² × 2) / (2 × 120) = 433.3 + 16.7
    assert closed.decode_context == pytest.approx(450)
    expected = closed_loop(D, 4, 400, 30, eff, decode_context=450)
    assert closed.expected == expected and closed.bound == closed_loop(D, 4, 400, 30, decode_context=450)
    assert closed.to_json()["decode_context_tokens"] == pytest.approx(450)
    assert closed.measured_ttft_s == pytest.approx((100 + 120 + 140 + 160) / 4 / 1e3)
    assert closed.measured_itl_s == pytest.approx((10 + 11 + 12 + 13) / 4 / 1e3)
    # no summary: output tokens over the span from the first send to the last token
    span = max(r.last_token_ns for r in records[:4]) - min(r.sent_ns for r in records[:4])
    assert closed.measured_tok_s == pytest.approx(120 / (span / 1e9))
    assert closed.ratio() == pytest.approx(120 / (span / 1e9) / expected.aggregate_tok_s)
    data = closed.to_json()
    assert data["estimated"]["expected"]["itl_ms"] == pytest.approx(expected.itl_s * 1e3)
    # an open loop has no fixed number of users to estimate for
    assert (rate.concurrency, rate.expected, rate.ratio(), rate.load) == (None, None, None, "2.0/s")
    # an engine that runs two sequences at once (llama.cpp's --parallel 2, vLLM's --max-num-seqs 2): the other
    # two of the four users wait for a slot, and the estimate beside the step says so
    capped, _ = loops_beside(run, records, D, eff, max_batch=2)
    assert capped.expected == closed_loop(D, 4, 400, 30, eff, max_batch=2, decode_context=450)
    assert capped.expected is not None and capped.expected.ttft_s > expected.ttft_s


def test_estimate_run_sets_the_rows_beside_its_steps(tmp_path: Path) -> None:
    hw = tmp_path / "hw.toml"
    hw.write_text('[[hardware]]\nname = "box"\nkind = "cpu"\nmemory_gb = 16\nbandwidth_gbs = 100\n'
                  'bf16_tflops_dense = 1\nsource = "made up"\n')
    run, records = _run()
    spec = EstimateSpec(model="gemma-3-270m", hardware="box", hardware_file=hw, use_calibration=False)
    judged = judge_stored_run(spec, run, records)
    assert [c.concurrency for c in judged.closed_loop] == [4, None]
    assert judged.closed_loop[0].expected == closed_loop(judged.deployment, 4, 400, 30, Efficiency(),
                                                         decode_context=450)
    assert judged.to_json()["closed_loop"][0]["concurrency"] == 4
    separate = judge_stored_run(replace(spec, chunked_prefill=False), run, records)
    assert separate.closed_loop[0].expected is not None and not separate.closed_loop[0].expected.chunked


def test_a_step_whose_lengths_spread_says_what_its_sequences_held(tmp_path: Path) -> None:
    from rich.console import Console

    from tokometer.perf.render import render_run

    hw = tmp_path / "hw.toml"
    hw.write_text('[[hardware]]\nname = "box"\nkind = "cpu"\nmemory_gb = 16\nbandwidth_gbs = 100\n'
                  'bf16_tflops_dense = 1\nsource = "made up"\n')
    run, records = _run()
    judged = judge_stored_run(EstimateSpec(model="gemma-3-270m", hardware="box", hardware_file=hw,
                                           use_calibration=False), run, records)
    console = Console(record=True, width=300)
    render_run(console, judged)
    text = console.export_text()
    # 450 against 415 (8 % more): said; the rate step has no estimate and no line
    assert "step 0: its requests' lengths spread: a decoding sequence held 450 tokens on average, not the means' 415" \
        in text
    assert "step 1: its requests" not in text


def test_a_steps_spread_lengths_reserve_the_room_its_slots_held() -> None:
    """Where memory runs out, the users the engine holds at once follow the room a slot reserves over the steps,
    E[L·(I + L)] / E[L] of the step's requests: (500 × 40 × 2 + 300 × 20 × 2) / 120 + (40² × 2 + 20² × 2) / 120
    = 466.7 tokens against the means' 430 (on this box 3 such sequences fit and 4 of 430)."""
    tight = Deployment(resolve_model("gemma-3-270m"), HardwareSpec(name="box", kind="cpu", memory_gb=2.81,
                                                                   bandwidth_gbs=100, bf16_tflops=1, source="made up"))
    assert (tight.kv_sequences(430), tight.kv_sequences(467)) == (4, 3)
    run, records = _run()
    closed, _ = loops_beside(run, records, tight, Efficiency())
    assert closed.expected == closed_loop(tight, 4, 400, 30, Efficiency(), decode_context=450, room_tokens=466.7)
    assert closed.expected is not None and closed.expected.ttft_s > closed_loop(
        tight, 4, 400, 30, Efficiency(), decode_context=450).ttft_s  # one user waits for a slot
