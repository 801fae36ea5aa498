"""Per-key token budgets per UTC calendar period (minute, hour, day or month).

Every answered request charges its prompt + completion tokens to the key that sent it; a key whose
count for the current period has reached its ``tokens_per_period`` gets a 429 until the period ends.

Counts live in process memory, or in Redis when a URL is given, so that every replica of the gateway
sees the same count (one ``INCRBY`` plus ``EXPIREAT`` on a key per key name and period). Redis is
optional at run time: while it is down each replica counts on from the last total it saw, and the
tokens charged meanwhile are added to Redis when it is back (by the next charge, or by a background
retry every ``retry_after_s``, whichever comes first, so an idle replica catches up too), so budgets
still hold, if loosely, through an outage.

A count in Redis that is not one (``"abc"``, ``"-5"``, ``"1e999"``, a number past `MAX_WHOLE`, a list where
the count's string should be: `tokometer.gateway.redisvalues`) is read as that key's count lost, as in an
outage, and put right: the script that reads and adds replaces it with this replica's own count for the key
(the last total it saw plus what it charged since; 0 if it has seen none) and logs a warning naming the key.
It neither fails open for good (a count read as 0 and left broken, so every replica forgets every charge
to come) nor closed (a 503 for the key until someone repairs Redis by hand, maybe for a month), and no other
key's count leaves Redis for it: a ``WRONGTYPE`` or an ``INCRBY`` on a non-integer took the whole store
"down" for every key, whose tokens then never reached Redis while the broken key was retried.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from redis.asyncio import Redis

from tokometer.gateway import redisvalues
from tokometer.gateway.config import KeyConfig
from tokometer.gateway.redislink import RedisLink, RedisUnavailable
from tokometer.util.errors import ConfigError

__all__ = ["PERIODS", "BudgetState", "TokenBudgets", "period_bounds"]

logger = logging.getLogger("tokometer.gateway")

PERIODS = ("minute", "hour", "day", "month")
_EXPIRY_GRACE = timedelta(minutes=5)  # keep a finished period's key a little, for replicas whose clocks lag
_SHOWN = 40  # bytes of a broken count the warning quotes

# KEYS: the count's key. ARGV: tokens to add, the expiry (unix seconds), this replica's own count (for a broken
# one). A stored value that is not a count is replaced by ARGV[3]; the tokens are added (the count held at
# MAX_WHOLE). Returns the count, then what was broken: '' (nothing), 'string' (a text that is no count: its first
# bytes and its length follow) or the Redis type found instead of a string.
_CHARGE: Final = redisvalues.LUA + f"""
local key, tokens = KEYS[1], tonumber(ARGV[1])
local broken, head, length = own(key, 'string') or '', '', 0
local stored = redis.call('GET', key)
local count = whole(stored)
if stored and count == nil then
  broken, head, length = 'string', string.sub(stored, 1, {_SHOWN}), #stored
end
if broken ~= '' then
  redis.call('SET', key, ARGV[3])
  count = tonumber(ARGV[3])
elseif not stored then
  count = 0
end
if tokens > 0 then
  count = redis.call('INCRBY', key, tokens)
  if count > {redisvalues.MAX_WHOLE} then
    redis.call('SET', key, '{redisvalues.MAX_WHOLE}')
    count = {redisvalues.MAX_WHOLE}
  end
