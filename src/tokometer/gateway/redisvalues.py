"""What the gateway reads back from Redis, read by one rule, in Lua and in Python alike.

Redis is a store other processes share: another replica, another program, a person with ``redis-cli``. So
a value read back from it is held to what the gateway itself writes there, as a peer's answer is:

- a count or a time (a budget's tokens, a rate window's second and its count, a breaker's wall-clock
  milliseconds) is a whole number in ASCII decimal digits, from 0 to `MAX_WHOLE` (2**53 - 1, exact in the
  doubles Redis's Lua computes in, and within ``INCRBY``'s range): not ``"abc"``, ``"-5"``, ``"1e999"``,
  ``"nan"``, ``"1.5"`` or 30 digits;
- a latency sample is a finite number of milliseconds, at least 0, of at most `SAMPLE_CHARS` characters;
- a key under the gateway's prefix holds the Redis type the gateway writes there (a string, a hash, a list).

Each Lua script the gateway runs starts with `LUA` (`whole`, `sample`, `own`), so a stored value that is not
one of these never reaches a comparison, an ``INCRBY`` or the reply: what each feature does with it instead
is written in that feature's module (`tokometer.gateway.budget`, `tokometer.gateway.ratelimit`,
`tokometer.gateway.sharedstate`, `tokometer.gateway.sharedload`). The script's reply is read in Python by
`whole` and `sample` again, inside the `RedisLink` call: a reply this module cannot read is a Redis that
failed, under the outage rule, never an exception on the request path or in a background task.
"""

from __future__ import annotations

import math
import re
from typing import Any, Final

__all__ = ["LUA", "MAX_WHOLE", "SAMPLE_CHARS", "sample", "text", "whole"]

MAX_WHOLE: Final = 2**53 - 1
"""The largest count or time read back from Redis."""
SAMPLE_CHARS: Final = 32
"""The longest latency sample read back (``repr`` of any float is at most 24 characters)."""
_SAMPLE = re.compile(r"[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?")
"""A sample as the gateway writes it (``repr`` of a float of at least 0): no sign, no ``inf``, no ``_``."""

LUA: Final = f"""
local function whole(v)
  if type(v) == 'string' and #v <= {len(str(MAX_WHOLE))} and string.find(v, '^%d+$') then
    local n = tonumber(v)
    if n <= {MAX_WHOLE} then return n end
  end
  return nil
end
local function sample(v)
  if type(v) ~= 'string' or #v > {SAMPLE_CHARS} then return nil end
  local n = tonumber(v)
  if n == nil or n ~= n or n < 0 or n == math.huge then return nil end
  return v
end
local function own(key, kind)
  local found = redis.call('TYPE', key)['ok']
  if found ~= 'none' and found ~= kind then
    redis.call('DEL', key)
    return found
  end
  return nil
end
"""
"""Three Lua functions every script of the gateway starts with: ``whole(v)`` (the number, or nil), ``sample(v)``
(the text, or nil) and ``own(key, kind)`` (deletes a key of another Redis type than ``kind`` and returns that
type; nil when the key is absent or of ``kind``)."""


def whole(value: Any) -> int | None:
    """``value`` (an integer reply, or the bytes or text of a stored value) as a count or a time, or None."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value if 0 <= value <= MAX_WHOLE else None
    if isinstance(value, bytes):
        value = value.decode("ascii", "replace")
    if not isinstance(value, str) or not (value.isascii() and value.isdigit()) or len(value) > len(str(MAX_WHOLE)):
        return None
    number = int(value)
    return number if number <= MAX_WHOLE else None


def sample(value: bytes | str) -> float | None:
    """A stored latency sample in milliseconds, or None (not a finite number of at least 0)."""
    if isinstance(value, bytes):
        value = value.decode("ascii", "replace")
    if len(value) > SAMPLE_CHARS or _SAMPLE.fullmatch(value) is None:
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def text(value: Any, limit: int) -> str:
    """A stored text (bytes or str), decoded (invalid UTF-8 replaced) and cut to ``limit`` characters."""
    if isinstance(value, bytes):
        value = value[:limit * 4].decode("utf-8", "replace")
    return value[:limit] if isinstance(value, str) else ""
