"""The gateway's request log: one JSON line per request, for cost analysis and monitoring.

Each line holds who asked (the key's name, never its secret), what they asked for (the route), who
answered (upstream, the model it served), the outcome (status, error), the tokens and what they
cost, and the speed (TTFT, decode tok/s, end to end), with whether the answer came from the cache or
a fallback upstream, whether a hedge raced the primary, and whether the answer was resumed. A
background thread writes the lines, so the event loop never waits on the disk; lines written on an
event loop are handed to it every `HANDOVER_S` in one piece (each hand-over wakes the thread, which
cost as much as the rest of the line when every request did it); `RequestLog.close` writes out
whatever is queued.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import orjson

from tokometer.gateway.config import UpstreamConfig
from tokometer.util.errors import ConfigError

__all__ = ["RequestLog", "RequestLogEntry", "cost_usd"]

logger = logging.getLogger("tokometer.gateway")

_PER = 1_000_000
HANDOVER_S = 0.1
"""How long lines written on an event loop gather before they go to the writing thread."""


_second: list[Any] = [-1, ""]
"""The last whole second `_utc_now` formatted, and its text up to the seconds."""


def _utc_now() -> str:
    """Now, UTC, ISO 8601 to the millisecond with a ``Z`` (the date and time formatted once a second: every
    request's line has one, and `datetime.isoformat` costs more than the rest of the line)."""
    now = time.time()
    second = int(now)
    if second != _second[0]:
        _second[0], _second[1] = second, datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{_second[1]}.{int((now - second) * 1000):03d}Z"


@dataclass(kw_only=True, slots=True)
class RequestLogEntry:
    """One request through the gateway, as logged."""

    time: str = field(default_factory=_utc_now)  # UTC, ISO 8601, when the request ended
    key: str | None  # the API key's name (None when the gateway has no keys)
    route: str  # the model the client asked for
    upstream: str | None = None  # the upstream that answered (None: cache hit, or no upstream reached)
    model_served: str | None = None
    status: int
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost_usd: float | None = None
    ttft_ms: float | None = None  # first content from the upstream, from when the gateway received the request
    tpot_ms: float | None = None  # the bench's TPOT (tokometer.metrics.request.tpot_ns)
    decode_tok_s: float | None = None  # 1 / TPOT
    e2e_ms: float = 0.0
    cache_hit: bool = False
    fallback: bool = False  # served by an upstream other than the route's first
    retries: int = 0
    error: str | None = None
    upstream_ttft_ms: float | None = None  # first content from the upstream, from the upstream request's send
    overhead_ms: float | None = None  # the gateway's own time before the first token reached the client
    hedge: str | None = None  # a hedge was sent: the leg that won ("primary" or "hedge"; None: no hedge)
    resumes: int = 0  # times the answer was resumed on another upstream after one failed mid-answer
    served_by: list[str] | None = None  # with resumes: every upstream that served part of the answer, in order
    api: str | None = None  # the protocol the client spoke, in bench's --api names (openai-chat, anthropic-messages...)

    def to_json(self) -> bytes:
        return orjson.dumps(self)  # orjson writes a dataclass's fields in order, at C speed (asdict: 15 times slower)


def cost_usd(upstream: UpstreamConfig, prompt_tokens: int | None, completion_tokens: int | None) -> float | None:
    """What a request cost at ``upstream``'s prices (USD per million tokens), or None when unknown.

    None when the upstream has no prices, or when tokens are unknown on a side that has a price; a
    side without a price counts as free.
    """
    sides = ((upstream.price_input_per_m, prompt_tokens), (upstream.price_output_per_m, completion_tokens))
    if all(price is None for price, _ in sides):
        return None
    total = 0.0
    for price, tokens in sides:
        if price is None:
            continue
        if tokens is None:
            return None
        total += price * tokens / _PER
    return total


_CLOSE = object()


class RequestLog:
    """Appends `RequestLogEntry` lines to a JSONL file from a background thread; ``path`` None: no-op."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._queue: queue.SimpleQueue[bytes | object] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._pending: list[bytes] = []
        """Lines written on the event loop since the last hand-over."""
        self._handover_on: asyncio.AbstractEventLoop | None = None
        """The loop a hand-over is scheduled on (None: none is)."""
        if path is None:
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            file = path.open("ab")
        except OSError as exc:
            raise ConfigError(f"log.path: cannot open {path} for appending: {exc.strerror or exc}") from None
        self._thread = threading.Thread(target=self._run, args=(file,), name="tokometer-request-log", daemon=True)
        self._thread.start()

    def write(self, entry: RequestLogEntry) -> None:
        """Queue one line; returns at once. Ignored once closed."""
        if self._thread is None or self._closed:
            return
        line = entry.to_json() + b"\n"
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no event loop here: straight to the thread
            self._queue.put(line)
            return
        self._pending.append(line)
        if self._handover_on is not loop:  # none due, or due on a loop that is gone
            self._handover_on = loop
            loop.call_later(HANDOVER_S, self._hand_over)

    def _hand_over(self) -> None:
        self._handover_on = None
        if self._pending:
            self._queue.put(b"".join(self._pending))
            self._pending.clear()

    def close(self) -> None:
        """Write out every queued line and close the file (blocks until done; idempotent)."""
        if self._closed:
            return
        self._closed = True
        if self._thread is not None:
            self._hand_over()
            self._queue.put(_CLOSE)
            self._thread.join()

    def _run(self, file: IO[bytes]) -> None:
        failed = False
        try:
            while True:
                item = self._queue.get()
                batch: list[bytes] = []
                done = False
                while True:  # everything already queued goes out in one write
                    if item is _CLOSE:
                        done = True
                        break
                    assert isinstance(item, bytes)
                    batch.append(item)
                    try:
                        item = self._queue.get_nowait()
                    except queue.Empty:
                        break
                if batch:
                    try:
                        file.write(b"".join(batch))
                        file.flush()
                    except OSError as exc:
                        if not failed:
                            logger.warning("request log %s: cannot write (%s); lines are being lost", self.path, exc)
                        failed = True
                if done:
                    return
        finally:
            with contextlib.suppress(OSError):
                file.close()
