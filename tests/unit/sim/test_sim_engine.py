"""The simulator's continuous-batching scheduler, driven by a step-time function given here."""

from __future__ import annotations

import asyncio

import pytest

from tokometer.sim.engine import Engine, EngineLimits, Sequence

STEPS: list[tuple[int, int, int]] = []


def step_time(decode: int, kv_read: int, prefill: int) -> float:
    STEPS.append((decode, kv_read, prefill))
    return 0.0005


async def _run(limits: EngineLimits, seqs: list[tuple[int, int]]) -> tuple[Engine, dict[int, list[int]]]:
    STEPS.clear()
    emitted: dict[int, list[int]] = {}
    engine = Engine(step_time, limits)

    async def emit(seq: Sequence, n: int) -> None:
        emitted.setdefault(seq.seq_id, []).append(n)
        emitted.setdefault(-1, []).append(seq.seq_id)  # global emission order

    sequences = [Sequence(i, prompt, out, emit) for i, (prompt, out) in enumerate(seqs)]
    for seq in sequences:
        engine.submit(seq)
    await asyncio.wait_for(asyncio.gather(*(s.done.wait() for s in sequences)), 30)
    await engine.close()
    return engine, emitted


async def test_chunked_prefill_then_decode_in_one_batch() -> None:
    engine, emitted = await _run(EngineLimits(max_num_seqs=8, max_batched_tokens=150), [(100, 3), (100, 3)])
    # step 1: all of seq 0's prompt and 50 of seq 1's; step 2: seq 0 decodes, seq 1 finishes its prefill
    assert STEPS[0] == (0, 0, 150)
    assert STEPS[1] == (1, 101, 50)
    assert STEPS[2] == (2, 203, 0)
    assert emitted[0] == [1, 2, 3] and emitted[1] == [1, 2, 3]
    assert engine.stats.prompt_tokens == 200 and engine.stats.generation_tokens == 6


async def test_max_num_seqs_caps_the_batch() -> None:
    engine, emitted = await _run(EngineLimits(max_num_seqs=2, max_batched_tokens=1000), [(10, 4)] * 5)
    assert engine.stats.max_batch <= 2
    assert all(emitted[i] == [1, 2, 3, 4] for i in range(5))
    # later requests wait for a free slot: the first two finish before the fifth starts
    order = emitted[-1]
    assert order.index(4) > max(i for i, s in enumerate(order) if s in (0, 1))


async def test_kv_pressure_preempts_and_every_request_still_finishes() -> None:
    engine, emitted = await _run(EngineLimits(max_num_seqs=8, max_batched_tokens=1000, kv_capacity_tokens=120),
                                 [(40, 30), (40, 30), (40, 30)])
    assert engine.stats.preemptions > 0
    assert all(emitted[i] == list(range(1, 31)) for i in range(3))
    assert max(d for d, _, _ in STEPS) <= 3


async def test_prompt_larger_than_the_cache_is_failed_not_spun() -> None:
    _, emitted = await _run(EngineLimits(kv_capacity_tokens=50), [(100, 2), (10, 2)])
    assert 0 not in emitted and emitted[1] == [1, 2]


@pytest.mark.parametrize("scale", [1.0, 3.0])
async def test_time_scale_stretches_steps(scale: float) -> None:
    loop = asyncio.get_running_loop()

    async def emit(seq: Sequence, n: int) -> None:
        pass

    engine = Engine(lambda d, k, p: 0.002, EngineLimits(), time_scale=scale)
    seq = Sequence(0, 10, 20, emit)
    start = loop.time()
    engine.submit(seq)
    await seq.done.wait()
    elapsed = loop.time() - start
    await engine.close()
    assert engine.stats.steps == 20
    assert elapsed >= 20 * 0.002 * scale * 0.95
