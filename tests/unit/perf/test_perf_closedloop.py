"""The closed loop at a fixed concurrency (`tokometer.perf.closedloop`): prompts arriving as answers end."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from tokometer.cli.estimate import command as estimate_command
from tokometer.perf import Deployment, Efficiency, estimate, resolve_hardware, resolve_model
from tokometer.perf.closedloop import (
    STEP_TOKENS,
    closed_loop,
    in_flight_s,
    kv_room,
    largest_within,
    prompts_waiting_ahead,
)
from tokometer.perf.roofline import decode_step_s, mixed_step_s, prefill_s


def llama70b_on_two_h100() -> Deployment:
    return Deployment(resolve_model("llama-3.3-70b"), resolve_hardware("H100-SXM"), "fp8", "fp8", tp=2)


def test_fifty_users_with_long_prompts_see_what_the_published_benchmark_saw() -> None:
    # Llama 3.3 70B FP8 on two H100, 5,000 → 500 tokens at concurrency 50: 814 output tok/s, ITL 59.7 ms
    # published; decode alone would promise twice that. Nothing here is fitted to it.
    c = closed_loop(llama70b_on_two_h100(), 50, 5000, 500, Efficiency())
    assert c.aggregate_tok_s == pytest.approx(814, rel=0.15)
    assert c.itl_s * 1e3 == pytest.approx(59.7, rel=0.15)
    decode_only = 50 / decode_step_s(llama70b_on_two_h100(), 50, 50 * 5250, Efficiency())
    assert decode_only > 1.8 * c.aggregate_tok_s
    # a 5,000-token prompt fits one 8,192-token step beside 50 decodes: it rides in one step of 10 %
    assert c.prefill_tokens == 5000 and c.prefill_share == pytest.approx(49 / 500) and not c.saturated
    assert c.aggregate_tok_s == pytest.approx(50 * 500 / (c.ttft_s + 499 * c.itl_s))
    assert c.per_request_tok_s == pytest.approx(1 / c.itl_s)


def test_one_user_decodes_alone_after_its_own_prefill() -> None:
    d, eff = llama70b_on_two_h100(), Efficiency()
    c = closed_loop(d, 1, 2000, 300, eff)
    assert c.itl_s == pytest.approx(decode_step_s(d, 1, 2150, eff))
    assert c.ttft_s == pytest.approx(prefill_s(d, 2000, 0, eff))  # nothing in flight to wait for
    assert c.aggregate_tok_s == pytest.approx(300 / (c.ttft_s + 299 * c.itl_s))


def test_a_prompt_longer_than_the_step_budget_is_prefilled_in_chunks() -> None:
    d, eff = llama70b_on_two_h100(), Efficiency()
    c = closed_loop(d, 8, 20_000, 2000, eff)
    k = math.ceil(20_000 / (STEP_TOKENS - 8))  # 3 chunks of 6,667 tokens
    assert c.prefill_tokens == pytest.approx(20_000 / k)
    own = mixed_step_s(d, 7, 7 * 21_000, 20_000 / k, (20_000 - 20_000 / k) / 2, eff)
    f, d_s, m_s = c.prefill_share, c.decode_step_s, c.prefill_step_s
    in_flight = ((1 - f) * d_s**2 + f * m_s**2) / (2 * c.itl_s)  # E[S²] / (2 E[S]) over the steps' mix
    assert in_flight > c.itl_s / 2
    demand = k * (own - mixed_step_s(d, 7, 7 * 21_000, 0, 0, eff))
    queued = prompts_waiting_ahead(8, demand, 1999 * c.itl_s)
    assert c.ttft_s == pytest.approx(in_flight + queued * demand + k * own)
    smaller = closed_loop(d, 8, 20_000, 2000, eff, step_tokens=2048)
    assert smaller.ttft_s > c.ttft_s  # ten chunks, each paying the weight read and the collectives


def test_prompts_faster_than_the_budget_admits_saturate_the_engine() -> None:
    d, eff = llama70b_on_two_h100(), Efficiency()
    c = closed_loop(d, 256, 4000, 50, eff)  # 256 × 4,000 / 50 = 20,480 prompt tokens a step wanted
    assert c.saturated
    assert c.decode_batch == pytest.approx(STEP_TOKENS * 50 / 4050)
    assert c.aggregate_tok_s == pytest.approx(c.decode_batch / c.itl_s)
    assert c.ttft_s > 10 * c.itl_s  # the others wait in line for their prefill
    # one user whose prompt alone overfills the budget: ~20,000 / 8,191 steps of prefill, then its one token
    alone = closed_loop(d, 1, 20_000, 1, eff)
    assert alone.saturated and alone.ttft_s == pytest.approx(20_000 / (STEP_TOKENS - 1) * alone.itl_s)


def test_without_chunked_prefill_the_prompts_stall_decoding() -> None:
    d, eff = llama70b_on_two_h100(), Efficiency()
    c = closed_loop(d, 50, 5000, 500, eff, chunked=False)
    assert not c.chunked and c.prefill_step_s == pytest.approx(prefill_s(d, 5000, 0, eff))
    assert c.itl_s == pytest.approx(c.decode_step_s + 49 / 500 * c.prefill_step_s)
    r = 49 / 500
    in_flight = (c.decode_step_s**2 + r * c.prefill_step_s**2) / (2 * c.itl_s)
    queued = prompts_waiting_ahead(50, c.prefill_step_s, 499 * c.itl_s)
    assert 0 < queued < 1
    assert c.ttft_s == pytest.approx(in_flight + queued * c.prefill_step_s + c.prefill_step_s)


def test_a_prompt_waits_for_the_step_in_flight_as_a_random_moment_meets_it() -> None:
    """A random moment falls in a long step in proportion to its length: E[S²] / (2 E[S]), not half the mean."""
    assert in_flight_s(((1.0, 0.030),)) == pytest.approx(0.015)  # alike steps: half a step
    assert in_flight_s(((3.0, 0.030), (5.0, 0.030))) == pytest.approx(0.015)
    # nine short steps of 30 ms to one of 400 ms: the mean step is 67 ms, but a moment falls in the long one 60 %
    # of the time and then waits 200 ms on average: (0.9 × 0.03² + 0.1 × 0.4²) / (2 × 0.067) = 125.5 ms
    assert in_flight_s(((0.9, 0.030), (0.1, 0.400))) == pytest.approx(0.01681 / 0.134)
    assert in_flight_s(()) == 0.0 and in_flight_s(((0.0, 1.0),)) == 0.0


def test_prompts_wait_behind_one_another_as_their_prefill_fills_the_time() -> None:
    """Mean value analysis of the closed loop: none wait with one user, or with prompts whose compute is small
    beside the users' decoding; more wait as it fills the time; never more than the other users."""
    assert prompts_waiting_ahead(1, 0.4, 30.0) == 0.0 and prompts_waiting_ahead(50, 0.0, 30.0) == 0.0
    assert prompts_waiting_ahead(250, 0.002, 4.0) < 0.01  # short prompts: 200 tokens' compute beside 4 s of answer
    light, heavy = prompts_waiting_ahead(5, 0.36, 12.0), prompts_waiting_ahead(50, 0.36, 32.0)
    assert light < 0.02 < heavy < 1.0
    # at 2 users the arriving prompt meets the other's prompt waiting only if both sent at once: none wait
    assert prompts_waiting_ahead(2, 1.0, 1.0) == 0.0
    # far past what the prefill can serve (users × D ≫ think + D) nearly all the others wait
    assert 90 < prompts_waiting_ahead(100, 1.0, 1.0) <= 99
    assert all(prompts_waiting_ahead(n, 0.36, 32.0) <= prompts_waiting_ahead(n + 10, 0.36, 32.0)
               for n in range(1, 200, 10))


