"""Each of the five protocols measured against the simulator speaking it."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.conftest import SimServer
from tests.helpers import bench, kept_to_script, median, trace_truth_ms

CASES = [
    # api, path suffix, expected token source, server timings reported
    ("openai-chat", "/v1", "usage", False),
    ("openai-completions", "/v1", "usage", False),
    ("ollama", "", "native", True),
    ("tgi", "", "native", False),
    ("llamacpp", "", "native", True),
]


@pytest.fixture(scope="module")
def sim() -> object:
    from tests.conftest import start_sim

    server = start_sim("--ttft-ms", "30", "--itl-ms", "2", "--model", "m1")
    yield server
    server.stop()


@pytest.mark.timing
@pytest.mark.parametrize(("api", "suffix", "source", "timings"), CASES)
def test_protocol_is_measured_with_its_token_source(sim: SimServer, api: str, suffix: str, source: str,
                                                     timings: bool) -> None:
    sim.clear_trace()
    result = bench(sim.root + suffix, api=api, model="m1", concurrency=[2], requests=6, input_tokens=8,
                   output_tokens=32)
    summary = result.steps[0].summary
    assert summary.requests_failed == 0, summary.error_examples
    assert summary.requests_completed == 6
    assert summary.output_tokens_source == {source: 6}
    assert summary.output_tokens_total == 6 * 32
    assert summary.input_tokens_source and summary.input_tokens.mean == 8
    traces = sim.trace()
    # each request's TTFT as the client saw it is the simulator's own plus the loopback (which the client counts),
    # so the medians are in that order, whichever request is whose; then the simulator against its script
    server_ttft_ms = median([(t["event_ns"][0] - t["received_ns"]) / 1e6 for t in traces])
    client_ttft_ms = summary.ttft_ms.p50
    assert client_ttft_ms is not None and 0 <= client_ttft_ms - server_ttft_ms < 5.0, (client_ttft_ms, server_ttft_ms)
    server_tpot_ms = median([trace_truth_ms(t, t["received_ns"])[1] for t in traces])
    assert summary.tpot_ms.p50 == pytest.approx(server_tpot_ms, rel=0.05)
    assert kept_to_script(server_ttft_ms, 30.0) and server_tpot_ms == pytest.approx(2.0, rel=0.1), server_ttft_ms
    assert {t["path"] for t in traces} == {{"openai-chat": "/v1/chat/completions",
                                            "openai-completions": "/v1/completions", "ollama": "/api/chat",
                                            "tgi": "/generate_stream", "llamacpp": "/completion"}[api]}
    assert (summary.server_prefill_ms.count == 6) is timings
    if timings:
        assert summary.server_prefill_ms.p50 == pytest.approx(30.0, abs=5.0)
        assert summary.server_decode_tok_s.p50 == pytest.approx(500.0, rel=0.1)


def test_server_rejecting_include_usage_is_retried_without_it(sim_factory: Callable[..., SimServer]) -> None:
    sim = sim_factory("--ttft-ms", "5", "--itl-ms", "1", "--reject-stream-options")
    result = bench(sim.openai_url, concurrency=[1], requests=3, input_tokens=4, output_tokens=8)
    summary = result.steps[0].summary
    assert summary.requests_failed == 0
    assert summary.output_tokens_source == {"estimate": 3}  # no usage block, no local tokenizer
    assert summary.output_tokens_total == 24
    statuses = [t["status"] for t in sim.trace()]
    assert statuses == [400, 200, 200, 200]  # only the first request learned it the hard way
