"""Rate limits: requests and tokens per minute, per key and per route, over a sliding 60-second window.

A limit counts what happened in the last `WINDOW_S` seconds, in one-second slots (the window slides a second at
a time). A request is let in while every limit that applies to it (its key's, its route's) has room: fewer
requests than ``requests_per_minute`` and fewer tokens than ``tokens_per_minute`` in the window; letting it in
counts it at once. Its tokens (prompt + answer) are counted when it has been answered, as the budgets are
(`tokometer.gateway.budget`), so a request may overshoot a token limit by its own tokens.

Counts live in process memory, or in Redis (one hash per limit, a field per second, checked and counted by one
Lua script for all of a request's limits at once), so every replica sees the same window. While Redis is down
each replica counts alone, in memory; what it counted alone is not added to Redis when it returns (the window
is a minute long: the counts agree again within one).

What the script reads back is held to `tokometer.gateway.redisvalues`: a slot whose second or count is not a
whole number (``"abc"``, ``"-50"``, ``"1e999"``, ``"nan"``), or whose second is more than a window away from now
(a slot a year ahead kept a key refused, ``Retry-After`` a year, for as long as the hash lived), is deleted as an
expired one is, and a limit's key of another Redis type than a hash is deleted. So a broken entry costs the
limit at most what it would have counted (it fails open, for that slot, for at most a minute) and never the
request a 500 or the window its shared count: a limit is a flow control whose every entry ages out within a
minute, and refusing a key until someone repairs Redis by hand would turn one bad write into an outage.

Every answer carries OpenAI's headers for the tightest limit of each kind: ``x-ratelimit-limit-requests``,
``x-ratelimit-remaining-requests``, ``x-ratelimit-reset-requests`` (until the window is empty again, e.g.
``12s``) and the same for ``-tokens``; a refusal is a 429 in the client's protocol with ``Retry-After``: the
seconds until the window has room.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from redis.asyncio import Redis

from tokometer.gateway import redisvalues
from tokometer.gateway.config import GatewayConfig, KeyConfig, RouteConfig
from tokometer.gateway.redislink import RedisLink, RedisUnavailable

__all__ = ["WINDOW_S", "Limit", "RateLimits", "Standing", "Verdict"]

logger = logging.getLogger("tokometer.gateway")

WINDOW_S: Final = 60
"""The window every limit counts over: a minute, sliding a second at a time."""

Kind = Literal["requests", "tokens"]

# KEYS: one hash per limit. ARGV: now (the current second), the window, then per key its limit and cost.
# Every key's slots older than the window are dropped, and so are those that are unreadable or a window ahead, and
# a key of another type than a hash (these are counted as broken); if each key is under its limit, each gets its
# cost in the current slot. Returns [admitted, broken, then per key its slots as "slot:count" strings].
_EXCHANGE: Final = redisvalues.LUA + """
local now, window = tonumber(ARGV[1]), tonumber(ARGV[2])
local slots, admitted, broken = {}, 1, 0
for i, key in ipairs(KEYS) do
  if own(key, 'hash') then broken = broken + 1 end
  local kept, used, flat = {}, 0, redis.call('HGETALL', key)
  for j = 1, #flat, 2 do
    local slot, count = whole(flat[j]), whole(flat[j + 1])
    if slot == nil or count == nil or slot > now + window then
      redis.call('HDEL', key, flat[j])
      broken = broken + 1
    elseif slot <= now - window then
      redis.call('HDEL', key, flat[j])
    else
      kept[#kept + 1] = flat[j] .. ':' .. flat[j + 1]
      used = used + count
    end
  end
  slots[i] = kept
  if used >= tonumber(ARGV[2 + 2 * i - 1]) then admitted = 0 end
end
if admitted == 1 then
  for i, key in ipairs(KEYS) do
    local cost = tonumber(ARGV[2 + 2 * i])
    if cost > 0 then
      redis.call('HINCRBY', key, now, cost)
      redis.call('EXPIRE', key, window * 2)
      slots[i][#slots[i] + 1] = now .. ':' .. cost
    end
  end
end
local out = {admitted, broken}
for i = 1, #KEYS do out[#out + 1] = slots[i] end
return out
"""


@dataclass(frozen=True, slots=True)
class Limit:
    """One limit: whose (``key:NAME`` or ``route:MODEL``), of what, how many per minute."""

    owner: str
    kind: Kind
    per_minute: int


@dataclass(frozen=True, slots=True)
class Standing:
    """A limit's window as a request found it: how much it holds, and when it empties and has room."""

    limit: Limit
    used: int
    room_s: float
    """Seconds until the window holds less than the limit (0: it does now)."""
    reset_s: float
    """Seconds until the window is empty."""

    @property
    def remaining(self) -> int:
        return max(0, self.limit.per_minute - self.used)


@dataclass(frozen=True, slots=True)
class Verdict:
    """Whether a request is let in, and every limit's standing after it."""

    admitted: bool
    standings: tuple[Standing, ...]

    @property
    def refused_by(self) -> Standing | None:
        """The limit that refused (the one with room latest); None: admitted."""
        full = [s for s in self.standings if s.used >= s.limit.per_minute]
        return None if self.admitted or not full else max(full, key=lambda s: s.room_s)

    def headers(self) -> dict[str, str]:
        """OpenAI's ``x-ratelimit-*`` headers for the tightest limit of each kind (and ``retry-after`` when refused)."""
        out: dict[str, str] = {}
        for kind in ("requests", "tokens"):
            of_kind = [s for s in self.standings if s.limit.kind == kind]
            if of_kind:
                tight = min(of_kind, key=lambda s: (s.remaining, -s.reset_s))
                out[f"x-ratelimit-limit-{kind}"] = str(tight.limit.per_minute)
                out[f"x-ratelimit-remaining-{kind}"] = str(tight.remaining)
                out[f"x-ratelimit-reset-{kind}"] = f"{math.ceil(tight.reset_s * 1000) / 1000:g}s"
        refused = self.refused_by
        if refused is not None:
            out["retry-after"] = str(max(1, math.ceil(refused.room_s)))
        return out

    def message(self) -> str:
        """The 429's text."""
        refused = self.refused_by
        assert refused is not None
        owner, kind = refused.limit.owner.replace(":", " '", 1) + "'", refused.limit.kind
        return (f"rate limit of {owner} reached: {refused.used:,} of {refused.limit.per_minute:,} {kind} in the "
                f"last minute; retry in {max(1, math.ceil(refused.room_s))} s")


def limits_of(key: KeyConfig | None, route: RouteConfig) -> tuple[Limit, ...]:
    """Every limit a request of ``key`` to ``route`` is under."""
    out = []
    for owner, cfg in ((None if key is None else f"key:{key.name}", key), (f"route:{route.model}", route)):
        if owner is None or cfg is None:
            continue
        if cfg.requests_per_minute is not None:
            out.append(Limit(owner, "requests", cfg.requests_per_minute))
        if cfg.tokens_per_minute is not None:
            out.append(Limit(owner, "tokens", cfg.tokens_per_minute))
    return tuple(out)


def any_limits(config: GatewayConfig) -> bool:
    """Whether the config sets any rate limit (else the gateway has no rate stage at all)."""
    return any(limits_of(None, r) for r in config.routes) or any(
        k.requests_per_minute is not None or k.tokens_per_minute is not None for k in config.keys)


def _standing(limit: Limit, slots: Sequence[tuple[int, int]], now: float) -> Standing:
    """A limit's standing from its window's (second, count) slots at time ``now`` (seconds)."""
    used = sum(count for _, count in slots)
    reset = max((slot + WINDOW_S - now for slot, _ in slots), default=0.0)
    room, left = 0.0, used
    for slot, count in sorted(slots):
        if left < limit.per_minute:
            break
        left -= count
        room = slot + WINDOW_S - now  # second s is in the window until second s + 60 begins
    return Standing(limit, used, max(0.0, room), max(0.0, reset))


class _Memory:
    """The windows in this process: per limit, its slots (second -> count), pruned as they are read."""

    def __init__(self) -> None:
        self._slots: dict[str, dict[int, int]] = {}

    def exchange(self, names: Sequence[str], limits: Sequence[int], costs: Sequence[int],
                 now: int) -> tuple[bool, list[list[tuple[int, int]]]]:
        kept = []
        for name in names:
            slots = self._slots.setdefault(name, {})
            for slot in [s for s in slots if s <= now - WINDOW_S]:
                del slots[slot]
            kept.append(list(slots.items()))
        admitted = all(sum(c for _, c in k) < limit for k, limit in zip(kept, limits, strict=True))
        if admitted:
            for name, cost, k in zip(names, costs, kept, strict=True):
                if cost > 0:
                    slots = self._slots[name]
                    slots[now] = slots.get(now, 0) + cost
                    k.append((now, cost))
        return admitted, kept


class RateLimits:
    """Every limit's window, in memory or in Redis (with memory while Redis is down)."""

    def __init__(self, redis_url: str | None = None, timeout_s: float = 0.05, prefix: str = "tokometer:rate:",
                 clock: Callable[[], float] = time.time) -> None:
        self.prefix = prefix
        self._clock = clock
        self._memory = _Memory()
        self._link = None if redis_url is None else RedisLink(redis_url, timeout_s=timeout_s,
                                                              what="Redis (rate limits)")
        self._script: Any = None if self._link is None else self._link.client.register_script(_EXCHANGE)

    async def admit(self, limits: Sequence[Limit]) -> Verdict:
        """Let a request in if every one of ``limits`` has room, counting it in its request limits."""
        return await self._exchange(limits, [1 if limit.kind == "requests" else 0 for limit in limits], True)

    async def charge(self, limits: Sequence[Limit], tokens: int) -> None:
        """Count an answered request's ``tokens`` in its token limits."""
        of_tokens = [limit for limit in limits if limit.kind == "tokens"]
        if of_tokens and tokens > 0:
            await self._exchange(of_tokens, [tokens] * len(of_tokens), False)

    async def close(self) -> None:
        if self._link is not None:
            await self._link.close()

    async def _exchange(self, limits: Sequence[Limit], costs: list[int], enforce: bool) -> Verdict:
        now = self._clock()
        second = int(now)
        names = [f"{self.prefix}{limit.owner}:{limit.kind}" for limit in limits]
        bounds = [limit.per_minute if enforce else 2**62 for limit in limits]
        admitted, slots = None, None
        if self._link is not None:
            with contextlib.suppress(RedisUnavailable):  # down: this replica counts alone
                admitted, slots = await self._redis(names, bounds, costs, second)
        if admitted is None or slots is None:
            admitted, slots = self._memory.exchange(names, bounds, costs, second)
        return Verdict(admitted, tuple(_standing(limit, s, now) for limit, s in zip(limits, slots, strict=True)))

    async def _redis(self, names: list[str], bounds: list[int], costs: list[int],
                     second: int) -> tuple[bool, list[list[tuple[int, int]]]]:
        args: list[int] = [second, WINDOW_S]
        for bound, cost in zip(bounds, costs, strict=True):
            args += [bound, cost]
        assert self._link is not None

        async def run(client: Redis) -> tuple[bool, int, list[list[tuple[int, int]]]]:
            return _verdict(await self._script(keys=names, args=args, client=client), len(names))

        admitted, broken, slots = await self._link.call(run)
        if broken:
            logger.warning("rate limits: deleted %d entr%s under %s in Redis that held no count of the last minute "
                           "(a key of another type than a hash, a second or a count that is no whole number, a second "
                           "more than a minute ahead)", broken, "y" if broken == 1 else "ies", ", ".join(names))
        return admitted, slots


def _verdict(reply: Any, limits: int) -> tuple[bool, int, list[list[tuple[int, int]]]]:
    """The script's reply: whether admitted, how many broken entries it deleted, and each limit's slots;
    `ValueError` for a reply that is not one."""
    if not isinstance(reply, list) or len(reply) != limits + 2 or reply[0] not in (0, 1) \
            or redisvalues.whole(reply[1]) is None \
            or not all(isinstance(entries, list) and len(entries) <= 2 * WINDOW_S + 1 for entries in reply[2:]):
        raise ValueError("the rate limits' script answered something else than a verdict")
    return reply[0] == 1, reply[1], [[_slot(item) for item in entries] for entries in reply[2:]]


def _slot(item: Any) -> tuple[int, int]:
    slot, _, count = redisvalues.text(item, 64).partition(":")
    second, counted = redisvalues.whole(slot), redisvalues.whole(count)
    if second is None or counted is None:
        raise ValueError(f"not a rate limit's slot: {item!r}")
    return second, counted
