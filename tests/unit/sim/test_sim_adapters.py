"""LoRA adapters in the simulator (`tokometer.sim.adapters`): names, slots, and the modelled engine's switch cost
and admission, driven by a step-time function given here."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import ValidationError

from tokometer.sim.adapters import AdapterSlots, LoraConfig, refusal
from tokometer.sim.engine import Engine, EngineLimits, Sequence

STEP_S = 0.0005


def test_names_served_and_refused() -> None:
    lora = LoraConfig(names=("a", "b"))
    assert refusal("a", "base", lora) is None and refusal("base", "base", lora) is None
    assert refusal("", "base", lora) is None  # no name: the base model, as vLLM takes it
    assert refusal("c", "base", lora) == "The model `c` does not exist. Valid aliases: base."
    assert refusal("anything", "base", None) is None  # without adapters any name is served, as before
    for names in (("a", "a"), ("",), (" a",), ("a\nb",)):
        with pytest.raises(ValidationError):
            LoraConfig(names=names)


def test_slots_evict_the_least_recently_used() -> None:
    slots = AdapterSlots(2)
    assert [slots.use(n) for n in ("a", "b", "a", "c", "b", "a")] == [True, True, False, True, True, True]
    assert slots.loaded == ["b", "a"] and slots.loads == 5


async def _run(lora: LoraConfig, adapters: list[str | None]) -> tuple[Engine, dict[int, int]]:
    """Run sequences of 10 prompt and 3 output tokens, one per adapter given; the engine, and the step each
    sequence got its first token in."""
    first_step: dict[int, int] = {}

    def step_time(decode: int, kv_read: int, prefill: int) -> float:
        return STEP_S

    engine = Engine(step_time, EngineLimits(max_num_seqs=8, max_batched_tokens=1000), lora=lora)

    async def emit(seq: Sequence, n: int) -> None:
        if n == 1:
            first_step[seq.seq_id] = engine.stats.steps

    sequences = [Sequence(i, 10, 3, emit, adapter=a) for i, a in enumerate(adapters)]
    for seq in sequences:
        engine.submit(seq)
    await asyncio.wait_for(asyncio.gather(*(s.done.wait() for s in sequences)), 30)
    await engine.close()
    return engine, first_step


async def test_a_step_that_loads_adapters_pays_for_each() -> None:
    lora = LoraConfig(names=("a", "b"), max_loras=2, switch_ms=20.0)
    engine, _ = await _run(lora, [None, "a", "b"])
    assert engine.adapters is not None and engine.adapters.loads == 2
    # 3 steps (a prefill with its first token, two decodes) of STEP_S each, and two adapter loads
    assert engine.stats.busy_s == pytest.approx(engine.stats.steps * STEP_S + 2 * 0.020)


async def test_a_request_waits_for_a_lora_slot() -> None:
    lora = LoraConfig(names=("a", "b"), max_loras=1, switch_ms=5.0)
    engine, first = await _run(lora, ["a", "b", None])
    assert engine.adapters is not None and engine.adapters.loads == 2
    # b waits until a has finished (one slot); the base model's request does not wait
    assert first[0] == 1 and first[2] == 1 and first[1] > 3
