"""The probe block: summarised from probe records alone, written and read back with the step summary."""

from __future__ import annotations

import statistics

import pytest

from tokometer.compare.probes import probe_notes
from tokometer.load.probes import PROBE_PROMPT, probe_gaps_ns
from tokometer.load.profiles import LoadStep
from tokometer.metrics.probes import ProbeSummary, summarize_probes
from tokometer.metrics.summary import StepSummary, summarize
from tokometer.protocols.common.base import GenerationParams, answer_length
from tokometer.records import ErrorCategory, RequestRecord
from tokometer.report.beside import beside_lines
from tokometer.store.runs import StoredStep


def _record(index: int, ttft_ms: float | None, error: ErrorCategory | None = None) -> RequestRecord:
    r = RequestRecord(index=index, sent_ns=1_000_000_000 + index * 10**8)
    if error is not None:
        r.error, r.end_ns = error, r.sent_ns + 10**6
        return r
    assert ttft_ms is not None
    r.first_token_ns = r.sent_ns + int(ttft_ms * 1e6)
    r.last_token_ns = r.first_token_ns
    r.end_ns = r.first_token_ns + 10**5
    r.output_tokens, r.output_tokens_source = 1, "usage"
    return r


def test_ttft_and_errors_of_the_probes_alone() -> None:
    records = [_record(i, 10.0 * (i + 1)) for i in range(10)] + [_record(10, None, "http_5xx")]
    block = summarize_probes(records, rate=2.0)
    assert (block.sent, block.completed, block.failed, block.errors) == (11, 10, 1, {"http_5xx": 1})
    assert block.ttft_ms.max == pytest.approx(100.0) and block.ttft_ms.p50 == pytest.approx(55.0, abs=5.1)
    assert "10 of 11 answered, 1 failed (http_5xx 1)" in block.line()
    assert ProbeSummary.from_json(block.to_json()) == block


def test_the_step_summary_round_trips_its_probe_block() -> None:
    summary = summarize([_record(i, 5.0) for i in range(3)])
    summary.probe = summarize_probes([_record(0, 40.0)], rate=0.5)
    again = StepSummary.from_json(summary.to_json())
    assert again.probe == summary.probe and again.to_json() == summary.to_json()
    summary.probe = None
    assert StepSummary.from_json(summary.to_json()).probe is None


def test_a_probe_asks_for_one_token_whatever_the_run_asks() -> None:
    for ignore_eos in (False, True):
        assert answer_length(PROBE_PROMPT, GenerationParams(model="m", max_tokens=512, ignore_eos=ignore_eos)) == 1


def test_probe_gaps_are_poisson_at_the_rate_and_seeded() -> None:
    one, two, other = probe_gaps_ns(4.0, seed=3), probe_gaps_ns(4.0, seed=3), probe_gaps_ns(4.0, seed=4)
    first = [one() for _ in range(20_000)]
    assert first[:50] == [two() for _ in range(50)] and first[:50] != [other() for _ in range(50)]
    mean_s = statistics.fmean(first) / 1e9
    assert mean_s == pytest.approx(0.25, rel=0.03)
    assert statistics.pstdev(first) / 1e9 == pytest.approx(0.25, rel=0.05)  # exponential: sd = mean


def _step(index: int, probe_ttft: list[float] | None) -> StoredStep:
    summary = summarize([_record(i, 5.0) for i in range(3)])
    if probe_ttft is not None:
        summary.probe = summarize_probes([_record(i, t) for i, t in enumerate(probe_ttft)], rate=1.0)
    return StoredStep(index, LoadStep(mode="concurrency", concurrency=4), "now", summary)


def test_compare_notes_each_loads_probe_ttft_and_says_it_is_not_gated() -> None:
    base = [(None, [_step(0, [100.0, 200.0, 300.0])])]
    new = [(None, [_step(0, [150.0, 300.0, 450.0])])]
    (note,) = probe_notes(base, new)
    assert "c=4 probe TTFT" in note and "not gated" in note and "p50 200.0 -> 300.0 ms (+50%)" in note
    assert probe_notes([(None, [_step(0, None)])], [(None, [_step(0, None)])]) == []
    (one_sided,) = probe_notes([(None, [_step(0, None)])], new)
    assert "p50 - -> 300.0 ms" in one_sided


def test_the_report_says_a_steps_probes_and_speculative_decoding() -> None:
    step = _step(0, [40.0])
    assert step.summary is not None
    server = {"speculative": {"source": "counters", "acceptance_rate": 0.5, "acceptance_length": 2.5,
                              "draft_tokens": 300.0, "per_position": [0.7, 0.5, 0.3]}}
    lines = beside_lines([({"label": "c=4", "server": server}, step.summary.to_json())])
    assert lines[0].startswith("At c=4, probes (1/s beside the load") and "max 40.0 ms" in lines[0]
    assert lines[1].startswith("At c=4, speculative decoding: acceptance 50% of 300 drafted tokens, 2.50 tokens")
