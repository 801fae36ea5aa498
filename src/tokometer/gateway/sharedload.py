"""Requests in flight to each upstream, shared by the gateway's replicas through Redis, for routing.

A least-outstanding (or prefix-affinity) route ranks its upstreams by the requests in flight to each. One
replica alone knows only its own; behind a load balancer, or with ``--workers N``, each sees a share of
the traffic and would send its next request to an upstream the other replicas keep busy.
`SharedOutstanding` adds the others' counts, exchanged in the background once per ``sync_s``:

- a hash per upstream (``tokometer:outstanding:NAME``) holds one field per replica: its requests in
  flight (waiting at the upstream's ``max_concurrency`` included) and the wall-clock millisecond it
  said so; one Lua script call writes this replica's field of every upstream and returns, per
  upstream, the sum of the other replicas' fields younger than the stale age (older fields, of
  replicas that died or lost Redis, are deleted there);
- the request path only adds the last sum read (`others`), so it never waits on Redis; the sum is
  used for at most the stale age after it was read: while Redis is down each replica routes by its
  own count alone, as the breakers and budgets do;
- least-load routes do not use it: an engine's own ``/metrics`` already count every replica's requests.

Every call goes through `RedisLink`; a replica that closes deletes its fields.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tokometer.gateway import redisvalues
from tokometer.gateway.config import ReplicasConfig, RouteConfig
from tokometer.gateway.redislink import RedisLink, RedisUnavailable
from tokometer.gateway.upstream import Upstream

__all__ = ["SHARED_POLICIES", "SharedOutstanding", "share_outstanding"]

logger = logging.getLogger("tokometer.gateway")

SHARED_POLICIES = frozenset({"least-outstanding", "prefix-affinity"})
"""The routing policies that rank by requests in flight (and so read the other replicas' counts)."""

_MIN_STALE_S = 2.0  # another replica's count is used for max(this, 5 sync periods) after it wrote it
_MAX_COUNT = 1_000_000  # a count above any gateway's concurrency is not a count (a hand-edited key)

# KEYS: a hash per upstream. ARGV: replica, now_ms, stale_ms, ttl_ms, then this replica's count per upstream.
# Writes "count wall_ms" into this replica's field of each hash; returns per hash the others' fresh counts summed
# (a field that is stale, unreadable or a stale age ahead is deleted, and so is a key of another type than a hash;
# a sum is at most what 1,024 replicas can hold).
_SYNC = redisvalues.LUA + f"""
local replica, now, stale, ttl = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local out = {{}}
for i = 1, #KEYS do
  local key = KEYS[i]
  own(key, 'hash')
  redis.call('HSET', key, replica, ARGV[4 + i] .. ' ' .. ARGV[2])
  redis.call('PEXPIRE', key, ttl)
  local fields = redis.call('HGETALL', key)
  local sum = 0
  for j = 1, #fields, 2 do
    if fields[j] ~= replica then
      local count, at = string.match(fields[j + 1], '^(%d+) (%d+)$')
      count, at = whole(count), whole(at)
      if count and at and at >= now - stale and at <= now + stale and count <= {_MAX_COUNT} then
        sum = sum + count
      else
        redis.call('HDEL', key, fields[j])
      end
    end
  end
  out[#out + 1] = math.min(sum, {_MAX_COUNT * 1024})
end
return out
"""


class SharedOutstanding:
    """Every other replica's requests in flight per upstream, as Redis last said (`others`)."""

    def __init__(self, upstreams: Mapping[str, Upstream], names: Sequence[str], url: str, *,
                 timeout_s: float = 0.05, sync_s: float = 0.25, retry_after_s: float = 1.0,
                 prefix: str = "tokometer:outstanding:", wall: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.upstreams = upstreams
        self.names = list(names)
        self.sync_s = sync_s
        self.stale_s = max(_MIN_STALE_S, 5 * sync_s)
        self.prefix = prefix
        self.replica = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._wall = wall
        self._monotonic = monotonic
        self.link = RedisLink(url, timeout_s=timeout_s, retry_after_s=retry_after_s,
                              what="Redis (shared requests in flight)", monotonic=monotonic)
        self._script = self.link.client.register_script(_SYNC)
        self._others: dict[str, int] = {}
        self._read_at = float("-inf")
        self.syncs = 0
        self._task: asyncio.Task[None] | None = None
        self._closing = False

    def others(self, name: str) -> int:
        """The other replicas' requests in flight to ``name`` as last read; 0 once that reading is stale."""
        if self._monotonic() - self._read_at > self.stale_s:
            return 0
        return self._others.get(name, 0)

    async def start(self) -> None:
        """One exchange (a new replica starts knowing the others' load), then one every ``sync_s``."""
        with contextlib.suppress(RedisUnavailable):
            await self.sync()
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def close(self) -> None:
        """Stop exchanging and delete this replica's fields (within one Redis timeout each)."""
        self._closing = True
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait({self._task}, timeout=self.link.timeout_s + self.sync_s)
        keys = [self.prefix + name for name in self.names]
        with contextlib.suppress(RedisUnavailable):
            await self.link.call(lambda client: _delete_field(client, keys, self.replica))
        await self.link.close()

    async def _run(self) -> None:
        while not self._closing:
            await asyncio.sleep(self.sync_s)
            try:
                await self.sync()
            except RedisUnavailable:
                pass  # RedisLink has said so, once
            except Exception as exc:  # a reply this code cannot read must not end the exchange
                logger.warning("shared requests in flight: unreadable answer from Redis (%s); trying again", exc)

    async def sync(self) -> None:
        """Write this replica's counts and read the others' sums: one script call. Raises `RedisUnavailable`."""
        now_ms = int(self._wall() * 1000)
        keys = [self.prefix + name for name in self.names]
        args: list[Any] = [self.replica, now_ms, int(self.stale_s * 1000), int(self.stale_s * 2000)]
        args += [min(_MAX_COUNT, self.upstreams[n].in_flight + self.upstreams[n].waiting) for n in self.names]

        async def run(client: Any) -> list[int]:
            replies = await self._script(keys, args, client)
            if not isinstance(replies, list) or len(replies) != len(self.names):
                raise ValueError(f"not one sum for each of {len(self.names)} upstreams")
            return [_count(reply) for reply in replies]

        self._others = dict(zip(self.names, await self.link.call(run), strict=True))
        self._read_at = self._monotonic()
        self.syncs += 1


def _count(reply: Any) -> int:
    """One sum from the script: a whole number within what replicas can hold, else a `ValueError`."""
    count = redisvalues.whole(reply) if isinstance(reply, int) else None
    if count is None or count > _MAX_COUNT * 1024:
        raise ValueError(f"not a count of requests: {redisvalues.text(repr(reply), 40)}")
    return count


async def _delete_field(client: Any, keys: list[str], replica: str) -> None:
    async with client.pipeline(transaction=False) as pipe:
        for key in keys:
            pipe.hdel(key, replica)
        await pipe.execute()


def share_outstanding(upstreams: Mapping[str, Upstream], routes: Sequence[RouteConfig],
                      replicas: ReplicasConfig) -> SharedOutstanding | None:
    """The `SharedOutstanding` for the upstreams of routes that rank by requests in flight; None (nothing shared,
    nothing spent) without Redis, with ``share_outstanding = false``, or with no such route."""
    if replicas.redis_url is None or not replicas.share_outstanding:
        return None
    names = sorted({name for route in routes if route.routing in SHARED_POLICIES for name in route.upstreams})
    if not names:
        return None
    return SharedOutstanding(upstreams, names, replicas.redis_url, timeout_s=replicas.redis_timeout_s,
                             sync_s=replicas.sync_s)
