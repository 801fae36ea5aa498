"""Reasoning models against the simulator's reasoning mode: the reasoning/answer split, per request,
equals what the simulator sent (its first N tokens reasoning; its trace says when each event left)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.conftest import SimServer
from tests.helpers import bench, kept_to_script, median, trace_truth_ms

MS = 1e6
REASONING = 12
OUTPUT = 64


def _first_answer_event(trace: dict[str, Any], reasoning: int) -> int:
    """The event carrying the answer's token number ``reasoning`` (0-based)."""
    sent = 0
    for k, n in enumerate(trace["event_tokens"]):
        if sent + n > reasoning:
            return k
        sent += n
    raise AssertionError("the answer never got past its reasoning")


def _check(sim: SimServer, api: str, source: str, n: int = 5, tokens_per_event: int = 1) -> Any:
    sim.clear_trace()
    result = bench(sim.openai_url if api.startswith("openai") else sim.root, api=api, model="sim-model",
                   concurrency=[1], requests=n, input_tokens=16, output_tokens=OUTPUT)
    step = result.steps[0]
    traces = sim.trace()
    assert len(traces) == n and step.summary.requests_completed == n
    lags = []
    for record, trace in zip(step.records, traces, strict=True):
        assert record.output_tokens == OUTPUT
        assert record.reasoning_tokens == REASONING, (api, record.reasoning_tokens_source)
        assert record.reasoning_tokens_source == source
        k = _first_answer_event(trace, REASONING)
        assert k == REASONING // tokens_per_event
        # the client stamps each event after the server sent it (on a busy 2-core machine one wake-up can be
        # late by tens of ms: the median is the accuracy claim)
        lags += [record.first_answer_ns - trace["event_ns"][k], record.first_token_ns - trace["event_ns"][0]]
    assert min(lags) >= 0 and median(lags) < 5 * MS
    reasoning = step.summary.reasoning
    assert reasoning is not None
    assert reasoning.requests == n and reasoning.no_answer == 0
    assert reasoning.reasoning_tokens_total == REASONING * n
    assert reasoning.answer_tokens_total == (OUTPUT - REASONING) * n
    assert reasoning.reasoning_share == pytest.approx(REASONING / OUTPUT)
    assert reasoning.reasoning_tokens_source == {source: n}
    # against what the simulator sent, from each request's send; then the simulator against its script: the first
    # answer token is due at ttft + (its event) x tokens_per_event x itl after its receipt
    k = REASONING // tokens_per_event
    answer = [(t["event_ns"][k] - r.sent_ns) / MS for t, r in zip(traces, step.records, strict=True)]
    first = [trace_truth_ms(t, r.sent_ns)[0] for t, r in zip(traces, step.records, strict=True)]
    assert reasoning.ttfat_ms.p50 == pytest.approx(median(answer), abs=3.0)
    assert step.summary.ttft_ms.p50 == pytest.approx(median(first), abs=3.0)
    due = 50.0 + k * tokens_per_event * 2.0
    assert kept_to_script(median([(t["event_ns"][k] - t["received_ns"]) / MS for t in traces]), due)
    assert kept_to_script(median([(t["event_ns"][0] - t["received_ns"]) / MS for t in traces]), 50.0)
    assert reasoning.answer_decode_speed_tok_s.p50 == pytest.approx(500.0, rel=0.15)
    return step


@pytest.mark.timing
@pytest.mark.parametrize(("fmt", "api", "source"), [
    ("reasoning_content", "openai-chat", "usage"),
    ("reasoning", "openai-chat", "usage"),
    ("think", "openai-chat", "estimate"),
    ("think", "openai-completions", "estimate"),
    ("think", "llamacpp", "native"),
    ("think", "tgi", "native"),
    ("reasoning_content", "ollama", "estimate"),
])
def test_reasoning_split_equals_the_simulators_truth(sim_factory: Callable[..., SimServer], fmt: str, api: str,
                                                     source: str) -> None:
    sim = sim_factory("--ttft-ms", "50", "--itl-ms", "2", "--reasoning-tokens", str(REASONING),
                      "--reasoning-format", fmt)
    _check(sim, api, source)


@pytest.mark.timing
def test_an_event_with_reasoning_and_answer_starts_the_answer(sim_factory: Callable[..., SimServer]) -> None:
    # 5 tokens an event: event 2 carries tokens 10-14, reasoning 10-11 and answer 12-14
    sim = sim_factory("--ttft-ms", "50", "--itl-ms", "2", "--tokens-per-event", "5",
                      "--reasoning-tokens", str(REASONING), "--empty-first-event", "--reasoning-format", "reasoning")
    _check(sim, "openai-chat", "usage", tokens_per_event=5)


def test_no_reasoning_means_no_reasoning_summary(sim_factory: Callable[..., SimServer]) -> None:
    sim = sim_factory("--ttft-ms", "20", "--itl-ms", "1")
    result = bench(sim.openai_url, concurrency=[1], requests=2, input_tokens=16, output_tokens=8)
    assert result.steps[0].summary.reasoning is None
    assert result.steps[0].summary.to_json()["reasoning"] is None
    assert all(r.reasoning_tokens is None and r.first_answer_ns == 0 for r in result.steps[0].records)


def test_an_answer_cut_while_reasoning_is_all_reasoning(sim_factory: Callable[..., SimServer]) -> None:
    sim = sim_factory("--ttft-ms", "20", "--itl-ms", "1", "--reasoning-tokens", "100", "--reasoning-format", "think")
    result = bench(sim.openai_url, concurrency=[1], requests=2, input_tokens=16, output_tokens=8)
    reasoning = result.steps[0].summary.reasoning
    assert reasoning is not None
    assert reasoning.no_answer == 2 and reasoning.ttfat_ms.count == 0
    assert reasoning.reasoning_tokens_total == 16 and reasoning.answer_tokens_total == 0
