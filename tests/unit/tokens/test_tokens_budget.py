"""Budgets: fit_to_budget never exceeds the budget and keeps a true cut of the text;
count_tokens and max_output_tokens."""

from __future__ import annotations

import random

import pytest

from tokometer.tokens import BaseTokenizer, count_tokens, fit_to_budget, load_tokenizer, max_output_tokens
from tokometer.tokens.budget import Cut

TEXT = ("大模型推理速度是落地的关键指标，token 是计算的基本单位。 The quick brown fox 😀👨‍👩‍👧 jumps   over\n\n"
        "def f(x):\n\treturn x ** 2  # unbelievable ") * 4


@pytest.fixture(scope="module")
def gemma() -> BaseTokenizer:
    return load_tokenizer("bundled")


@pytest.mark.parametrize("cut", ["end", "start", "middle"])
def test_never_exceeds_the_budget_and_round_trips(gemma: BaseTokenizer, cut: Cut) -> None:
    total = gemma.count(TEXT)
    rng = random.Random(3)
    for budget in [0, 1, 2, 3, total - 1, total, total + 5, *rng.sample(range(4, total - 1), 25)]:
        kept = fit_to_budget(TEXT, budget, gemma, cut=cut)
        assert gemma.count(kept) <= budget
        if budget >= total:
            assert kept == TEXT
            continue
        assert gemma.count(kept) >= budget - 6  # cut at a boundary, not far short of it
        if cut == "end":
            assert TEXT.startswith(kept)
        elif cut == "start":
            assert TEXT.endswith(kept)
        assert fit_to_budget(kept, budget, gemma, cut=cut) == kept  # already fits: unchanged


def test_middle_keeps_both_ends_around_the_marker(gemma: BaseTokenizer) -> None:
    kept = fit_to_budget(TEXT, 40, gemma, cut="middle", marker="\n…\n")
    head, _, tail = kept.partition("\n…\n")
    assert TEXT.startswith(head) and TEXT.endswith(tail) and head and tail
    assert gemma.count(kept) <= 40
    assert fit_to_budget(TEXT, 2, gemma, cut="middle", marker="\n…\n") in ("", "\n…\n")


def test_argument_errors(gemma: BaseTokenizer) -> None:
    with pytest.raises(ValueError, match="at least 0"):
        fit_to_budget("x", -1, gemma)
    with pytest.raises(ValueError, match="cut must be"):
        fit_to_budget("x", 1, gemma, cut="left")  # type: ignore[arg-type]  # not a cut, on purpose


def test_count_tokens_and_max_output(gemma: BaseTokenizer) -> None:
    assert count_tokens("Hello world!", gemma) == 3
    assert count_tokens("Hello world!") == 3  # the bundled Gemma's by default
    messages = [{"role": "user", "content": "Hello world!"}]
    assert count_tokens(messages, gemma) == count_tokens("Hello world!", gemma, chat=True) == gemma.count_chat(messages)
    assert count_tokens(messages, gemma) > 3
    assert max_output_tokens(4096, 1000) == 3096
    assert max_output_tokens(4096, 5000) == 0
    assert max_output_tokens(4096, 1000, cap=512) == 512
    assert max_output_tokens(100, "Hello world!", gemma) == 97
    assert max_output_tokens(100, messages, gemma) == 100 - gemma.count_chat(messages)
