"""The read budget's defaults and its error (`tokometer.util.readbudget`)."""

from __future__ import annotations

from tokometer.util.readbudget import (
    BUDGET_FLOOR_BYTES,
    BYTES_PER_TOKEN,
    UNSIZED_BUDGET_BYTES,
    answer_budget,
    over_budget,
    response_budget,
)


def test_the_budget_is_sized_from_max_tokens() -> None:
    assert response_budget(128) == BUDGET_FLOOR_BYTES + 128 * BYTES_PER_TOKEN == 17 * 2**20
    assert response_budget(None) == response_budget(0) == UNSIZED_BUDGET_BYTES
    assert response_budget(4, max_event_bytes=8 * 2**20) == 32 * 2**20 + 4 * BYTES_PER_TOKEN  # a raised event limit
    assert response_budget(4, max_event_bytes=2**20) == BUDGET_FLOOR_BYTES + 4 * BYTES_PER_TOKEN
    assert answer_budget(16 * 2**20) == 32 * 2**20


def test_the_error_names_the_limit_its_value_and_the_setting() -> None:
    message = over_budget(17 * 2**20, "--max-response-bytes")
    assert "read budget of 17 MiB" in message and message.endswith("raise it with --max-response-bytes")
    assert "\n" not in message
