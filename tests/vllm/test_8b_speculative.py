"""Speculative decoding against the real vLLM: its n-gram draft (prompt lookup), which the CPU build runs.

vLLM is started with ``--speculative-config`` (n-gram, `K` tokens drafted per step) and the bench sends a
prompt that repeats itself, so the lookup finds drafts and the target keeps most of them. Truth is vLLM's
own /metrics, read by the test just before and after the run: the step's speculative block
(`tokometer.observe.speculative`, from the bench's scrapes) must say what those counters' increases say.
Its per-step histogram (``vllm:inter_token_latency_seconds``: one observation per engine step that gave a
request tokens) counts the decode steps, so the acceptance must account for every token the client got,
and the client's TPOT is that step time spread over the tokens per step.

The vLLM is the one ``test_8_lora.py`` uses too (`tests.vllm.conftest.lora_ngram_vllm`: one start for both),
which also serves a LoRA; the requests here ask for the base model.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

import pytest

from tests.helpers import bench
from tests.vllm.conftest import NGRAM_SPEC, LoraNgramVllm, VllmServer
from tokometer.benchmark.results import BenchResult

K: int = NGRAM_SPEC["num_speculative_tokens"]
REQUESTS, OUTPUT = 6, 48
PROMPT = ("The cat sat on the mat. The dog sat on the log. The cat sat on the mat. The dog sat on the log. "
          "The cat sat on the")
_COUNTER = re.compile(r"^vllm:(spec_decode_num_\w+?)_total\{([^}]*)\} ([0-9.e+]+)$", re.MULTILINE)


@dataclass(frozen=True)
class SpecRun:
    """One bench run against the n-gram vLLM and vLLM's own draft counters' increases over it."""

    result: BenchResult
    delta: dict[str, float]


def _counters(server: VllmServer) -> dict[str, float]:
    """vLLM's spec-decode counters now: ``num_drafts``, ``num_draft_tokens``, ``num_accepted_tokens``,
    ``num_accepted_tokens_per_pos@i``."""
    out: dict[str, float] = {}
    for name, labels, value in _COUNTER.findall(server.metrics()):
        position = re.search(r'position="(\d+)"', labels)
        key = f"{name[len('spec_decode_'):]}@{position.group(1)}" if position else name[len("spec_decode_"):]
        out[key] = out.get(key, 0.0) + float(value)
    return out


@pytest.fixture(scope="module")
def ngram_vllm(lora_ngram_vllm: LoraNgramVllm) -> VllmServer:
    """A vLLM of its own, drafting with n-gram prompt lookup (`tests.vllm.conftest.NGRAM_SPEC`)."""
    return lora_ngram_vllm.server


def _measure(ngram_vllm: VllmServer) -> SpecRun:
    """A bench of the n-gram vLLM at 2 users, with its spec-decode counters' change over the run."""
    before = _counters(ngram_vllm)
    result = bench(ngram_vllm.openai_url, api_key=ngram_vllm.api_key, model=ngram_vllm.model, prompt=PROMPT,
                   concurrency=[2], requests=REQUESTS, output_tokens=OUTPUT, ignore_eos=True, temperature=0.0,
                   seed=4, gpu_metrics="off", scrape_interval_s=0.5)
    time.sleep(0.2)
    after = _counters(ngram_vllm)
    return SpecRun(result, {k: after[k] - before.get(k, 0.0) for k in after})


@pytest.mark.timing  # the bench's last scrape against the counters read 0.2 s later: a step short, on a busy host
def test_the_block_says_what_vllms_own_counters_say(ngram_vllm: VllmServer) -> None:
    spec_run = _measure(ngram_vllm)  # its own run (a few seconds), so that a rerun measures again
    step = spec_run.result.steps[0]
    assert step.summary.requests_completed == REQUESTS
    block = (step.server or {}).get("speculative")
    assert block is not None and block["source"] == "counters" and block["rejected"] == ""
    delta = spec_run.delta
    drafts, drafted, accepted = delta["num_drafts"], delta["num_draft_tokens"], delta["num_accepted_tokens"]
    assert drafts > 0 and drafted == K * drafts  # n-gram drafts K tokens each time it finds a match
    assert (block["drafts"], block["draft_tokens"], block["accepted_tokens"]) == (drafts, drafted, accepted)
    assert block["acceptance_rate"] == pytest.approx(accepted / drafted)
    assert block["acceptance_length"] == pytest.approx(1 + accepted / drafts)
    assert block["per_position"] == pytest.approx([delta[f"num_accepted_tokens_per_pos@{i}"] / drafts
                                                  for i in range(K)])
    # the prompt repeats: most drafts are kept (measured: 0.92 of drafted tokens, 3.75 tokens per step)
    assert block["acceptance_length"] > 2.0


@pytest.mark.timing  # as above: the histogram's count read at the bench's last scrape
def test_the_acceptance_accounts_for_every_token_the_client_got(ngram_vllm: VllmServer) -> None:
    step = _measure(ngram_vllm).result.steps[0]
    assert step.server is not None
    after_first = sum((r.output_tokens or 0) - 1 for r in step.records)  # the first token is the prefill's
    assert after_first == REQUESTS * (OUTPUT - 1)
    accepted = step.server["speculative"]["accepted_tokens"]
    # every decode step gives its request 1 token + the drafted ones it kept; the last step of an answer
    # may keep up to K beyond max_tokens (vLLM counts them accepted, then cuts the answer)
    steps = step.server["histograms"]["tpot"]["count"]
    assert after_first - accepted <= steps <= after_first - accepted + K * REQUESTS
    # the client saw no more arrivals than vLLM made steps (an event carries one step's tokens, or more)
    events_after_first = sum(len(r.event_ns) - 1 for r in step.records)
    assert events_after_first <= steps


@pytest.mark.timing
def test_tpot_is_the_step_time_over_the_tokens_per_step(ngram_vllm: VllmServer) -> None:
    """A time, measured by this test itself (a few seconds), so that a rerun measures again: beside the other lanes
    the module's shared run once gave a client TPOT of 51 ms against vLLM's 32 ms a token, three times over."""
    step = _measure(ngram_vllm).result.steps[0]
    assert step.server is not None
    histogram = step.server["histograms"]["tpot"]
    after_first = sum((r.output_tokens or 0) - 1 for r in step.records)
    tokens_per_step = after_first / histogram["count"]
    assert tokens_per_step > 1.5  # drafting made each step give several tokens
    # vLLM's mean step time over the tokens a step gave: the client's TPOT (measured: 28.2 ms against 29.5 ms)
    assert step.summary.tpot_ms.mean == pytest.approx(1000 * histogram["mean"] / tokens_per_step, rel=0.3)
