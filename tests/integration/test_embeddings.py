"""``bench --api openai-embeddings`` and ``--api rerank`` against `tokometer sim` (a real server on loopback)
and against raw-socket servers written for the purpose (tests/hostile_servers.py).

The simulator's trace says when each request arrived and when its answer was written, on the client's clock,
and how many input tokens it counted (one word, one token): the measured latency, inputs and input tokens are
held against it. With ``--hardware`` the simulator runs one pass at a time, each as long as
`tokometer.perf.embedding_pass_s` says: the measured latency and throughput are held against the formula.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import SimServer, run_cli
from tests.helpers import bench, median
from tests.hostile_servers import endless_body, hostile, json_answer
from tokometer.perf import Deployment, Efficiency, embedding_pass_s, resolve_hardware, resolve_model
from tokometer.protocols.embeddings.client import RERANK_QUERY

MS = 1e6


@pytest.mark.parametrize(("api", "path"), [("openai-embeddings", "/v1/embeddings"), ("rerank", "/v1/rerank")])
def test_latency_inputs_and_tokens_match_the_simulators_trace(sim_factory: Callable[..., SimServer], api: str,
                                                              path: str) -> None:
    sim = sim_factory("--ttft-ms", "40", "--model", "e1")
    n, batch, length = 12, 4, 32
    result = bench(sim.openai_url, api=api, model="e1", concurrency=[1], requests=n, input_tokens=length,
                   batch_size=batch, tokenizer="none")
    step = result.steps[0]
    s = step.summary
    traces = sim.trace()
    assert s.requests_failed == 0, s.error_examples
    assert len(traces) == n and {t["path"] for t in traces} == {path}
    per_input = length + (len(RERANK_QUERY.split()) if api == "rerank" else 0)  # vLLM counts query + document
    gaps = []
    for record, trace in zip(step.records, traces, strict=True):  # one at a time: the same order
        assert record.inputs == batch and record.input_tokens == trace["prompt_tokens"] == batch * per_input
        assert record.input_tokens_source == "usage" and record.first_token_ns == 0
        served = (trace["end_ns"] - trace["received_ns"]) / MS
        measured = (record.end_ns - record.sent_ns) / MS
        assert served >= 40 and measured > served  # sent before it arrived, ended after it was written
        gaps.append(measured - served)
    assert median(gaps) < 15  # the client's latency is the server's, plus the wire and the client's own work
    assert s.inputs_total == n * batch
    assert s.inputs_per_s == pytest.approx(n * batch / s.duration_s)
    assert s.request_throughput_rps == pytest.approx(n / s.duration_s)
    assert s.input_throughput_tok_s == pytest.approx(n * batch * per_input / s.duration_s)
    assert s.e2e_ms.p50 == pytest.approx(median([(t["end_ns"] - t["received_ns"]) / MS for t in traces]), abs=10)
    assert s.ttft_ms.count == s.tpot_ms.count == s.itl_ms.count == 0  # not streamed: no first token


def test_modelled_passes_take_the_roofline_prefill_and_queue(sim_factory: Callable[..., SimServer]) -> None:
    """One pass at a time: alone, a request takes the formula's time; four at once, each waits for the others,
    and the throughput is one pass per formula time."""
    scale, batch, length = 4.0, 8, 128
    sim = sim_factory("--model", "llama-3.1-8b", "--hardware", "H100-SXM", "--time-scale", str(scale))
    d = Deployment(resolve_model("llama-3.1-8b"), resolve_hardware("H100-SXM"), weight_dtype="bf16")
    pass_ms = embedding_pass_s(d, batch, length, Efficiency()) * scale * 1000
    assert pass_ms > 30  # long enough to measure on a loaded machine
    result = bench(sim.openai_url, api="openai-embeddings", model="llama-3.1-8b", concurrency=[1, 4], requests=12,
                   input_tokens=length, batch_size=batch, tokenizer="none")
    alone, queued = (step.summary for step in result.steps)
    assert alone.requests_failed == queued.requests_failed == 0
    served = [(t["end_ns"] - t["received_ns"]) / MS for t in sim.trace()]
    assert pass_ms - 1 <= median(served[:12]) <= 1.25 * pass_ms  # alone: the pass (a floor), no wait
    assert alone.e2e_ms.p50 is not None and alone.e2e_ms.p50 >= median(served[:12])
    assert 0.75 * 1000 / pass_ms <= queued.request_throughput_rps <= 1000 / pass_ms * 1.01  # one pass at a time
    assert median(served[12:]) > 2.5 * pass_ms  # waited behind the passes ahead of it
    assert queued.inputs_per_s == pytest.approx(batch * queued.request_throughput_rps)


def _embeddings(n: int) -> dict[str, object]:
    return {"data": [{"index": i, "embedding": [0.1, 0.2]} for i in range(n)], "usage": {"prompt_tokens": 5}}


def test_an_answer_with_too_few_results_or_an_endless_body_is_classified() -> None:
    with hostile({"/v1/embeddings": json_answer(_embeddings(2)), "/v1/models": json_answer({"data": []})}) as server:
        result = bench(server.url, api="openai-embeddings", model="m", concurrency=[1], requests=2, batch_size=3,
                       input_tokens=4, tokenizer="none")
    s = result.steps[0].summary
    assert s.errors == {"malformed_stream": 2}
    assert s.error_examples["malformed_stream"] == "the answer has 2 results for the 3 inputs sent"
    start = time.monotonic()
    with hostile({"/v1/embeddings": endless_body()}) as server:
        result = bench(server.url, api="openai-embeddings", model="m", concurrency=[1], requests=1, input_tokens=4,
                       tokenizer="none", request_timeout_s=60)
    s = result.steps[0].summary
    assert s.errors == {"protocol": 1}, s.error_examples
    assert "the answer" in s.error_examples["protocol"] and "64.0 MiB" in s.error_examples["protocol"]
    assert time.monotonic() - start < 30  # stopped at the size limit, not at the timeout


def test_cli_prints_the_batch_metrics_and_refuses_a_batch_for_chat(sim_factory: Callable[..., SimServer],
                                                                    tmp_path: Path) -> None:
    sim = sim_factory("--ttft-ms", "10")
    done = run_cli("bench", "--url", sim.openai_url, "--api", "openai-embeddings", "-c", "2", "-n", "6",
                   "--batch-size", "4", "--input-tokens", "16", "--tokenizer", "none", "--no-store")
    assert done.returncode == 0, done.stderr
    assert "inputs/s" in done.stdout and "24 inputs (4.0 per request)" in done.stdout
    assert "there is no TTFT, TPOT or ITL" in done.stdout
    out = tmp_path / "run.json"
    as_json = run_cli("bench", "--url", sim.openai_url, "--api", "rerank", "-n", "3", "--batch-size", "2",
                      "--input-tokens", "8", "--tokenizer", "none", "--no-store", "-q", "--json", str(out))
    assert as_json.returncode == 0, as_json.stderr
    summary = json.loads(out.read_text())["steps"][0]["summary"]
    assert summary["inputs_total"] == 6 and summary["inputs_per_s"] > 0
    refused = run_cli("bench", "--url", sim.openai_url, "--api", "openai-chat", "--batch-size", "4", "-n", "1")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert refused.stderr.strip().splitlines() == [
        "tokometer: error: --batch-size is the inputs of one embeddings or rerank request: give --api "
        "openai-embeddings or rerank (a generation request carries one prompt)"]
    doctor = run_cli("doctor", sim.openai_url, "--api", "rerank")
    assert doctor.returncode == 2 and doctor.stderr.strip().splitlines() == [
        "tokometer: error: doctor checks a generating server's streams; rerank answers are not streamed: measure "
        "them with tokometer bench --api rerank"]
