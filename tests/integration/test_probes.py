"""Probes beside the load (``bench --probe-rate``), held against the simulator's own log of every request.

Against the modelled engine with a small batch (``--max-num-seqs``) and more requests in flight than it
holds, a newcomer waits in the engine's queue: the simulator stamps when it received each request,
when its scheduler admitted it and when its first token went out. The probes' TTFT must be that wait
(plus the prefill), and the probes must stay out of the step's own records.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

import pytest

from tests.conftest import SimServer
from tests.helpers import bench

OFF = {"server_metrics": "off", "gpu_metrics": "off"}


def _probes(trace: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [t for t in trace if t["completion_tokens"] == 1]


def test_saturated_probes_wait_in_the_engines_queue_as_its_log_says(sim_factory: Callable[..., SimServer]) -> None:
    sim = sim_factory("--hardware", "H100-SXM", "--model", "llama-3.1-8b", "--max-num-seqs", "2", "--time-scale", "2")
    result = bench(sim.openai_url, concurrency=[8], requests=24, input_tokens=64, output_tokens=48, probe_rate=3.0,
                   seed=11, **OFF)
    summary = result.steps[0].summary
    trace = sim.trace()
    probes = _probes(trace)
    block = summary.probe
    assert block is not None and block.sent == len(probes) > 3 and block.completed == block.sent
    # the step's own records and metrics hold its 24 requests, none of the probes
    assert summary.requests_completed == 24 == len(result.steps[0].records)
    assert summary.output_tokens_total == 24 * 48 and all(r.output_tokens == 48 for r in result.steps[0].records)
    # truth: the simulator's first token minus its receipt of each probe; most of it waiting for admission
    true_ttft = sorted((t["event_ns"][0] - t["received_ns"]) / 1e6 for t in probes)
    queued = [(t["admitted_ns"] - t["received_ns"]) / 1e6 for t in probes]
    assert all(t["admitted_ns"] >= t["received_ns"] for t in probes)
    assert statistics.median(queued) > 0.5 * statistics.median(true_ttft)
    assert block.ttft_ms.p50 is not None and block.ttft_ms.max is not None
    assert block.ttft_ms.p50 == pytest.approx(statistics.median(true_ttft), rel=0.2)
    assert block.ttft_ms.max >= true_ttft[-1]  # the client sees the server's time, and the wire's on top
    # the load saturates the batch: a probe waits in the queue far longer than it then takes to answer
    served = [(t["event_ns"][0] - t["admitted_ns"]) / 1e6 for t in probes]
    assert statistics.median(queued) > 5 * statistics.median(served)
    assert block.ttft_ms.p50 > 5 * statistics.median(served)


@pytest.mark.timing  # the probes' TTFT against the script's 20 ms: 56 ms read beside the other lanes
def test_probes_beside_an_open_loop_and_sessions_are_kept_apart(sim_factory: Callable[..., SimServer]) -> None:
    sim = sim_factory("--ttft-ms", "20", "--itl-ms", "2")
    result = bench(sim.openai_url, rate=[20.0], duration_s=1.5, input_tokens=16, output_tokens=8, probe_rate=10.0,
                   seed=3, **OFF)
    step = result.steps[0]
    trace = sim.trace()
    assert step.summary.probe is not None and step.summary.probe.sent == len(_probes(trace)) >= 3
    assert len(step.records) == len(trace) - len(_probes(trace))
    assert step.summary.probe.ttft_ms.p50 == pytest.approx(20.0, abs=15.0)  # an idle scripted server: its TTFT
    sim.clear_trace()
    sessions = bench(sim.openai_url, concurrency=[2], sessions=3, turns="2", input_tokens=16, output_tokens=8,
                     probe_rate=10.0, seed=4, **OFF)
    block = sessions.steps[0].summary.probe
    assert block is not None and block.sent == len(_probes(sim.trace()))
    assert all(r.output_tokens == 8 for r in sessions.steps[0].records)


def test_probe_rate_needs_a_generation_api() -> None:
    from tokometer.benchmark.spec import BenchSpec
    from tokometer.util.errors import TokometerError

    with pytest.raises((ValueError, TokometerError)):
        BenchSpec(url="http://127.0.0.1:1/v1", api="openai-embeddings", requests=1, probe_rate=1.0)
    with pytest.raises(ValueError):
        BenchSpec(url="http://127.0.0.1:1/v1", requests=1, probe_rate=0.0)


def test_a_server_that_never_answers_holds_at_most_the_cap_of_probes(monkeypatch: pytest.MonkeyPatch) -> None:
    """A server that reads each request and never answers: probes due while the cap is in flight are skipped,
    counted, and those in flight end by the client's own idle deadline."""
    import asyncio

    from tests.hostile_servers import hostile, silent
    from tokometer.client.streamclient import StreamClient, Target, Timeouts
    from tokometer.load import probes
    from tokometer.load.runner import StepOutcome
    from tokometer.load.selfcheck import ClientHealth
    from tokometer.metrics.probes import summarize_probes
    from tokometer.protocols.common.base import GenerationParams
    from tokometer.protocols.registry import create_client

    monkeypatch.setattr(probes, "MAX_PROBES_IN_FLIGHT", 3)

    async def step() -> StepOutcome:
        await asyncio.sleep(0.6)  # the step ends before any probe's idle deadline (1 s after it was sent)
        return StepOutcome([], ClientHealth(0.0, 0.0, 0.0, None))

    async def run(url: str) -> tuple[StepOutcome, probes.Probes]:
        client = StreamClient(Target(url), create_client("openai-chat"), GenerationParams(model="m"),
                              Timeouts(connect=2.0, idle=1.0, total=3.0))
        prober = probes.Prober(50.0, client)
        try:
            return await prober.beside(step(), 0, seed=1)
        finally:
            await prober.close()

    with hostile({"/v1/chat/completions": silent}) as server:
        _, done = asyncio.run(run(server.url))
    assert len(done.records) == 3 and done.skipped > 10
    block = summarize_probes(done.records, 50.0, skipped=done.skipped)
    assert block.completed == 0 and block.failed == 3 and f"{done.skipped} not sent" in block.line()
