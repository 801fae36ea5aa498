"""Speculative decoding per request, where the answer says it (SGLang's ``meta_info``), against two truths.

- Hand-written raw-socket servers (`tests.http_servers.RawServer`) stream an answer ending with a ``meta_info``
  of SGLang's names (``spec_verify_ct``, ``spec_accept_token_num``, ``spec_draft_token_num``), well-formed or wrong
  in one chosen way (a negative, a string, a float, more kept than drafted, more verify steps than tokens, a
  count past any request): the good one is read onto the record and summed in the step's ``speculative``
  block; each bad one is not believed, said on the record, and leaves no block. No real engine sends those on
  demand; SGLang itself attaches ``meta_info`` to native and non-streamed OpenAI answers only.
- The simulator's draft (``--spec-tokens --spec-acceptance --spec-meta``) sends each answer's own counts; its
  trace (the tokens of every event: one verify step each after the first) is the truth they are held to.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.conftest import SimServer
from tests.helpers import bench
from tests.integration.test_server_numbers import WORDS, _chat, _run, _sse, _stream
from tokometer.sim.speculative import expected_acceptance_length


def _with_meta(meta: dict[str, Any]) -> list[bytes]:
    """The chat stream of `WORDS` (4 tokens by usage) with ``meta`` as its last event's ``meta_info``."""
    events = _chat({"prompt_tokens": 3, "completion_tokens": len(WORDS), "total_tokens": 3 + len(WORDS)})
    return events[:-1] + _sse({"choices": [], "meta_info": meta}) + events[-1:]


def test_the_answers_counts_are_read_and_summed() -> None:
    step = _run(_stream(_with_meta({"spec_verify_ct": 2, "spec_accept_token_num": 1, "spec_draft_token_num": 6,
                                    "spec_accept_rate": 0.16, "spec_accept_length": 2.0}))).steps[0]
    assert all(r.server is not None and (r.server.spec_verify_steps, r.server.spec_accepted_tokens,
                                         r.server.spec_draft_tokens) == (2, 1, 6) for r in step.records)
    block = step.summary.speculative
    assert block is not None and block["source"] == "responses" and block["requests"] == 2
    assert (block["drafts"], block["draft_tokens"], block["accepted_tokens"]) == (4, 12, 2)
    assert block["acceptance_rate"] == pytest.approx(2 / 12) and block["acceptance_length"] == pytest.approx(1.5)
    assert step.summary.server_numbers_rejected == 0


@pytest.mark.parametrize(("meta", "said"), [
    ({"spec_verify_ct": -1, "spec_accept_token_num": 1, "spec_draft_token_num": 3}, "negative"),
    ({"spec_verify_ct": "2", "spec_accept_token_num": 1, "spec_draft_token_num": 3}, "not a number"),
    ({"spec_verify_ct": 2.5, "spec_accept_token_num": 1, "spec_draft_token_num": 3}, "not a whole number"),
    ({"spec_verify_ct": 10**12, "spec_accept_token_num": 1, "spec_draft_token_num": 3}, "beyond any request"),
    ({"spec_verify_ct": 2, "spec_accept_token_num": 5, "spec_draft_token_num": 3}, "more than completion_tokens"),
    ({"spec_verify_ct": 2, "spec_accept_token_num": 3, "spec_draft_token_num": 2}, "more than spec_draft_tokens"),
    ({"spec_verify_ct": 9, "spec_accept_token_num": 1, "spec_draft_token_num": 27}, "more than completion_tokens"),
    ({"spec_verify_ct": 2, "spec_accepted_drafts": True, "spec_draft_token_num": 6}, "not a number"),
    ({"spec_verify_ct": 2, "spec_accept_token_num": 1, "spec_proposed_drafts": [6]}, "not a number"),
])
def test_a_count_no_request_can_have_is_not_believed(meta: dict[str, Any], said: str) -> None:
    step = _run(_stream(_with_meta(meta))).steps[0]
    assert step.summary.requests_completed == 2
    assert step.summary.speculative is None  # a request without all three counts gives none
    assert all(r.rejected_numbers and said in r.rejected_numbers for r in step.records), \
        [r.rejected_numbers for r in step.records]


K, A = 3, 0.6


def test_the_simulators_answers_say_their_own_steps(sim_factory: Callable[..., SimServer]) -> None:
    sim = sim_factory("--ttft-ms", "5", "--itl-ms", "2", "--spec-tokens", str(K), "--spec-acceptance", str(A),
                      "--spec-meta", "--seed", "3")
    result = bench(sim.openai_url, concurrency=[4], requests=40, input_tokens=16, output_tokens=48,
                   server_metrics="off", gpu_metrics="off")
    step = result.steps[0]
    trace = sim.trace()
    truth_steps = sum(len(t["event_tokens"]) - 1 for t in trace)  # each event after the prefill's: one step
    truth_kept = sum(t["completion_tokens"] - 1 - (len(t["event_tokens"]) - 1) for t in trace)
    block = step.summary.speculative
    assert block is not None and block["requests"] == len(trace) == 40
    assert block["drafts"] == truth_steps and block["draft_tokens"] == K * truth_steps
    assert block["accepted_tokens"] == truth_kept
    # every answer: its steps and kept tokens account for its tokens after the prefill's first
    for r in step.records:
        assert r.server is not None and r.server.spec_verify_steps is not None
        assert r.output_tokens == 1 + r.server.spec_verify_steps + (r.server.spec_accepted_tokens or 0)
    # the configuration's truth, less the drafts cut at each answer's end (kept are only those within it)
    assert block["acceptance_length"] == pytest.approx(expected_acceptance_length(K, A), abs=0.25)
    assert block["acceptance_length"] <= expected_acceptance_length(K, A) + 0.15
