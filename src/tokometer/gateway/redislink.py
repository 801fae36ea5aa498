"""`RedisLink`: one ``redis.asyncio`` client with the gateway's outage rule.

The answer cache, the token budgets and the shared upstream health all treat Redis as optional: a Redis
that is down, slow or misbehaving must cost a request nothing but the feature. So every call goes
through `RedisLink.call`:

- bounded by ``timeout_s`` (a slower Redis counts as down for this request);
- no retries inside redis-py (a retry would multiply the time an outage costs), except one: a pooled
  connection the server closed (Redis restarted) fails at once, and the call is made again on a new
  connection, within the same ``timeout_s``;
- any failure marks Redis down for ``retry_after_s``; while down, calls fail at once without touching
  the network, and only one call per back-off period is let through as a probe;
- the first failure of an outage is logged once (a warning), and so is the recovery;
- a ``WRONGTYPE`` error is one key's trouble (someone stored a list where the gateway keeps a string), not
  the server's: that call fails with `RedisUnavailable`, and Redis is not marked down for the others.

A reply is read (`tokometer.gateway.redisvalues`) inside the operation, so a reply that cannot be read fails
the call like any other failure.

Callers catch `RedisUnavailable` and carry on without Redis.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar
from urllib.parse import urlsplit, urlunsplit

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError

from tokometer.util.errors import ConfigError

__all__ = ["RedisLink", "RedisUnavailable", "redacted_url"]

logger = logging.getLogger("tokometer.gateway")

T = TypeVar("T")


class RedisUnavailable(Exception):
    """Redis is down, slow or answered with an error: carry on without it."""


def redacted_url(url: str) -> str:
    """``url`` without its password, for logs and messages."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = f"{parts.username}:***@" if parts.username else ":***@"
    return urlunsplit(parts._replace(netloc=user + netloc))


class RedisLink:
    """A Redis client whose every call is bounded, and which backs off after a failure."""

    def __init__(self, url: str, *, timeout_s: float, retry_after_s: float = 1.0, what: str = "Redis",
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.url = url
        self.timeout_s = timeout_s
        self.retry_after_s = retry_after_s
        self.what = what
        self._monotonic = monotonic
        self._down_until: float | None = None
        try:
            self.client: Redis = Redis.from_url(url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s,
                                                retry=Retry(NoBackoff(), 0))
        except ValueError as exc:
            raise ConfigError(f"{what}: invalid URL {redacted_url(url)!r}: {exc}") from None

    @property
    def healthy(self) -> bool:
        """False from a failed call until a call succeeds again."""
        return self._down_until is None

    async def call(self, operation: Callable[[Redis], Awaitable[T]]) -> T:
        """Run ``operation(client)`` within ``timeout_s``; raise `RedisUnavailable` instead of any failure."""
        now = self._monotonic()
        if self._down_until is not None:
            if now < self._down_until:
                raise RedisUnavailable(f"{self.what} is down")
            # This call is the probe; the others keep skipping Redis until it has answered.
            self._down_until = now + self.retry_after_s
        try:
            async with asyncio.timeout(self.timeout_s):
                try:
                    result = await operation(self.client)
                except RedisConnectionError:  # a connection from before a restart: once more, on a new one
                    await self.client.connection_pool.disconnect(inuse_connections=False)
                    result = await operation(self.client)
        except ResponseError as exc:
            if "WRONGTYPE" not in str(exc):
                self._failed(exc)
                raise RedisUnavailable(f"{self.what} is down: {exc}") from None
            self._answered()  # the server is well; one key holds what this call cannot read
            raise RedisUnavailable(f"{self.what}: {exc}") from None
        except Exception as exc:
            self._failed(exc)
            raise RedisUnavailable(f"{self.what} is down: {exc}") from None
        self._answered()
        return result

    def _answered(self) -> None:
        if self._down_until is not None:
            logger.warning("%s at %s is back", self.what, redacted_url(self.url))
            self._down_until = None

    def _failed(self, exc: Exception) -> None:
        if self._down_until is None:
            detail = str(exc).rstrip(".") or type(exc).__name__
            if isinstance(exc, TimeoutError):
                detail = f"no answer within {self.timeout_s * 1000:g} ms"
            logger.warning("%s at %s is unavailable (%s): going on without it, retrying every %g s",
                           self.what, redacted_url(self.url), detail, self.retry_after_s)
        self._down_until = self._monotonic() + self.retry_after_s

    async def close(self) -> None:
        """Close the client and its connections, within ``timeout_s`` (a Redis that stopped answering cannot hold
        the gateway's shutdown)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.timeout_s):
                await self.client.aclose()