def test_short_prompts_and_long_answers_come_close_to_decode_only() -> None:
    d, eff = llama70b_on_two_h100(), Efficiency()
    c = closed_loop(d, 32, 100, 2000, eff)
    assert c.aggregate_tok_s == pytest.approx(32 / decode_step_s(d, 32, 32 * 1100, eff), rel=0.03)


@settings(max_examples=25, deadline=None, derandomize=True, database=None)
@given(batch=st.integers(1, 600), prompt=st.integers(1, 40_000), answer=st.integers(1, 4000),
       chunked=st.booleans())
def test_prompts_arriving_never_beat_decode_only(batch: int, prompt: int, answer: int, chunked: bool) -> None:
    d, eff = llama70b_on_two_h100(), Efficiency()
    c = closed_loop(d, batch, prompt, answer, eff, chunked=chunked)
    decode_only = batch / decode_step_s(d, batch, batch * (prompt + answer / 2), eff)
    # (1e-4: a one-token prompt's prefill reads 1 token of cache where decode only takes I + O / 2 mid-answer)
    assert 0 < c.aggregate_tok_s <= decode_only * (1 + 1e-4)
    assert c.ttft_s > 0
    assert c.saturated or c.itl_s >= c.decode_step_s * (1 - 1e-9)


def test_the_batch_row_of_the_command_is_the_closed_loop(tmp_path: Path) -> None:
    out = tmp_path / "e.json"
    args = ["--model", "llama-3.3-70b", "--hardware", "H100-SXM", "--dtype", "fp8", "--tp", "2", "--batch", "50",
            "--input-tokens", "5000", "--output-tokens", "500", "--json", str(out)]
    result = CliRunner().invoke(estimate_command, args)
    assert result.exit_code == 0, result.output
    assert "closed loop" in result.output and "decode-only" in result.output
    row = json.loads(out.read_text())["estimate"]["batches"][0]
    assert row["aggregate_tok_s"]["expected"] == pytest.approx(814, rel=0.15)
    assert row["itl_ms"]["expected"] == pytest.approx(59.7, rel=0.15)
    assert row["ttft_ms"]["expected"] > row["itl_ms"]["expected"]
    assert row["decode_only"]["aggregate_tok_s"]["expected"] > 1.8 * row["aggregate_tok_s"]["expected"]
    assert row["closed_loop"]["expected"]["prefill"] == "chunked"
    separate = CliRunner().invoke(estimate_command, [*args, "--no-chunked-prefill"])
    assert separate.exit_code == 0 and "steps of its own" in separate.output
    assert json.loads(out.read_text())["estimate"]["closed_loop"]["prefill"] == "separate steps"
    for bad in ("0", "abc", "-5"):  # a step budget must be a whole number of tokens, 16 at least
        refused = CliRunner().invoke(estimate_command, [*args, "--step-tokens", bad])
        assert refused.exit_code == 2 and "--step-tokens" in refused.output


