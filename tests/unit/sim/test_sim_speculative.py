"""The simulator's draft model: seeded, its counts as vLLM keeps them, its runs as often as the acceptance says."""

from __future__ import annotations

import asyncio

import pytest

from tokometer.sim.engine import Engine, EngineLimits, Sequence
from tokometer.sim.speculative import Draft, draft_for, expected_acceptance_length


def test_no_draft_without_tokens() -> None:
    assert draft_for(0, 0.7, 0.0, seed=1) is None


@pytest.mark.parametrize(("k", "a"), [(1, 0.5), (3, 0.7), (5, 0.9), (4, 0.0), (4, 1.0)])
def test_acceptance_matches_the_geometric_truth(k: int, a: float) -> None:
    draft = Draft(k, a, 0.0, seed=3)
    runs = [draft.verify() for _ in range(20_000)]
    c = draft.counts
    assert c.drafts == 20_000 and c.draft_tokens == 20_000 * k and c.accepted_tokens == sum(runs)
    assert sum(c.accepted_per_position) == c.accepted_tokens
    assert all(x >= y for x, y in zip(c.accepted_per_position, c.accepted_per_position[1:], strict=False))
    assert 1 + c.accepted_tokens / c.drafts == pytest.approx(expected_acceptance_length(k, a), abs=0.05)
    for i, n in enumerate(c.accepted_per_position):  # position i survives with a^(i+1)
        assert n / c.drafts == pytest.approx(a ** (i + 1), abs=0.02)


def test_the_same_seed_gives_the_same_runs() -> None:
    one, two = Draft(3, 0.6, 0.0, seed=9), Draft(3, 0.6, 0.0, seed=9)
    assert [one.verify() for _ in range(200)] == [two.verify() for _ in range(200)]


async def test_the_engine_emits_one_plus_accepted_and_verifies_the_drafts_in_its_step() -> None:
    steps: list[tuple[int, int, int]] = []

    def step_time(decode: int, kv: int, prefill: int) -> float:
        steps.append((decode, kv, prefill))
        return 0.0002

    draft = Draft(4, 0.8, 0.5, seed=2)
    engine = Engine(step_time, EngineLimits(max_num_seqs=8, max_batched_tokens=1000), draft=draft)
    emitted: dict[int, list[int]] = {}

    async def emit(seq: Sequence, n: int) -> None:
        emitted.setdefault(seq.seq_id, []).append(n)

    seqs = [Sequence(i, 10, 40, emit) for i in range(3)]
    for seq in seqs:
        engine.submit(seq)
    await asyncio.wait_for(asyncio.gather(*(s.done.wait() for s in seqs)), 30)
    await engine.close()
    assert all(emitted[i][0] == 1 and emitted[i][-1] == 40 for i in range(3))  # the prefill's token, then runs
    jumps = [b - a for i in range(3) for a, b in zip(emitted[i], emitted[i][1:], strict=False)]
    assert max(jumps) <= 5 and engine.stats.generation_tokens == 120
    # decoding steps verify k drafted tokens per sequence beside any prefill
    assert all(prefill >= 4 * decode for decode, _, prefill in steps)
    assert draft.counts.drafts >= len(jumps) and draft.step_factor == 3.0
