"""`finish_step`: the one recipe of a step's summary. Each part a run may not have (windows, per-GPU throughput,
the text check) is there exactly when it is asked for, and equals what its own function gives. Records: two slots
of 1 s requests, as in tests/unit/metrics/test_window.py."""

from __future__ import annotations

from tokometer.load.profiles import LoadStep
from tokometer.metrics import SLO, summarize
from tokometer.metrics.textcheck import check_text
from tokometer.metrics.window import step_windows
from tokometer.records import RequestRecord
from tokometer.runs.finish import check_step_text, finish_step

S = 1_000_000_000


def _req(index: int, sent: float, text: str = "") -> RequestRecord:
    stamps = [int((sent + 0.1 + k * 0.1) * S) + S for k in range(10)]
    return RequestRecord(index=index, due_ns=int(sent * S) + S, sent_ns=int(sent * S) + S, first_token_ns=stamps[0],
                         last_token_ns=stamps[-1], end_ns=int((sent + 1) * S) + S, event_ns=stamps,
                         event_tokens=[1.0] * 10, output_tokens=10, output_tokens_source="usage", status=200,
                         finish_reason="length", output_text=text)


RECORDS = [_req(i, t, "x" * 40) for i, t in enumerate((0.0, 1.0, 2.0, 3.0, 0.5, 1.5, 2.5))]
SLO_ = SLO(ttft_ms=150.0)


def test_with_nothing_but_records_it_is_the_plain_summary() -> None:
    """What an imported run asks for: `summarize`, nothing added."""
    summary = finish_step(RECORDS)
    assert summary == summarize(RECORDS)
    assert (summary.steady_state, summary.time_slices, summary.output_throughput_per_gpu_tok_s,
            summary.text_check) == (None, None, None, None)


def test_each_part_is_its_own_functions() -> None:
    """What a live run asks for: windows of its load, per-GPU throughput and the text check, against its SLO."""
    load = LoadStep("concurrency", 2)
    summary = finish_step(RECORDS, slo=SLO_, load=load, steady_tolerance=0.2, time_slice_s=1.0, gpus=4)
    assert summary.text_check is None  # a step of its own, taken by the live run alone
    check_step_text(summary, RECORDS, len)
    plain = summarize(RECORDS, SLO_)
    assert (summary.steady_state, summary.time_slices) == step_windows(RECORDS, load, 0.2, 1.0, SLO_)
    assert summary.steady_state is not None and summary.time_slices is not None
    assert summary.output_throughput_per_gpu_tok_s == plain.output_throughput_tok_s / 4
    assert summary.text_check == check_text(RECORDS, len) and summary.text_check is not None
    assert summary.goodput_rps == plain.goodput_rps


def test_windows_follow_the_load_and_the_slice() -> None:
    """A recovered step whose load could not be read gets no windows; without a slice width, no slices."""
    assert finish_step(RECORDS, load=None, time_slice_s=1.0).time_slices is None
    steady_only = finish_step(RECORDS, load=LoadStep("concurrency", 2))
    assert steady_only.steady_state is not None and steady_only.time_slices is None
    assert finish_step(RECORDS, gpus=None).output_throughput_per_gpu_tok_s is None