def test_more_users_than_the_kv_cache_holds_wait_for_a_slot() -> None:
    # 70B FP8 on two H100 holds 19 sequences of 20,000 + 2,000 tokens: 250 users run 19 at a time, the rest
    # queue a whole cycle a round, so the aggregate is 19 users' and TTFT grows by the rounds waited
    d, eff = llama70b_on_two_h100(), Efficiency()
    room = kv_room(d, 20_000, 2000)
    assert room == d.kv_capacity_tokens() // 22_000 and 1 < room < 50
    held, crowd = closed_loop(d, room, 20_000, 2000, eff), closed_loop(d, 250, 20_000, 2000, eff)
    assert crowd.aggregate_tok_s == pytest.approx(held.aggregate_tok_s)
    assert crowd.itl_s == held.itl_s and crowd.batch == 250
    assert crowd.ttft_s == pytest.approx(held.ttft_s + (250 / room - 1) * held.cycle_s)
    # below the cache's room nothing changes
    assert closed_loop(d, 5, 20_000, 2000, eff).ttft_s < held.ttft_s


def test_the_largest_load_within_latency_limits() -> None:
    # MLPerf's Server scenario scores the load whose TTFT and TPOT stay within its limits: the closed loop at
    # the largest concurrency that meets both, one more user breaking one of them
    d, eff = llama70b_on_two_h100(), Efficiency()
    best = largest_within(d, 5000, 500, 2.0, 0.060, eff)
    assert best is not None and best.ttft_s <= 2.0 and best.itl_s <= 0.060
    over = closed_loop(d, best.batch + 1, 5000, 500, eff)
    assert over.ttft_s > 2.0 or over.itl_s > 0.060
    looser = largest_within(d, 5000, 500, 2.0, 0.090, eff)
    assert looser is not None and looser.batch > best.batch and looser.aggregate_tok_s > best.aggregate_tok_s
    assert largest_within(d, 5000, 500, 2.0, 0.001, eff) is None  # not even one user's step is that fast


