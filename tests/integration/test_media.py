"""Images and tool calls against the simulator, request by request against its own trace.

The simulator (a real `tokometer sim` process on loopback) counts an image's prompt tokens by Qwen2-VL's rule
(`tokometer.protocols.common.images`) and reports them in ``usage.prompt_tokens_details.image_tokens``; with a modelled
deployment it prefills them with the prompt's text. Given ``tools`` it answers with one streamed tool call
(``delta.tool_calls`` argument fragments, one token each). No vision model and no tool-calling model ran
here: the simulator's rule and its trace are the truth these tests hold the benchmark to.
"""

from __future__ import annotations

import json
import urllib.error
from collections.abc import Callable

import pytest

from tests.conftest import SimServer
from tests.helpers import bench, median
from tokometer.protocols.common.images import qwen2_vl_image_tokens

MS = 1e6
OUTPUT = 24


def test_tool_call_deltas_are_output_timed_and_counted_as_the_simulator_sent_them(
        sim_factory: Callable[..., SimServer]) -> None:
    sim = sim_factory("--ttft-ms", "40", "--itl-ms", "2", "--output-tokens", str(OUTPUT))  # answers end by themselves
    result = bench(sim.openai_url, model="sim-model", concurrency=[1], requests=6, input_tokens=16,
                   output_tokens=64, tools=4, tool_choice="search_web", tokenizer="none")
    step = result.steps[0]
    traces = sim.trace()
    assert step.summary.requests_completed == 6 and len(traces) == 6
    lags = []
    for record, trace in zip(step.records, traces, strict=True):
        assert record.tool_calls == 1
        assert record.output_tokens == OUTPUT == trace["completion_tokens"] and record.output_tokens_source == "usage"
        assert record.tool_call_tokens == OUTPUT and record.tool_call_tokens_source == "usage"
        assert record.output_text == "" and record.finish_reason == "stop"  # finish_reason "tool_calls"
        arguments = json.loads(record.tool_call_text.removeprefix("search_web"))  # name, then the JSON arguments
        assert len(arguments["query"].split()) == OUTPUT
        # the first tool-call delta is the first token: TTFT and time to first tool call are one event
        assert record.first_tool_call_ns == record.first_token_ns
        assert len(record.event_ns) == len(trace["event_ns"]) == OUTPUT
        lags.append(record.first_tool_call_ns - trace["event_ns"][0])
    assert min(lags) >= 0 and median(lags) < 5 * MS  # stamped after the server sent it, and close to it
    tools = step.summary.tool_calls
    assert tools is not None
    assert tools.requests == 6 and tools.calls_total == 6
    assert tools.tool_call_tokens_total == 6 * OUTPUT
    assert tools.time_to_first_tool_call_ms.p50 == pytest.approx(step.summary.ttft_ms.p50)
    assert tools.time_to_first_tool_call_ms.p50 == pytest.approx(40.0, abs=15.0)  # a loaded 2-core machine wakes late
    assert step.summary.tpot_ms.p50 == pytest.approx(2.0, abs=1.0)  # tool-call fragments decode like text


def test_tool_choice_none_gets_a_text_answer(sim_factory: Callable[..., SimServer]) -> None:
    sim = sim_factory("--ttft-ms", "5", "--itl-ms", "1")
    result = bench(sim.openai_url, model="sim-model", concurrency=[1], requests=2, input_tokens=8,
                   output_tokens=8, tools=2, tool_choice="none", tokenizer="none")
    step = result.steps[0]
    assert step.summary.tool_calls is None
    assert all(r.output_text and not r.first_tool_call_ns for r in step.records)


def test_images_are_counted_by_the_simulators_rule_and_prefilled(sim_factory: Callable[..., SimServer]) -> None:
    """Two 1024x768 JPEGs a request: 2 x 999 image tokens on top of the 32 words of text, in the usage the
    benchmark reads and in the trace; with a modelled deployment (llama-3.1-8b AWQ on an H100, time x10) the
    prefill of those tokens is what TTFT grows by."""
    from tokometer.sim.config import SimConfig
    from tokometer.sim.steptime import step_time_for

    args = ("--model", "llama-3.1-8b", "--hardware", "H100-SXM", "--dtype", "awq", "--time-scale", "10",
            "--max-body-bytes", str(16 * 2**20))
    sim = sim_factory(*args)
    per_image = qwen2_vl_image_tokens(1024, 768)
    assert per_image == 999
    runs = {}
    for images in (0, 2):
        sim.clear_trace()
        result = bench(sim.openai_url, concurrency=[1], requests=4, input_tokens=32, output_tokens=4,
                       images=images, image_size="1024x768", tokenizer="none")
        step = result.steps[0]
        assert step.summary.requests_completed == 4, step.summary.error_examples
        for record, trace in zip(step.records, sim.trace(), strict=True):
            assert record.input_tokens == trace["prompt_tokens"] == 32 + images * per_image
            assert record.images == (images or None)
            assert record.image_tokens == (images * per_image if images else None)
        runs[images] = step.summary
    assert runs[0].images is None
    summary = runs[2].images
    assert summary is not None and summary.images_total == 8 and summary.reported == 4
    assert summary.image_tokens.mean == 2 * per_image
    step_time, _ = step_time_for(SimConfig(model="llama-3.1-8b", hardware="H100-SXM", dtype="awq", time_scale=10))
    predicted = {n: 10 * 1000 * step_time(0, 0, 32 + n * per_image) for n in (0, 2)}
    assert predicted[2] > 4 * predicted[0]
    for n in (0, 2):
        assert runs[n].ttft_ms.p50 == pytest.approx(predicted[n], rel=0.3, abs=15.0)


def test_the_simulator_refuses_an_image_it_cannot_size(sim_factory: Callable[..., SimServer]) -> None:
    sim = sim_factory()
    body = {"model": "sim-model", "messages": [{"role": "user", "content": [
        {"type": "text", "text": "what is this"},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}]}]}
    with pytest.raises(urllib.error.HTTPError) as refused:
        sim.call("/v1/chat/completions", "POST", body)
    assert refused.value.code == 400
    assert b"data: URLs" in refused.value.read()
