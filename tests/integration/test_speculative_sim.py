"""Speculative decoding measured against the simulator's truth: its draft model's counters and configuration.

A simulator with ``--spec-tokens k --spec-acceptance a`` emits, per step, 1 + the accepted tokens
(`tokometer.sim.speculative`) and exports vLLM's draft counters (or SGLang's gauges). The bench's
step server block, read from those counters, is held against the simulator's own send trace (one
draft per step after the first token) and against the geometric truth of its configuration.
"""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Callable

import pytest

from tests.conftest import SimServer
from tests.helpers import bench
from tokometer.observe.prometheus import parse
from tokometer.observe.server_window import server_window
from tokometer.observe.snapshot import Snapshot
from tokometer.sim.speculative import expected_acceptance_length

K, A, ITL_MS = 3, 0.6, 4.0
REQUESTS, OUTPUT = 40, 48


def _scrape(root: str) -> Snapshot:
    with urllib.request.urlopen(root + "/metrics", timeout=10) as response:
        return parse(response.read().decode(), time.perf_counter_ns())


def _sim(sim_factory: Callable[..., SimServer], *extra: str) -> SimServer:
    return sim_factory("--ttft-ms", "10", "--itl-ms", str(ITL_MS), "--spec-tokens", str(K), "--spec-acceptance",
                       str(A), "--seed", "5", *extra)


def test_counters_over_the_run_equal_the_simulators_own_steps(sim_factory: Callable[..., SimServer]) -> None:
    sim = _sim(sim_factory)
    before = _scrape(sim.root)
    result = bench(sim.openai_url, concurrency=[4], requests=REQUESTS, input_tokens=16, output_tokens=OUTPUT,
                   server_metrics="off", gpu_metrics="off")
    spec = server_window([before, _scrape(sim.root)]).speculative
    trace = sim.trace()
    assert len(trace) == REQUESTS and result.steps[0].summary.output_tokens_total == REQUESTS * OUTPUT
    steps = sum(len(t["event_tokens"]) - 1 for t in trace)  # every event after the prefill's first is one step
    assert spec is not None and spec.source == "counters"
    assert spec.drafts == steps and spec.draft_tokens == K * steps
    emitted_beyond_one = sum(t["completion_tokens"] - len(t["event_tokens"]) for t in trace)
    assert spec.accepted_tokens is not None and spec.accepted_tokens >= emitted_beyond_one  # the last step is cut
    # the configuration's truth: a^1 + ... + a^k accepted per draft, within sampling error of ~1,000 drafts
    truth = expected_acceptance_length(K, A)
    assert spec.acceptance_length == pytest.approx(truth, abs=0.15)
    assert spec.acceptance_rate == pytest.approx((truth - 1) / K, abs=0.05)
    assert len(spec.per_position) == K and spec.per_position[0] == pytest.approx(A, abs=0.06)


@pytest.mark.timing
def test_the_step_summary_carries_the_block_and_tpot_follows_the_acceptance(
        sim_factory: Callable[..., SimServer]) -> None:
    sim = _sim(sim_factory)
    result = bench(sim.openai_url, concurrency=[4], requests=REQUESTS, input_tokens=16, output_tokens=OUTPUT,
                   gpu_metrics="off", scrape_interval_s=0.2)
    step = result.steps[0]
    block = (step.server or {}).get("speculative")
    assert block is not None and block["source"] == "counters"
    assert block["acceptance_length"] == pytest.approx(expected_acceptance_length(K, A), abs=0.2)
    # TPOT truth from the simulator's trace: its steps' time over the tokens they carried, per request
    trace = sim.trace()
    true_tpot = [(t["event_ns"][-1] - t["event_ns"][0]) / 1e6 / (t["completion_tokens"] - 1) for t in trace]
    tpot = step.summary.tpot_ms
    assert tpot.mean == pytest.approx(sum(true_tpot) / len(true_tpot), rel=0.1)
    # and from the configuration: a step of ITL_MS carries 1 + accepted tokens (cut at the answer's end)
    tokens_per_step = sum(t["completion_tokens"] - 1 for t in trace) / sum(len(t["event_tokens"]) - 1 for t in trace)
    assert tokens_per_step == pytest.approx(block["acceptance_length"], abs=0.2)
    assert tpot.p50 == pytest.approx(ITL_MS / tokens_per_step, rel=0.35)


def test_sglang_names_give_the_gauges(sim_factory: Callable[..., SimServer]) -> None:
    sim = _sim(sim_factory, "--metrics-names", "sglang")
    before = _scrape(sim.root)
    bench(sim.openai_url, concurrency=[2], requests=10, input_tokens=16, output_tokens=32, server_metrics="off",
          gpu_metrics="off")
    after = _scrape(sim.root)
    spec = server_window([before, after]).speculative
    assert before.gauges.get("spec_accept_length") is None  # nothing drafted yet: no gauge
    assert spec is not None and spec.source == "gauges" and spec.acceptance_length is not None
    assert spec.acceptance_length == pytest.approx(after.gauges["spec_accept_length"])


def test_the_modelled_engine_drafts_in_its_steps(sim_factory: Callable[..., SimServer]) -> None:
    sim = sim_factory("--hardware", "H100-SXM", "--model", "llama-3.1-8b", "--spec-tokens", "4", "--spec-acceptance",
                      "0.8", "--spec-draft-cost", "0.05", "--seed", "2")
    before = _scrape(sim.root)
    bench(sim.openai_url, concurrency=[8], requests=24, input_tokens=64, output_tokens=64, server_metrics="off",
          gpu_metrics="off")
    spec = server_window([before, _scrape(sim.root)]).speculative
    trace = sim.trace()
    assert spec is not None and spec.drafts == sum(len(t["event_tokens"]) - 1 for t in trace)
    assert spec.acceptance_length == pytest.approx(expected_acceptance_length(4, 0.8), abs=0.25)