def test_the_estimate_s_memory_share_sets_the_room_of_its_closed_loop() -> None:
    d, eff = llama70b_on_two_h100(), Efficiency()
    more = d.kv_capacity_tokens(0.95)
    assert kv_room(d, 20_000, 2000, 0.95) == more // 22_000 > kv_room(d, 20_000, 2000)
    wide = closed_loop(d, 250, 20_000, 2000, eff, gpu_memory_utilization=0.95)
    held = closed_loop(d, more // 22_000, 20_000, 2000, eff, gpu_memory_utilization=0.95)
    assert wide.aggregate_tok_s == pytest.approx(held.aggregate_tok_s)
    assert wide.aggregate_tok_s > closed_loop(d, 250, 20_000, 2000, eff).aggregate_tok_s  # more room: more at once
    row = estimate(d, [250], 20_000, 2000, eff, 0.95).rows[0]
    assert not row.fits and row.closed_expected.aggregate_tok_s == pytest.approx(wide.aggregate_tok_s)


def test_more_users_than_the_engine_s_batch_limit_wait_for_a_slot(tmp_path: Path) -> None:
    # vLLM's --max-num-seqs (256 by default below 70 GiB) caps the sequences a step holds whatever the cache has
    # room for: 8B FP8 on one H100 holds thousands of 200 + 200-token sequences, but 1,024 users run 256 at a time
    d, eff = Deployment(resolve_model("llama-3.1-8b"), resolve_hardware("H100-SXM"), "fp8", "fp8"), Efficiency()
    assert kv_room(d, 200, 200) > 1024
    held, crowd = closed_loop(d, 256, 200, 200, eff), closed_loop(d, 1024, 200, 200, eff, max_batch=256)
    assert crowd.batch == 1024 and crowd.itl_s == held.itl_s
    assert crowd.aggregate_tok_s == pytest.approx(held.aggregate_tok_s)
    assert crowd.ttft_s == pytest.approx(held.ttft_s + (1024 / 256 - 1) * held.cycle_s)
    assert closed_loop(d, 200, 200, 200, eff, max_batch=256) == closed_loop(d, 200, 200, 200, eff)  # within it
    # attention data parallel: each of the TP ranks schedules its own, so the engine holds max_batch × TP
    moe = Deployment(resolve_model("qwen3-30b-a3b"), resolve_hardware("H100-SXM"), "fp8", "fp8", tp=2,
                     attention_dp=True)
    assert closed_loop(moe, 400, 200, 200, eff, max_batch=256) == closed_loop(moe, 400, 200, 200, eff)
    # the command: the rows, max load and the JSON take it; a limit below 1 is refused
    out = tmp_path / "e.json"
    args = ["-m", "llama-3.1-8b", "-H", "H100-SXM", "--dtype", "fp8", "-b", "1024", "--input-tokens", "200",
            "--output-tokens", "200", "--json", str(out)]
    result = CliRunner().invoke(estimate_command, [*args, "--max-batch", "256"])
    assert result.exit_code == 0, result.output
    assert "above the engine's batch limit (256 sequences at once" in result.output
    doc = json.loads(out.read_text())["estimate"]
    assert doc["closed_loop"]["max_batch"] == 256
    assert doc["max_load"]["batch"] == 256 and doc["max_load"]["batch_limited_by"] == "batch limit"
    assert doc["batches"][0]["aggregate_tok_s"]["expected"] == pytest.approx(crowd.aggregate_tok_s)
    for bad in ("0", "-1", "x"):
        refused = CliRunner().invoke(estimate_command, [*args, "--max-batch", bad])
        assert refused.exit_code == 2 and "--max-batch" in refused.output
