"""Token budgets in memory: UTC calendar periods, resets, limits and the 429 message."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from tokometer.gateway.auth import hash_key
from tokometer.gateway.budget import BudgetState, TokenBudgets, period_bounds
from tokometer.gateway.config import KeyConfig
from tokometer.util.errors import ConfigError

KEYS = [KeyConfig(name="team-a", sha256=hash_key("a"), tokens_per_period=1000),
        KeyConfig(name="free", sha256=hash_key("b"))]


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


@pytest.mark.parametrize(("period", "start", "end"), [
    ("minute", datetime(2026, 11, 29, 23, 59, tzinfo=UTC), datetime(2026, 11, 30, tzinfo=UTC)),
    ("hour", datetime(2026, 11, 29, 23, tzinfo=UTC), datetime(2026, 11, 30, tzinfo=UTC)),
    ("day", datetime(2026, 11, 29, tzinfo=UTC), datetime(2026, 11, 30, tzinfo=UTC)),
    ("month", datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 12, 1, tzinfo=UTC)),
])
def test_period_bounds_are_utc_calendar_periods(period: str, start: datetime, end: datetime) -> None:
    assert period_bounds(datetime(2026, 11, 29, 23, 59, 30, 5, tzinfo=UTC), period) == (start, end)
    local = datetime(2026, 11, 30, 1, 59, 30, 5, tzinfo=timezone(timedelta(hours=2)))  # the same instant
    assert period_bounds(local, period) == (start, end)


def test_month_rolls_over_the_year() -> None:
    assert period_bounds(datetime(2026, 12, 31, 12, tzinfo=UTC), "month")[1] == datetime(2027, 1, 1, tzinfo=UTC)
    with pytest.raises(ConfigError, match="unknown period 'week'"):
        period_bounds(datetime(2026, 1, 1, tzinfo=UTC), "week")


async def test_charges_add_up_until_the_limit_then_reset_with_the_period() -> None:
    clock = Clock(datetime(2026, 11, 29, 10, 30, tzinfo=UTC))
    budgets = TokenBudgets(KEYS, "day", clock=clock)
    assert budgets.backend == "memory" and budgets.healthy
    state = await budgets.state("team-a")
    assert (state.used, state.limit, state.exceeded, state.remaining) == (0, 1000, False, 1000)
    await budgets.charge("team-a", 600)
    state = await budgets.charge("team-a", 424)
    assert state.used == 1024 and state.exceeded and state.remaining == 0
    assert state.resets_at == datetime(2026, 11, 30, tzinfo=UTC)
    assert (await budgets.state("team-a")).exceeded
    clock.now = datetime(2026, 11, 30, 0, 0, 1, tzinfo=UTC)
    state = await budgets.state("team-a")
    assert state.used == 0 and not state.exceeded and state.resets_at == datetime(2026, 12, 1, tzinfo=UTC)
    await budgets.close()


async def test_keys_without_a_limit_are_counted_but_never_exceeded() -> None:
    budgets = TokenBudgets(KEYS, "hour", clock=Clock(datetime(2026, 1, 1, tzinfo=UTC)))
    state = await budgets.charge("free", 10**9)
    assert state.used == 10**9 and state.limit is None and not state.exceeded
    assert (await budgets.charge("team-a", 999)).used == 999  # counts are per key
    assert (await budgets.charge("team-a", -5)).used == 999


def test_exceeded_at_exactly_the_limit() -> None:
    when = datetime(2026, 1, 1, tzinfo=UTC)
    assert BudgetState("k", 1000, 1000, "day", when).exceeded
    assert not BudgetState("k", 999, 1000, "day", when).exceeded


def test_message_names_key_usage_period_and_reset() -> None:
    budgets = TokenBudgets(KEYS, "day")
    state = BudgetState("team-a", 1024, 1000, "day", datetime(2026, 11, 30, tzinfo=UTC))
    assert budgets.message(state) == (
        "token budget of key 'team-a' is used up: 1,024 of 1,000 tokens this day (resets 2026-11-30T00:00:00Z); "
        "this is the gateway's per-key budget, not the model's context length")
