"""The mean context of a full engine's decode steps when requests differ in length (`tokometer.perf.lengths`)."""

from __future__ import annotations

import random

import pytest

from tokometer.perf.hardware import resolve_hardware
from tokometer.perf.lengths import decode_context, reserved_room
from tokometer.perf.loaders import resolve_model
from tokometer.perf.maxload import max_load
from tokometer.perf.roofline import Deployment


def _simulated(requests: list[tuple[int, int]], slots: int, steps: int, seed: int = 7,
               reserved: bool = False) -> float:
    """The truth by brute force: ``slots`` sequences decode one token a step; a finished one is replaced at once by
    a request drawn from ``requests``; the mean over the steps (after a warm-up) of the tokens each slot holds
    (``reserved``: the room it holds reserved, its request's whole I + L)."""
    rng = random.Random(seed)
    held = [(0, 0)] * slots  # (input, tokens decoded so far, counting the one this step makes)
    left, whole = [0] * slots, [0] * slots
    total, count = 0.0, 0
    for step in range(steps):
        for s in range(slots):
            if left[s] == 0:
                i, o = rng.choice(requests)
                held[s], left[s], whole[s] = (i, 0), o, i + o
            i, j = held[s]
            if step >= steps // 10:
                # its context, midway through the step's token (as I + L / 2 counts it), or its reservation
                total += whole[s] if reserved else i + j + 0.5
                count += 1
            held[s], left[s] = (i, j + 1), left[s] - 1
    return total / count


def test_requests_alike_hold_their_prompt_and_half_their_answer() -> None:
    assert decode_context([800], [400]) == pytest.approx(1000)
    assert decode_context([800] * 5, [400] * 5) == pytest.approx(1000)


def test_long_answers_weigh_in_proportion_to_their_length_as_a_full_engine_sees_them() -> None:
    requests = [(100, 100), (100, 300), (2000, 20), (50, 1500)]
    formula = decode_context([i for i, _ in requests], [o for _, o in requests])
    naive = sum(i for i, _ in requests) / 4 + sum(o for _, o in requests) / 8
    truth = _simulated(requests, slots=64, steps=6000)
    assert formula == pytest.approx(truth, rel=0.02)
    # not the means' I + L / 2 (802.5): the 1,500-token answer fills most steps, and the 2,000-token prompt, whose
    # answer is 20 tokens, is held for few of them (the prompts are weighted by their answers too)
    assert formula == pytest.approx(692.8, abs=0.1) and abs(formula - naive) > 0.1 * naive


def test_a_slot_holds_the_room_of_the_long_answers_it_mostly_serves() -> None:
    """An engine that never preempts reserves each request's I + L; a slot serves a request for its L steps, so
    its reservation over the steps is E[L·(I + L)] / E[L], not the means' I + L."""
    assert reserved_room([800] * 3, [400] * 3) == pytest.approx(1200)
    requests = [(100, 100), (100, 300), (2000, 20), (50, 1500)]
    formula = reserved_room([i for i, _ in requests], [o for _, o in requests])
    truth = _simulated(requests, slots=64, steps=6000, reserved=True)
    assert formula == pytest.approx(truth, rel=0.02)
    assert formula == pytest.approx(1304.9, abs=0.1)  # the means' 562.5 + 480 = 1,042.5


def test_the_room_reserved_sets_the_batch_at_maximum_load() -> None:
    d = Deployment(resolve_model("llama-3.1-8b"), resolve_hardware("H100-SXM"), "fp8", "fp8")
    alike = max_load(d, 1000, 1000)
    assert alike == max_load(d, 1000, 1000, room_tokens=2000)
    roomier = max_load(d, 1000, 1000, room_tokens=4000)
    assert alike is not None and roomier is not None and alike.limited_by == roomier.limited_by == "kv cache"
    assert roomier.batch == d.kv_sequences(4000) < alike.batch == d.kv_sequences(2000)


def test_a_submissions_own_answer_mean_scales_the_sets_answers() -> None:
    inputs, outputs = [100, 300], [200, 600]
    base = decode_context(inputs, outputs)
    doubled = decode_context(inputs, outputs, output_mean=800)  # the set's mean is 400
    assert doubled == pytest.approx(decode_context(inputs, [400, 1200]))
    assert doubled - base == pytest.approx((200 * 200 + 600 * 600) / (2 * 800))


@pytest.mark.parametrize(("inputs", "outputs", "says"), [
    ([], [], "none given"), ([1, 2], [3], "2 inputs, 1 outputs"), ([5], [-1], "negative"), ([5, 6], [0, 0], "empty")])
def test_lengths_that_describe_no_decoding_are_refused(inputs: list[int], outputs: list[int], says: str) -> None:
    with pytest.raises(ValueError, match=says):
        decode_context(inputs, outputs)


def test_max_load_counts_the_context_it_is_given_and_by_default_the_alike_requests_one() -> None:
    d = Deployment(resolve_model("llama-3.1-8b"), resolve_hardware("H100-SXM"), "fp8", "fp8")
    alike = max_load(d, 1000, 1000)
    assert alike == max_load(d, 1000, 1000, decode_context=1500)
    spread = max_load(d, 1000, 1000, decode_context=3000)
    assert alike is not None and spread is not None
    assert spread.batch == alike.batch  # the room reserved a request is its mean lengths', as before
    assert spread.output_tok_s < alike.output_tok_s  # each step reads and attends to twice the cache