end
if tokens > 0 or broken ~= '' then redis.call('EXPIREAT', key, ARGV[2]) end
return {{count, broken, head, length}}
"""


def _utc_now() -> datetime:
    return datetime.now(UTC)


def period_bounds(now: datetime, period: str) -> tuple[datetime, datetime]:
    """The UTC calendar period holding ``now``: its start and its end (the moment the budget resets)."""
    now = now.replace(tzinfo=UTC) if now.tzinfo is None else now.astimezone(UTC)
    if period == "minute":
        start = now.replace(second=0, microsecond=0)
        return start, start + timedelta(minutes=1)
    if period == "hour":
        start = now.replace(minute=0, second=0, microsecond=0)
        return start, start + timedelta(hours=1)
    if period == "day":
        start = now.replace(hour=0, minute=0, second=0, microsecond=0)
        return start, start + timedelta(days=1)
    if period == "month":
        start = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
        end = start.replace(year=start.year + 1, month=1) if start.month == 12 else start.replace(month=start.month + 1)
        return start, end
    raise ConfigError(f"budgets.period: unknown period {period!r}: use one of {', '.join(PERIODS)}")


@dataclass(frozen=True, slots=True)
class BudgetState:
    """A key's token count in the current period, against its limit (None: no limit)."""

    key: str
    used: int
    limit: int | None
    period: str
    resets_at: datetime

    @property
    def exceeded(self) -> bool:
        """True once the count has reached the limit: no tokens are left this period."""
        return self.limit is not None and self.used >= self.limit

    @property
    def remaining(self) -> int | None:
        return None if self.limit is None else max(0, self.limit - self.used)


