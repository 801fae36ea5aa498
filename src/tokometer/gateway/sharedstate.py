"""Circuit breakers and slow windows shared by the gateway's replicas through Redis.

Each replica keeps judging every upstream with its own `UpstreamHealth`, in process, so the
request path never waits on Redis. `SharedHealth` attaches a listener to each of them and
synchronises in the background, once per ``sync_s`` (and at once after a breaker changes), in one
pipelined round trip for all upstreams:

- **Breaker**: a hash per upstream (``tokometer:health:NAME``) holds the last change of its circuit
  (``changed_at``, ``opened_at``, ``reason``; wall-clock milliseconds, so replicas on other hosts
  agree). A Lua script writes a replica's change only when it is newer than the stored one and
  returns what is stored; each replica adopts a newer stored change. So when one replica opens a
  circuit, the others see it open within ``sync_s``; when a trial closes it, they see it closed.
- **Half-open trial**: only the replica holding the trial claim (a field of the same hash, set
  by the script like ``SET NX`` with an expiry, renewed while it holds it) may send the trial.
- **Slow windows**: a capped list per upstream and kind (``...:ttft``, ``...:tpot``) takes every
  replica's new samples (``LPUSH`` + ``LTRIM``) and is read back whole, so "slow" is the median of
  all replicas' recent requests.

Every call goes through `RedisLink`, as the cache and budgets do: while Redis is down each replica
goes on with its local state alone (and sends half-open trials on its own), keeps its new samples
and last breaker change, and pushes them when Redis is back; the newest change wins there, and the
replicas converge on it.

What the script reads back is held to `tokometer.gateway.redisvalues`, and a broken value is the state absent,
as for an upstream no replica has judged yet: a breaker record whose ``changed_at`` or ``opened_at`` is no
whole number is deleted (the circuit reads closed until a replica's next change is written over it), a trial
claim whose expiry is none is free, a sample that is not a finite number of milliseconds of at least 0 is left
out of the window, a key of another type than the one written there is deleted, and a circuit said to have
opened in the future opened now. Each replica still judges every upstream by its own requests, so a broken
record costs the sharing, for one upstream, until the next change: before, a ``changed_at`` of ``"abc"`` or a
list in place of a window failed every synchronisation (the whole store read as down), and an ``opened_at`` of
``"abc"`` or a sample ``"nan"`` stopped the gateway at its start with a ValueError.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from tokometer.gateway import redisvalues
from tokometer.gateway.breaker import UpstreamHealth
from tokometer.gateway.config import ReplicasConfig
from tokometer.gateway.redislink import RedisLink, RedisUnavailable

__all__ = ["SharedHealth", "share_health"]

logger = logging.getLogger("tokometer.gateway")

_STATE_TTL_MS = 3_600_000  # a breaker record nobody touched for an hour is forgotten
_SAMPLES_TTL_MS = 600_000  # as are the samples of an upstream nobody used for ten minutes
_MIN_TRIAL_S = 2.0  # a trial claim lasts max(this, 5 sync periods) unless its holder renews it
_REASON_CHARS = 200  # of the reason a circuit opened, as stored and as read back

# One round for every upstream, in one call. KEYS: per upstream its hash, TTFT list and TPOT list. ARGV: replica,
# now_ms, trial_until, state_ttl_ms, samples_ttl_ms, then per upstream: changed_at, opened_at, reason, want_trial,
# window, the new TTFTs and the new TPOTs (each space-separated in one string). For each upstream: store this
# replica's breaker change if it is newer than the stored one; claim the half-open trial if asked and it is free
# (or already ours, or expired); add the new samples. A record or a key it cannot read is deleted first (module
# docstring). Returns per upstream the stored change, whether the trial is ours, both windows (newest first,
# space-separated: one string parses faster than many) and how many broken records and keys it deleted.
_SYNC = redisvalues.LUA + f"""
local replica, now, trial_until = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local a, out = 6, {{}}
for i = 1, #KEYS, 3 do
  local state = KEYS[i]
  local changed, opened, reason, want = ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3]
  local window = tonumber(ARGV[a + 4])
  a = a + 5
  local broken = 0
  for k = 0, 2 do
    if own(KEYS[i + k], k == 0 and 'hash' or 'list') then broken = broken + 1 end
  end
  local cur = redis.call('HMGET', state, 'changed_at', 'opened_at', 'reason', 'trial', 'trial_until')
  if (cur[1] and not whole(cur[1])) or (cur[2] and not whole(cur[2])) then
    redis.call('DEL', state)
    cur = {{false, false, false, false, false}}
    broken = broken + 1
  end
  if tonumber(changed) > (whole(cur[1]) or 0) then
    redis.call('HSET', state, 'changed_at', changed, 'opened_at', opened, 'reason', reason)
    redis.call('HDEL', state, 'trial', 'trial_until')
    redis.call('PEXPIRE', state, ARGV[4])
    cur = {{changed, opened, reason, false, false}}
  end
  local granted = 0
  if want == '1' and cur[2] and cur[2] ~= '0' then
    if (not cur[4]) or cur[4] == replica or (whole(cur[5]) or 0) < now then
      redis.call('HSET', state, 'trial', replica, 'trial_until', trial_until)
      granted = 1
    end
  end
  local windows = {{}}
  for k = 1, 2 do
    local list, new, read = KEYS[i + k], {{}}, {{}}
    for v in string.gmatch(ARGV[a + k - 1], '%S+') do new[#new + 1] = v end
    if #new > 0 then
      for j = 1, #new, 1000 do
        redis.call('LPUSH', list, unpack(new, j, math.min(j + 999, #new)))
      end
      redis.call('LTRIM', list, 0, window - 1)
      redis.call('PEXPIRE', list, ARGV[5])
    end
    for _, v in ipairs(redis.call('LRANGE', list, 0, window - 1)) do
      if sample(v) then read[#read + 1] = v end
    end
    windows[k] = table.concat(read, ' ')
  end
  a = a + 2
  out[#out + 1] = {{cur[1] or '0', cur[2] or '0', string.sub(cur[3] or '', 1, {_REASON_CHARS}), granted, windows[1],
                   windows[2], broken}}
end
return out
"""


class _Listener:
    """One upstream's link to the shared state (a `HealthListener`)."""

    __slots__ = ("asked_at", "changed_at_ms", "health", "name", "owner", "pending_tpot", "pending_ttft",
                 "trial_granted")

    def __init__(self, owner: SharedHealth, name: str, health: UpstreamHealth) -> None:
        self.owner = owner
        self.name = name
        self.health = health
        self.pending_ttft: list[float] = []
        self.pending_tpot: list[float] = []
        self.changed_at_ms = 0  # the last breaker change this replica knows of (its own or adopted)
        self.trial_granted = False
        self.asked_at = float("-inf")  # when a request or probe last wanted to try the half-open upstream

    def sampled(self, ttft_ms: float | None, tpot_ms: float | None) -> None:
        if ttft_ms is not None:
            _append(self.pending_ttft, ttft_ms, self.health.window)
        if tpot_ms is not None:
            _append(self.pending_tpot, tpot_ms, self.health.window)

    def changed(self) -> None:
        self.changed_at_ms = max(self.owner.wall_ms(), self.changed_at_ms + 1)
        self.trial_granted = False
        self.owner.wake()

    def may_try(self) -> bool:
        self.asked_at = self.owner.monotonic()  # only a replica that would send the trial claims it
        return self.trial_granted or not self.owner.coordinating


def _append(values: list[float], value: float, cap: int) -> None:
    values.append(value)
    if len(values) > cap:
        del values[:len(values) - cap]


class SharedHealth:
    """Keeps the `UpstreamHealth` of every upstream in step with the other replicas' through Redis."""

    def __init__(self, health: Mapping[str, UpstreamHealth], url: str, *, timeout_s: float = 0.05,
                 sync_s: float = 0.25, retry_after_s: float = 1.0, prefix: str = "tokometer:health:",
                 wall: Callable[[], float] = time.time, monotonic: Callable[[], float] = time.monotonic) -> None:
        self.sync_s = sync_s
        self.prefix = prefix
        self.replica = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._wall = wall
        self.monotonic = monotonic
        self.claim_s = max(_MIN_TRIAL_S, 5 * sync_s)
        self.link = RedisLink(url, timeout_s=timeout_s, retry_after_s=retry_after_s, what="Redis (shared health)",
                              monotonic=monotonic)
        self._script = self.link.client.register_script(_SYNC)  # EVALSHA, loaded again after a Redis restart
        self.listeners = {name: _Listener(self, name, h) for name, h in health.items()}
        for listener in self.listeners.values():
            listener.health.listener = listener
        self.syncs = 0
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._closing = False

    @property
    def coordinating(self) -> bool:
        """Synchronising, and Redis up: half-open trials go by the shared claim (else each replica tries alone)."""
        return self._task is not None and not self._task.done() and self.link.healthy

    def wall_ms(self) -> int:
        return int(self._wall() * 1000)

    def wake(self) -> None:
        """Synchronise now rather than at the next tick (a breaker changed)."""
        if self._wake is not None:
            self._wake.set()

    async def start(self) -> None:
        """One synchronisation (so a new replica starts from the shared state), then one every ``sync_s``."""
        self._wake = asyncio.Event()
        with contextlib.suppress(RedisUnavailable):
            await self.sync()
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def close(self) -> None:
        """Stop the synchronisation (within one Redis timeout), push what is left, close the link."""
        self._closing = True  # the loop ends at its next turn even if the cancel below were lost
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait({self._task}, timeout=self.link.timeout_s + self.sync_s)
        with contextlib.suppress(RedisUnavailable):  # this replica's last samples and changes
            await self.sync()
        await self.link.close()

    async def _run(self) -> None:
        assert self._wake is not None
        while not self._closing:
            # asyncio.timeout, not wait_for: on Python 3.11 a cancel that meets wait_for's own timeout comes out as
            # TimeoutError (gh-86296), which this loop suppresses, and close() then waited for it forever (seen in
            # tests/integration/test_gateway_redis.py with sync_s 30 ms)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.sync_s):
                    await self._wake.wait()
            self._wake.clear()
            try:
                await self.sync()
            except RedisUnavailable:
                pass  # RedisLink has said so, once
            except Exception as exc:  # a reply this code cannot read must not end the synchronisation
                logger.warning("shared health: unreadable answer from Redis (%s); trying again", exc)

    async def sync(self) -> None:
        """Push this replica's new samples and breaker changes, claim due trials, adopt the shared state: one
        script call for every upstream. Raises `RedisUnavailable` (keeping the samples for the next try)."""
        listeners = list(self.listeners.values())
        taken = [(ls.pending_ttft, ls.pending_tpot) for ls in listeners]
        for ls in listeners:
            ls.pending_ttft, ls.pending_tpot = [], []
        now_ms, mono = self.wall_ms(), self.monotonic()
        keys: list[str] = []
        args: list[Any] = [self.replica, now_ms, now_ms + int(self.claim_s * 1000), _STATE_TTL_MS, _SAMPLES_TTL_MS]
        for ls, (ttft, tpot) in zip(listeners, taken, strict=True):
            h = ls.health
            key = self.prefix + ls.name
            keys += [key, key + ":ttft", key + ":tpot"]
            opened = 0 if h.opened_at is None else max(1, now_ms - int((mono - h.opened_at) * 1000))
            # claimed (and renewed) only while this replica has something to try it with: a request or a probe
            want = h.opened_at is not None and h.state(mono) == "half-open" and mono - ls.asked_at < self.claim_s
            args += [ls.changed_at_ms, opened, h.last_error[:_REASON_CHARS], "1" if want else "0", h.window,
                     " ".join(map(repr, ttft)), " ".join(map(repr, tpot))]

        async def run(client: Any) -> list[_Shared]:
            replies = await self._script(keys, args, client)
            if not isinstance(replies, list) or len(replies) != len(listeners):
                raise ValueError("the shared health script answered something else than one record per upstream")
            return [_Shared.read(reply, ls.health.window) for ls, reply in zip(listeners, replies, strict=True)]

        try:
            shared = await self.link.call(run)
        except RedisUnavailable:
            for ls, (ttft, tpot) in zip(listeners, taken, strict=True):
                ls.pending_ttft = (ttft + ls.pending_ttft)[-ls.health.window:]
                ls.pending_tpot = (tpot + ls.pending_tpot)[-ls.health.window:]
            raise
        self.syncs += 1
        for ls, record in zip(listeners, shared, strict=True):
            self._adopt(ls, record)
            for samples, window, pending in ((record.ttft_ms, ls.health.ttft_ms, ls.pending_ttft),
                                             (record.tpot_ms, ls.health.tpot_ms, ls.pending_tpot)):
                window.clear()
                window.extend(reversed(samples))  # LPUSH puts the newest first
                window.extend(pending)  # taken during the round trip: pushed next time
                while len(window) > ls.health.window:
                    window.popleft()

    def _adopt(self, ls: _Listener, record: _Shared) -> None:
        if record.broken:
            logger.warning("shared health: Redis held a record of upstream %s (under %s%s) that was none (another "
                           "type of key, or a time of change or of opening that is no whole number): deleted",
                           ls.name, self.prefix, ls.name)
        changed_at, reason = record.changed_at, record.reason
        opened_at = min(record.opened_at, self.wall_ms())  # a circuit said to have opened in the future opened now
        h = ls.health
        if changed_at > ls.changed_at_ms:
            ls.changed_at_ms = changed_at
            h.trial_in_flight = False
            if opened_at == 0:
                h.opened_at = None
                h.consecutive_failures = 0
            else:
                h.opened_at = self.monotonic() - (self.wall_ms() - opened_at) / 1000
                h.last_error = reason or h.last_error
                logger.info("upstream %s: circuit opened by another replica (%s)", ls.name, reason)
        ls.trial_granted = record.granted


class _Shared(NamedTuple):
    """One upstream's shared state, as the script returned it."""

    changed_at: int
    opened_at: int
    reason: str
    granted: bool
    ttft_ms: list[float]
    tpot_ms: list[float]
    broken: int

    @classmethod
    def read(cls, reply: Any, window: int) -> _Shared:
        """The script's record for one upstream (samples past ``window`` or unreadable left out); `ValueError`
        for a record that is not one."""
        if not isinstance(reply, list) or len(reply) != 7:
            raise ValueError("a shared health record is not a list of 7")
        changed_at, opened_at, broken = (redisvalues.whole(reply[i]) for i in (0, 1, 6))
        if changed_at is None or opened_at is None or broken is None or reply[3] not in (0, 1):
            raise ValueError("a shared health record holds no time of change, of opening, trial grant or count")
        return cls(changed_at, opened_at, redisvalues.text(reply[2], _REASON_CHARS), reply[3] == 1,
                   _samples(reply[4], window), _samples(reply[5], window), broken)


def _samples(raw: Any, window: int) -> list[float]:
    """A window's samples from the script's space-separated text: at most ``window``, each a finite number."""
    words = redisvalues.text(raw, window * (redisvalues.SAMPLE_CHARS + 1)).split()[:window]
    return [value for value in map(redisvalues.sample, words) if value is not None]


def share_health(health: Mapping[str, UpstreamHealth], replicas: ReplicasConfig) -> SharedHealth | None:
    """The `SharedHealth` the ``[replicas]`` config asks for; None (nothing shared, nothing spent) without Redis."""
    if replicas.redis_url is None or not replicas.share_health:
        return None
    return SharedHealth(health, replicas.redis_url, timeout_s=replicas.redis_timeout_s, sync_s=replicas.sync_s)
