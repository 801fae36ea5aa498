"""Agent sessions (``bench --agents``) against the real vLLM, on the shared server of this directory.

A small synthetic workload (two sessions of an orchestrator with one sub-agent, a shared system prompt, tool
waits) runs with vLLM's prefix cache on (its default). Truth is vLLM's own /metrics, read just before and
after: the requests it finished, the prompt tokens it counted and the prompt tokens its prefix cache served
(``vllm:prefix_cache_hits``) must be what the turns' records say, turn by turn and in all. The shared vLLM
reports each answer's cached tokens (``--enable-prompt-tokens-details``, `tests.vllm.conftest`), so the reuse
the run reports is vLLM's, request by request.
"""

from __future__ import annotations

import re
import time
from collections import Counter

import pytest

from tests.helpers import bench
from tests.vllm.conftest import VllmServer
from tokometer.datasets.agentic_workload import agent_sessions

# every turn's answer length, the shape's own, which --ignore-eos keeps (until 2026-12-05 it asked for the run's
# --output-tokens instead, 128 by default: 158 s of bench on the 2-core AMD EPYC host, 8-token turns 31 s)
OUTPUT_TOKENS = 8
AGENTS = "synthetic:sessions=2,rate=4,turns=3,fan_out=1,fan_every=2,sub_turns=1,tool_latency=50ms,growth=48," \
         f"prefix=320,output={OUTPUT_TOKENS}"
SEED = 7
_TOTALS = {"requests": "vllm:request_success_total", "prompt_tokens": "vllm:prompt_tokens_total",
           "prefix_cache_hits": "vllm:prefix_cache_hits_total",
           "prefix_cache_queries": "vllm:prefix_cache_queries_total"}


def _totals(vllm: VllmServer) -> dict[str, float]:
    """vLLM's own counters now, each summed over its label sets (finish reasons, engines)."""
    text = vllm.metrics()
    return {key: sum(float(v) for v in re.findall(rf"^{re.escape(name)}(?:\{{[^}}]*\}})? ([0-9.e+]+)$", text,
                                                   re.MULTILINE))
            for key, name in _TOTALS.items()}


def test_agent_turns_counted_and_cached_as_vllm_counted_them(vllm: VllmServer) -> None:
    sessions, _ = agent_sessions(AGENTS, SEED)
    planned = Counter(k for s in sessions for k in range(len(s.turns)))
    before = _totals(vllm)
    result = bench(vllm.openai_url, api_key=vllm.api_key, model=vllm.model, agents=AGENTS, seed=SEED,
                   ignore_eos=True, gpu_metrics="off")
    time.sleep(0.2)
    after = _totals(vllm)
    delta = {k: after[k] - before[k] for k in after}
    step = result.steps[0]
    records = [r for r in step.records if not r.warmup]
    assert all(r.ok for r in records), [r.error_detail for r in records if not r.ok]
    # each answer the shape's 8 tokens long (--ignore-eos: vLLM's usage counts what the turn asked for)
    assert {r.output_tokens for r in records} == {OUTPUT_TOKENS}
    # every turn of every session ran once, and vLLM finished exactly those requests
    assert Counter(r.turn for r in records) == planned
    assert delta["requests"] == len(records) == sum(planned.values())
    # the prompt tokens vLLM counted are the turns' (its usage, turn by turn)
    assert all(r.input_tokens_source == "usage" for r in records)
    assert delta["prompt_tokens"] == sum(r.input_tokens or 0 for r in records)
    block = step.summary.agentic
    assert block is not None and block["sessions"] == len(sessions) and block["completed"] == len(sessions)
    by_turn = {row["turn"]: row for row in block["by_turn"]}
    for k, count in planned.items():
        mine = [r for r in records if r.turn == k]
        assert by_turn[k + 1]["requests"] == count
        assert by_turn[k + 1]["input_tokens_mean"] * count == sum(r.input_tokens or 0 for r in mine)
    # the prefix cache: what each answer said it took from the cache is what vLLM's hit counter counted
    cached = [r.server.cached_tokens if r.server is not None else None for r in records]
    if None in cached and vllm.serve is None:
        pytest.skip("the vLLM at TOKOMETER_TEST_VLLM_URL does not report cached tokens: start it with "
                    "--enable-prompt-tokens-details")
    assert None not in cached
    assert sum(n or 0 for n in cached) == delta["prefix_cache_hits"] > 0
    assert delta["prefix_cache_queries"] == delta["prompt_tokens"]
    # later turns resend the session's conversation: the cache serves most of their prompt
    assert block["prompt_cache_hit_rate"] == pytest.approx(sum(n or 0 for n in cached) / delta["prompt_tokens"])
    assert by_turn[max(by_turn)]["prompt_cache_hit_rate"] > 0.5
