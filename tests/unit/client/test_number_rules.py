"""The table of rules a server's numbers are held to (`tokometer.client.plausible.NUMBER_RULES`)."""

from __future__ import annotations

from tokometer.client.plausible import NUMBER_RULES, REQUEST_OUTPUT, REQUEST_PROMPT, judge_numbers, prompt_bound
from tokometer.protocols.common.base import ParsedEvent


def _judge(values: dict[str, int | None], prompt: int | None = None, output: int | None = None) -> list[str]:
    notes: list[str] = []
    judge_numbers(values, request_prompt=prompt, request_output=output, note=notes.append)
    return notes


def test_every_row_names_counters_of_an_event_or_a_request_bound() -> None:
    fields = ParsedEvent.__dataclass_fields__
    for rule in NUMBER_RULES:
        assert rule.field in fields and (rule.bound in fields or rule.bound in (REQUEST_PROMPT, REQUEST_OUTPUT))


def test_a_part_above_its_whole_is_set_aside_or_cut_and_named() -> None:
    values: dict[str, int | None] = {"prompt_tokens": 8, "cached_prompt_tokens": 8000, "image_tokens": 9,
                                     "completion_tokens": 6, "reasoning_tokens": 50}
    notes = _judge(values)
    assert values == {"prompt_tokens": 8, "cached_prompt_tokens": None, "image_tokens": None,
                      "completion_tokens": 6, "reasoning_tokens": 6}
    assert notes == ["cached_prompt_tokens=8000 (more than prompt_tokens 8: must be <= it; set aside)",
                     "image_tokens=9 (more than prompt_tokens 8: must be <= it; set aside)",
                     "reasoning_tokens=50 (more than completion_tokens 6: must be <= it; cut to 6)"]
    equal: dict[str, int | None] = {"prompt_tokens": 8, "cached_prompt_tokens": 8}
    assert _judge(equal) == [] and equal["cached_prompt_tokens"] == 8


def test_the_request_bounds_come_first_and_a_number_set_aside_bounds_nothing() -> None:
    bound = prompt_bound(200)
    assert bound == 2 * 200 + 8192 and prompt_bound(200, images=2) == bound + 2 * 65_536
    values: dict[str, int | None] = {"prompt_tokens": 99_999_999, "cached_prompt_tokens": 50, "server_decode_n": 40}
    notes = _judge(values, prompt=bound, output=24)
    assert values == {"prompt_tokens": None, "cached_prompt_tokens": 50, "server_decode_n": None}
    assert notes[0] == f"prompt_tokens=99999999 (more than the request's prompt {bound}: must be <= it; set aside)"
    assert notes[1].startswith("server_decode_n=40 (more than max_tokens 24")
    unknown: dict[str, int | None] = {"prompt_tokens": 99_999_999}
    assert _judge(unknown) == [] and unknown["prompt_tokens"] == 99_999_999  # no request size known: not judged


def test_a_batch_may_count_more_than_its_bytes() -> None:
    """Rerank counts the query once per document: 10,000 empty documents make more tokens than their bytes."""
    assert prompt_bound(30_000, inputs=10_000) >= 10_000 * 16
