"""``bench --api openai-responses`` and ``--api anthropic-messages`` against `tokometer sim` speaking them.

The simulator is a real server on loopback (`tokometer sim`); it stamps every content event just before
writing it, on the client's clock, so TTFT, TPOT, ITL, the first answer token and the token counts are
held against what it really sent (``/sim/trace``), with the same definitions as every other protocol.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SimServer, run_cli
from tests.helpers import (
    bench,
    check_client_against_trace,
    kept_to_script,
    median,
    simulator_medians_ms,
    trace_gap_means_ms,
    trace_truth_ms,
)

MS = 1e6
APIS = [("openai-responses", "/v1/responses"), ("anthropic-messages", "/v1/messages")]


@pytest.mark.timing
@pytest.mark.parametrize(("api", "path"), APIS)
@pytest.mark.parametrize("per_event", [1, 4])
def test_timing_and_counts_match_the_simulators_trace(sim_factory: Callable[..., SimServer], api: str, path: str,
                                                      per_event: int) -> None:
    sim = sim_factory("--ttft-ms", "60", "--itl-ms", "4", "--tokens-per-event", str(per_event), "--model", "m1")
    n = 8
    result = bench(sim.openai_url, api=api, model="m1", concurrency=[1], requests=n, input_tokens=16,
                   output_tokens=64)
    step = result.steps[0]
    summary = step.summary
    traces = sim.trace()
    assert summary.requests_failed == 0, summary.error_examples
    assert len(traces) == n and {t["path"] for t in traces} == {path}
    for record, trace in zip(step.records, traces, strict=True):
        assert len(record.event_ns) == len(trace["event_ns"])  # one content event per event the server sent
    check_client_against_trace(step, traces)  # the client against what the simulator sent; it against its script:
    ttft_ms, tpot_ms = simulator_medians_ms(traces)
    gap_ms, per_token_ms = trace_gap_means_ms(traces)
    assert kept_to_script(ttft_ms, 60.0) and tpot_ms == pytest.approx(4.0, rel=0.1), (ttft_ms, tpot_ms)
    assert gap_ms == pytest.approx(4.0 * per_event, rel=0.1) and per_token_ms == pytest.approx(4.0, rel=0.1)
    assert summary.output_tokens_total == 64 * n and summary.output_tokens_source == {"usage": n}
    assert summary.input_tokens.mean == 16 and summary.input_tokens_source == {"usage": n}
    assert all(r.finish_reason == "length" for r in step.records)


@pytest.mark.timing
@pytest.mark.parametrize(("api", "fmt", "source"), [("openai-responses", "reasoning", "usage"),
                                                   ("anthropic-messages", "reasoning", "estimate"),
                                                   ("openai-responses", "think", "estimate"),
                                                   ("anthropic-messages", "think", "estimate")])
def test_reasoning_blocks_split_the_answer(sim_factory: Callable[..., SimServer], api: str, fmt: str,
                                           source: str) -> None:
    """12 reasoning tokens (Responses' ``reasoning_text`` deltas, Anthropic's ``thinking`` block), then the answer:
    the time to the first answer token is the event that carried token 12. Responses counts reasoning tokens in
    its usage; Anthropic's usage does not, so the thinking block's events are counted (an estimate, so labelled).
    With ``think`` the reasoning comes inline in the answer text between ``<think>`` tags, and is found there."""
    sim = sim_factory("--ttft-ms", "50", "--itl-ms", "2", "--reasoning-tokens", "12", "--reasoning-format", fmt)
    result = bench(sim.openai_url, api=api, model="sim-model", concurrency=[1], requests=5, input_tokens=16,
                   output_tokens=64)
    step = result.steps[0]
    traces = sim.trace()
    for record, trace in zip(step.records, traces, strict=True):
        assert record.output_tokens == 64
        assert (record.reasoning_tokens, record.reasoning_tokens_source) == (12, source)
        assert record.first_answer_ns - trace["event_ns"][12] >= 0
    reasoning = step.summary.reasoning
    assert reasoning is not None and reasoning.no_answer == 0
    assert reasoning.reasoning_tokens_total == 60 and reasoning.answer_tokens_total == 52 * 5
    # against what the simulator sent, from each request's send (its event 12 carried the first answer token)
    sends = [r.sent_ns for r in step.records]
    assert reasoning.ttfat_ms.p50 == pytest.approx(median([(t["event_ns"][12] - s) / MS for t, s in
                                                           zip(traces, sends, strict=True)]), abs=3.0)
    assert step.summary.ttft_ms.p50 == pytest.approx(median([trace_truth_ms(t, s)[0] for t, s in
                                                             zip(traces, sends, strict=True)]), abs=3.0)
    assert kept_to_script(median([(t["event_ns"][12] - t["received_ns"]) / MS for t in traces]), 50.0 + 12 * 2.0)
    assert kept_to_script(simulator_medians_ms(traces)[0], 50.0)


@pytest.mark.parametrize("api", ["openai-responses", "anthropic-messages"])
def test_faults_in_each_protocols_own_shape(sim_factory: Callable[..., SimServer], tmp_path: Path,
                                            api: str) -> None:
    sim = sim_factory("--ttft-ms", "5", "--itl-ms", "1", "--fault-schedule",
                      "none,http_429,error_event,malformed,reset,http_500", "--api-key", "k1")
    out = tmp_path / "faults.json"
    done = run_cli("bench", "--url", sim.openai_url, "--api", api, "--api-key", "k1", "-c", "1", "-n", "6",
                   "--input-tokens", "4", "--output-tokens", "16", "--json", str(out), "--no-store", "--no-check")
    assert done.returncode == 1, done.stderr
    summary = json.loads(out.read_text())["steps"][0]["summary"]
    assert summary["requests_completed"] == 1  # the key went in each protocol's own header
    assert summary["errors"] == {"http_429": 1, "server_error_event": 1, "malformed_stream": 1, "reset": 1,
                                 "http_5xx": 1}
    examples = summary["error_examples"]
    assert "simulated engine failure" in examples["server_error_event"]
    if api == "anthropic-messages":
        assert "api_error: simulated engine failure" in examples["server_error_event"]
        assert "rate_limit_error" in examples["http_429"]
    else:
        assert "server_error: simulated engine failure" in examples["server_error_event"]


def _post(url: str, headers: dict[str, str], body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(url, json.dumps(body).encode(), headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_the_key_in_x_api_key_and_a_refusal_in_anthropics_shape(sim_factory: Callable[..., SimServer]) -> None:
    sim = sim_factory("--api-key", "k1")
    body = {"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]}
    status, answer = _post(sim.root + "/v1/messages", {"x-api-key": "k1", "anthropic-version": "2023-06-01"}, body)
    assert status == 200 and answer["type"] == "message" and answer["usage"] == {"input_tokens": 1,
                                                                                 "output_tokens": 4}
    assert answer["stop_reason"] == "max_tokens" and answer["content"][0]["type"] == "text"
    status, answer = _post(sim.root + "/v1/messages", {"x-api-key": "wrong"}, body)
    assert status == 401
    assert answer == {"type": "error", "error": {"type": "authentication_error", "message": answer["error"]["message"]}}
    status, answer = _post(sim.root + "/v1/messages", {"x-api-key": "k1"}, {**body, "max_tokens": None})
    assert (status, answer["error"]["type"]) == (400, "invalid_request_error")
    assert "max_tokens" in answer["error"]["message"]


def test_a_refused_anthropic_key_says_where_it_went(sim_factory: Callable[..., SimServer]) -> None:
    sim = sim_factory("--api-key", "k1")
    done = run_cli("bench", "--url", sim.openai_url, "--api", "anthropic-messages", "--model", "m", "--api-key", "k2",
                   "-n", "1", "--no-store")
    assert done.returncode == 2
    assert "refused the API key given" in done.stderr and "--header 'Authorization: Bearer KEY'" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_responses_not_streamed_is_one_response_object(sim_factory: Callable[..., SimServer]) -> None:
    sim = sim_factory("--reasoning-tokens", "2", "--reasoning-format", "reasoning")
    status, answer = _post(sim.root + "/v1/responses", {}, {"model": "m", "input": "a b c", "max_output_tokens": 5})
    assert status == 200 and answer["object"] == "response" and answer["status"] == "incomplete"
    assert answer["incomplete_details"] == {"reason": "max_output_tokens"}
    assert answer["usage"] == {"input_tokens": 3, "output_tokens": 5, "total_tokens": 8,
                               "output_tokens_details": {"reasoning_tokens": 2}}
    assert [item["type"] for item in answer["output"]] == ["reasoning", "message"]
    assert len(answer["output"][1]["content"][0]["text"].split()) == 3
    status, answer = _post(sim.root + "/v1/responses", {}, {"input": 5})
    assert status == 400 and "'input'" in answer["error"]["message"]


def test_cli_bench_of_both_apis(sim_factory: Callable[..., SimServer], tmp_path: Path) -> None:
    """As a user runs it, with the check request first and the model found in /v1/models."""
    sim = sim_factory("--ttft-ms", "20", "--itl-ms", "2", "--model", "listed-model")
    for api, _path in APIS:
        out = tmp_path / f"{api}.json"
        done = run_cli("bench", "--url", sim.openai_url, "--api", api, "-n", "3", "--input-tokens", "8",
                       "--output-tokens", "16", "--json", str(out), "--no-store")
        assert done.returncode == 0, done.stderr
        data = json.loads(out.read_text())
        assert data["steps"][0]["summary"]["requests_completed"] == 3
        assert data["target"] == {"url": sim.openai_url, "api": api, "model": "listed-model"}