class TokenBudgets:
    """Token counts per key and period, in memory or in Redis (with an in-process fallback)."""

    def __init__(self, keys: list[KeyConfig], period: str, redis_url: str | None = None, timeout_s: float = 0.05,
                 clock: Callable[[], datetime] = _utc_now, prefix: str = "tokometer:budget:",
                 retry_after_s: float = 1.0) -> None:
        period_bounds(clock(), period)  # validates the period
        self.period = period
        self.prefix = prefix
        self._limits = {k.name: k.tokens_per_period for k in keys}
        self._clock = clock
        # key name -> (period start, count): the last total seen plus what was charged since, in memory.
        self._counts: dict[str, tuple[datetime, int]] = {}
        # key name -> (period start, tokens) charged while Redis was down, to add to it when it is back.
        self._pending: dict[str, tuple[datetime, int]] = {}
        self._link = None if redis_url is None else RedisLink(
            redis_url, timeout_s=timeout_s, retry_after_s=retry_after_s, what="Redis (token budgets)")
        self._script: Any = None if self._link is None else self._link.client.register_script(_CHARGE)
        self._retry_after_s = retry_after_s
        self._catch_up: asyncio.Task[None] | None = None
        self._closing = False

    @property
    def backend(self) -> str:
        return "memory" if self._link is None else "redis"

    @property
    def healthy(self) -> bool:
        return self._link is None or self._link.healthy

    def limit(self, key_name: str) -> int | None:
        return self._limits.get(key_name)

    async def state(self, key_name: str) -> BudgetState:
        """The key's count in the current period (from Redis when it is up)."""
        return await self.charge(key_name, 0)

    async def charge(self, key_name: str, tokens: int) -> BudgetState:
        """Add ``tokens`` to the key's count for the current period; the state after the charge."""
        start, end = period_bounds(self._clock(), self.period)
        tokens = max(0, tokens)
        if self._link is not None:
            pending = self._take_pending(key_name, start)
            try:
                total = await self._redis_add(key_name, start, end, pending + tokens, pending)
            except RedisUnavailable:
                self._add_pending(key_name, start, pending + tokens)
            else:
                self._counts[key_name] = (start, total)
                return self._state(key_name, total, end)
        if tokens:
            self._add_local(key_name, start, tokens)
        return self._state(key_name, self._local(key_name, start), end)

    def message(self, state: BudgetState) -> str:
        """The text of the 429 a key over its budget gets."""
        limit = "no limit" if state.limit is None else f"{state.limit:,}"
        resets = state.resets_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return (f"token budget of key '{state.key}' is used up: {state.used:,} of {limit} tokens this "
                f"{state.period} (resets {resets}); this is the gateway's per-key budget, "
                "not the model's context length")

    @property
    def pending(self) -> int:
        """Tokens charged while Redis was down and not yet added to it."""
        return sum(tokens for _, tokens in self._pending.values())

    async def flush(self) -> bool:
        """Add every key's tokens charged while Redis was down to Redis; True when none are left."""
        for key_name in list(self._pending):
            start, end = period_bounds(self._clock(), self.period)
            tokens = self._take_pending(key_name, start)
            if not tokens:
                continue
            try:
                total = await self._redis_add(key_name, start, end, tokens, tokens)
            except RedisUnavailable:
                self._add_pending(key_name, start, tokens)
                return False
            self._counts[key_name] = (start, total)
        return not self._pending

    async def close(self) -> None:
        self._closing = True  # a last flush that fails must not start another catch-up that nobody ends
        if self._catch_up is not None:
            self._catch_up.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._catch_up
        if self._link is not None:
            with contextlib.suppress(Exception):
                await self.flush()  # a replica going away hands in what it counted alone
            await self._link.close()

    async def _catch_up_loop(self) -> None:
        while self._pending:
            await asyncio.sleep(self._retry_after_s)
            await self.flush()

    def _state(self, key_name: str, used: int, end: datetime) -> BudgetState:
        return BudgetState(key_name, used, self._limits.get(key_name), self.period, end)

    def _local(self, key_name: str, start: datetime) -> int:
        seen = self._counts.get(key_name)
        return seen[1] if seen is not None and seen[0] == start else 0

    def _add_local(self, key_name: str, start: datetime, tokens: int) -> None:
        self._counts[key_name] = (start, self._local(key_name, start) + tokens)

    def _take_pending(self, key_name: str, start: datetime) -> int:
        pending = self._pending.pop(key_name, None)
        return pending[1] if pending is not None and pending[0] == start else 0  # a past period's: dropped

    def _add_pending(self, key_name: str, start: datetime, tokens: int) -> None:
        if not tokens:
            return
        before = self._pending.get(key_name)  # another charge may have added some during our await
        if before is not None and before[0] == start:
            tokens += before[1]
        self._pending[key_name] = (start, tokens)
        if not self._closing and (self._catch_up is None or self._catch_up.done()):
            with contextlib.suppress(RuntimeError):  # no running loop: the next charge catches up
                self._catch_up = asyncio.get_running_loop().create_task(self._catch_up_loop())

    def _redis_key(self, key_name: str, start: datetime) -> str:
        return f"{self.prefix}{key_name}:{self.period}:{start:%Y%m%dT%H%M}"

    async def _redis_add(self, key_name: str, start: datetime, end: datetime, tokens: int, pending: int) -> int:
        """The key's total after adding ``tokens`` (``pending`` of them charged while Redis was down) in Redis;
        a broken count there is replaced by this replica's own first (module docstring)."""
        assert self._link is not None
        name = self._redis_key(key_name, start)
        own = max(0, self._local(key_name, start) - pending)  # the pending tokens are in the local count already
        args = [tokens, int((end + _EXPIRY_GRACE).timestamp()), own]

        async def run(client: Redis) -> tuple[int, list[Any]]:
            reply = await self._script(keys=[name], args=args, client=client)
            total = redisvalues.whole(reply[0]) if isinstance(reply, list) and len(reply) == 4 else None
            if total is None:
                raise ValueError("the budget script's answer is not a count")
            return total, reply[1:]

        total, broken = await self._link.call(run)
        if broken[0]:
            _broken(name, own, *broken)
        return total


def _broken(name: str, own: int, kind: Any, head: Any, length: Any) -> None:
    """Say that the count at ``name`` was not one, and what it was replaced by."""
    kind = redisvalues.text(kind, 16)
    if kind == "string":
        shown = redisvalues.text(head, _SHOWN)
        size = redisvalues.whole(length)
        found = f"{shown!r}" + ("" if size is None or size <= len(shown) else f"… ({size:,} bytes)")
    else:
        found = f"a {kind}"
    logger.warning("token budgets: Redis key %s held %s, not a count of tokens; replaced by this replica's count, "
                   "%s", name, found, f"{own:,}")
