"""The gateway's cache of answers: exact match on the normalised request.

Only deterministic requests are cached (temperature 0, or a seed) and only complete, successful
answers; `cache_key` returns None for anything else. Two backends share one `AnswerCache` protocol:

- `MemoryCache`: in-process, LRU with a TTL (the default);
- `RedisCache`: shared by every replica of the gateway. Redis is optional at run time: while it is
  down or slow every call returns at once as a miss (see `RedisLink`), and caching resumes by
  itself when it comes back.

A cached answer is the text and its accounting, not the bytes of one response, so the gateway can
replay it as a stream or as one JSON body, whichever the new request asks for.

An entry in Redis is read as a peer's answer is: at most `MAX_ENTRY_BYTES` of it (``GETRANGE``; a longer one is
neither written nor read), and `CachedAnswer.from_bytes` takes only what `to_bytes` writes: token counts that
are whole numbers up to `MAX_TOKENS`, a ``created`` time of at least 0, a ``served_by`` that can be a header's
value. Anything else is a miss, as a key of another Redis type is (`RedisLink`), and the next answer to that
request is written over it.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any, Final, Protocol

import orjson

from tokometer.gateway.config import CacheConfig
from tokometer.gateway.redislink import RedisLink, RedisUnavailable
from tokometer.util.jsontext import whole_number
from tokometer.util.limits import MAX_TOKENS

__all__ = ["MAX_ENTRY_BYTES", "AnswerCache", "CachedAnswer", "MemoryCache", "RedisCache", "cache_key", "make_cache"]

MAX_ENTRY_BYTES: Final = 16 * 2**20
"""The largest answer the Redis cache keeps, as stored (``to_bytes``): 16 MiB, some million tokens of text."""
_MAX_SERVED_BY = 256  # characters of an upstream's name (gateway.config)

_FORMAT = 1  # bump when CachedAnswer changes shape: old entries then read as misses

# Request fields that never change the answer. Every other field is part of the key: an unknown
# parameter may well change the answer, and a needless miss is cheaper than a wrong hit.
_IGNORED = frozenset({"model", "stream", "stream_options", "user", "metadata", "store", "service_tier", "n"})
# Parameters at the value every OpenAI-compatible server defaults to count as absent.
_DEFAULTS: dict[str, Any] = {"presence_penalty": 0, "frequency_penalty": 0, "top_p": 1, "logit_bias": {}}


@dataclass(frozen=True, slots=True)
class CachedAnswer:
    """A complete, successful OpenAI-style answer, as the cache keeps it."""

    model: str
    text: str
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int
    served_by: str
    created: int
    reasoning: str = ""

    def to_bytes(self) -> bytes:
        return orjson.dumps({"v": _FORMAT, **asdict(self)})

    @classmethod
    def from_bytes(cls, raw: bytes) -> CachedAnswer:
        """Parse `to_bytes` output; ValueError for anything else (another format version included)."""
        data = orjson.loads(raw)
        if not isinstance(data, dict) or data.get("v") != _FORMAT:
            raise ValueError("not a cached answer of this version")
        values: dict[str, Any] = {}
        for field in fields(cls):
            if field.name not in data:
                if field.name == "reasoning":
                    continue
                raise ValueError(f"cached answer without {field.name!r}")
            value = data[field.name]
            if field.type == "int":
                value = whole_number(value, maximum=None if field.name == "created" else MAX_TOKENS)
                if value is None:
                    raise ValueError(f"cached answer: {field.name!r} is not a whole number in range")
            elif type(value) is not str:
                raise ValueError(f"cached answer: {field.name!r} is not a string")
            values[field.name] = value
        served_by = values["served_by"]
        if not (0 < len(served_by) <= _MAX_SERVED_BY and served_by.isprintable()):
            raise ValueError("cached answer: 'served_by' is not an upstream's name")
        return cls(**values)


def _canonical(value: Any) -> Any:
    """Numbers equal as numbers compare equal (0 and 0.0); None members of objects count as absent."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, Mapping):
        return {str(k): _canonical(v) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    return value


def _message(message: Any) -> Any:
    message = _canonical(message)
    if isinstance(message, dict):
        content = message.get("content")
        # [{"type": "text", "text": "hi"}] is the same message as "hi".
        if (isinstance(content, list) and len(content) == 1 and isinstance(content[0], dict)
                and content[0].get("type") == "text" and set(content[0]) == {"type", "text"}):
            message["content"] = content[0]["text"]
    return message


def _deterministic(body: Mapping[str, Any]) -> bool:
    if body.get("seed") is not None:
        return True
    temperature = body.get("temperature")
    return isinstance(temperature, int | float) and not isinstance(temperature, bool) and temperature == 0


def cache_key(route_model: str, body: Mapping[str, Any], endpoint: str = "chat") -> str | None:
    """The cache key of a request (sha256 hex), or None when its answer must not be cached.

    None when the request is not deterministic (no seed, and a temperature absent or above 0), asks
    for several choices (``n`` > 1) or for log probabilities (which a cached answer does not keep).
    The key covers the route's model, the endpoint (``chat`` or ``completions``), the messages or the
    prompt, and every parameter but ``stream``, ``stream_options``, ``user``, ``metadata``, ``store``,
    ``service_tier`` and the body's own ``model``. Key order, JSON whitespace, ``0`` vs ``0.0``, null
    values, ``max_tokens`` vs ``max_completion_tokens``, a one-string ``stop`` vs a one-item list and
    parameters at their universal defaults (penalties 0, ``top_p`` 1) do not change the key.
    """
    if not _deterministic(body):
        return None
    n = body.get("n")
    if n is not None and n != 1:
        return None
    if body.get("logprobs") or body.get("top_logprobs"):
        return None
    params: dict[str, Any] = {}
    for name, value in body.items():
        if name in _IGNORED or name in ("messages", "prompt") or value is None:
            continue
        value = _canonical(value)
        if name in _DEFAULTS and value == _DEFAULTS[name]:
            continue
        params[name] = value
    if "max_completion_tokens" in params:
        params["max_tokens"] = params.pop("max_completion_tokens")
    stop = params.get("stop")
    if isinstance(stop, str):
        params["stop"] = [stop]
    elif isinstance(stop, list) and all(isinstance(s, str) for s in stop):
        if stop:
            params["stop"] = sorted(set(stop))  # the order of stop strings does not matter
        else:
            del params["stop"]
    if endpoint == "chat":
        source: Any = [_message(m) for m in body.get("messages") or []]
    else:
        source = _canonical(body.get("prompt"))
    document = {"route": route_model, "endpoint": endpoint, "input": source, "params": params}
    canonical = orjson.dumps(document, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)
    return hashlib.sha256(canonical).hexdigest()


class AnswerCache(Protocol):
    """What the gateway needs of a cache. No method raises: a broken backend is a miss."""

    async def get(self, key: str) -> CachedAnswer | None: ...

    async def put(self, key: str, answer: CachedAnswer) -> None: ...

    async def close(self) -> None: ...

    @property
    def backend(self) -> str: ...

    @property
    def healthy(self) -> bool: ...


class MemoryCache:
    """In-process LRU cache with a TTL; ``clock`` (seconds, monotonic) is injectable for tests."""

    def __init__(self, max_entries: int = 10_000, ttl_s: float = 300.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.max_entries = max_entries
        self.ttl_s = ttl_s
        self._clock = clock
        self._entries: OrderedDict[str, tuple[float, CachedAnswer]] = OrderedDict()

    @property
    def backend(self) -> str:
        return "memory"

    @property
    def healthy(self) -> bool:
        return True

    def __len__(self) -> int:
        return len(self._entries)

    async def get(self, key: str) -> CachedAnswer | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        expires, answer = entry
        if self._clock() >= expires:
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return answer

    async def put(self, key: str, answer: CachedAnswer) -> None:
        self._entries[key] = (self._clock() + self.ttl_s, answer)
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    async def close(self) -> None:
        self._entries.clear()


class RedisCache:
    """A cache in Redis, shared by the gateway's replicas; a Redis outage reads as misses, never errors."""

    def __init__(self, url: str, ttl_s: float = 300.0, timeout_s: float = 0.05,
                 prefix: str = "tokometer:cache:", retry_after_s: float = 1.0) -> None:
        self.ttl_s = ttl_s
        self.prefix = prefix
        self._link = RedisLink(url, timeout_s=timeout_s, retry_after_s=retry_after_s, what="Redis (answer cache)")

    @property
    def backend(self) -> str:
        return "redis"

    @property
    def healthy(self) -> bool:
        return self._link.healthy

    async def get(self, key: str) -> CachedAnswer | None:
        try:  # one byte past the bound tells an entry too long from one just long enough
            raw = await self._link.call(lambda client: client.getrange(self.prefix + key, 0, MAX_ENTRY_BYTES))
        except RedisUnavailable:
            return None
        if not isinstance(raw, bytes) or not raw or len(raw) > MAX_ENTRY_BYTES:
            return None
        try:
            return CachedAnswer.from_bytes(raw)
        except ValueError:
            return None  # another format version, or not ours: a miss

    async def put(self, key: str, answer: CachedAnswer) -> None:
        data = answer.to_bytes()
        if len(data) > MAX_ENTRY_BYTES:
            return
        ttl_ms = max(1, round(self.ttl_s * 1000))
        try:
            await self._link.call(lambda client: client.set(self.prefix + key, data, px=ttl_ms))
        except RedisUnavailable:
            return

    async def close(self) -> None:
        await self._link.close()


def make_cache(config: CacheConfig) -> AnswerCache | None:
    """The cache ``config`` asks for: None when disabled, Redis with a ``redis_url``, else in-process."""
    if not config.enabled:
        return None
    if config.redis_url:
        return RedisCache(config.redis_url, ttl_s=config.ttl_s, timeout_s=config.redis_timeout_s)
    return MemoryCache(max_entries=config.max_entries, ttl_s=config.ttl_s)
