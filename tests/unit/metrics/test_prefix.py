"""Shared prefixes: prompts of exact length that start with one of G prefixes, and the cold/warm split of
their TTFTs (`tokometer.metrics.prefix`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.datasets.test_datasets import bpe_path  # noqa: F401  (the fixture)
from tokometer.datasets import SyntheticSource
from tokometer.engines.llamacpp import swa_args
from tokometer.metrics import summarize
from tokometer.metrics.prefix import prefix_split
from tokometer.records import RequestRecord
from tokometer.tokens import FileTokenizer
from tokometer.util.errors import DatasetError


def test_prompts_start_with_one_of_the_shared_prefixes_and_keep_their_length(bpe_path: Path) -> None:  # noqa: F811
    tokenizer = FileTokenizer(bpe_path)
    source = SyntheticSource(96, tokenizer=tokenizer, seed=3, prefix_tokens=64, prefix_groups=3)
    prompts = [p for p, _ in zip(source.prompts(), range(30), strict=False)]
    assert all(tokenizer.count(p.text) == 96 and p.input_tokens == 96 for p in prompts)
    groups = {p.prefix_group for p in prompts}
    assert groups == {0, 1, 2}
    for g in groups:
        members = [p for p in prompts if p.prefix_group == g]
        head = members[0].text.split("\n")[0]
        assert tokenizer.count(head) == 64
        assert all(p.text.startswith(head + "\n") for p in members)
        assert [p.prefix_first for p in members] == [True] + [False] * (len(members) - 1)
    assert len({p.text for p in prompts}) == 30  # each its own tail
    assert sorted(len([p for p in prompts if p.prefix_group == g]) for g in groups) == [10, 10, 10]  # round by round
    again = SyntheticSource(96, tokenizer=tokenizer, seed=3, prefix_tokens=64, prefix_groups=3)
    assert [p.text for p, _ in zip(again.prompts(), range(30), strict=False)] == [p.text for p in prompts]
    with pytest.raises(DatasetError, match="must be less than --input-tokens"):
        SyntheticSource(64, tokenizer=tokenizer, prefix_tokens=64)


def test_every_prefix_is_used_once_a_run_has_as_many_prompts_whatever_the_seed() -> None:
    """The prompts go round the prefixes in a shuffled order: 8 prompts over 2 prefixes take each 4 times, and
    exactly 2 find theirs new, for every seed (a prefix drawn at random for each prompt left one unused in 1 of
    128 runs, and a test of the cold and warm TTFTs then failed)."""
    for seed in range(200):
        source = SyntheticSource(32, seed=seed, prefix_tokens=16, prefix_groups=2)
        prompts = [p for p, _ in zip(source.prompts(), range(8), strict=False)]
        assert sorted(p.prefix_group or 0 for p in prompts) == [0, 0, 0, 0, 1, 1, 1, 1]
        assert sum(p.prefix_first for p in prompts) == 2 and prompts[0].prefix_first and prompts[1].prefix_first
    orders = {tuple(p.prefix_group for p, _ in zip(SyntheticSource(32, seed=seed, prefix_tokens=16,
                                                                   prefix_groups=3).prompts(), range(6),
                                                  strict=False)) for seed in range(20)}
    assert len(orders) > 1  # the seed shuffles each round


def _record(i: int, group: int, first: bool, sent_ms: float, ttft_ms: float) -> RequestRecord:
    sent = int((sent_ms + 1) * 1e6)  # 0 means "never sent"
    first_token = sent + int(ttft_ms * 1e6)
    return RequestRecord(index=i, sent_ns=sent, first_token_ns=first_token, last_token_ns=first_token + 10**6,
                         end_ns=first_token + 2 * 10**6, event_ns=[first_token, first_token + 10**6],
                         event_tokens=[1.0, 1.0], output_tokens=2, prefix_group=group, prefix_first=first)


def test_cold_warm_and_in_between() -> None:
    records = [
        _record(0, 0, True, 0, 100),     # cold: first with prefix 0 (first token at 100 ms)
        _record(1, 0, False, 50, 80),    # sent while 0 was still in prefill: neither
        _record(2, 0, False, 120, 20),   # warm
        _record(3, 1, True, 130, 90),    # cold
        _record(4, 2, False, 140, 25),   # warm: prefix 2 was first used in an earlier step
    ]
    cold, warm = prefix_split(records)
    assert [r.index for r in cold] == [0, 3] and [r.index for r in warm] == [2, 4]
    summary = summarize(records)
    assert summary.ttft_cold_prefix_ms is not None and summary.ttft_cold_prefix_ms.p50 == pytest.approx(95.0)
    assert summary.ttft_warm_prefix_ms is not None and summary.ttft_warm_prefix_ms.p50 == pytest.approx(22.5)
    assert summary.prefix_cache_speedup == pytest.approx(95.0 / 22.5)
    plain = summarize([RequestRecord(index=0, sent_ns=1, first_token_ns=2, last_token_ns=3, end_ns=4,
                                     event_ns=[2], event_tokens=[1.0], output_tokens=1)])
    assert plain.ttft_cold_prefix_ms is None and plain.prefix_cache_speedup is None


def test_sliding_window_models_get_a_full_swa_cache() -> None:
    assert swa_args({"gemma3.attention.sliding_window": 512}, []) == ("--swa-full",)
    assert swa_args({"gemma3.attention.sliding_window": 512}, ["--swa-full"]) == ()
    assert swa_args({"llama.context_length": 8192}, []) == ()
