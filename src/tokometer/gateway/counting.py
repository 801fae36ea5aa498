"""Where the gateway counts prompts: worker threads off the event loop, with a lane for big prompts.

Counting (and cutting) a prompt with the model's tokenizer can take long for a large body, and the
event loop that does it would hold up every stream it relays. `CountingLanes` runs each count in a
worker thread instead. Big prompts (bodies of `BIG_PROMPT_BYTES` and more) have a lane of their
own, ``counting_threads`` niced threads with a bounded queue, so small ones never wait behind them;
after a big one the freed memory is handed back to the system.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from tokometer.gateway.memory import lower_thread_priority, release_free_memory

if TYPE_CHECKING:
    from tokometer.gateway.prompt import PromptCheck, PromptLimiter
    from tokometer.protocols.gateway_clients import Endpoint

__all__ = ["BIG_PROMPT_BYTES", "BIG_QUEUE_PER_THREAD", "CountingLanes"]

BIG_PROMPT_BYTES = 256 * 1024
"""Bodies from this size on are counted in the big-prompt lane."""
BIG_QUEUE_PER_THREAD = 4
"""Big prompts waiting (or being counted) per counting thread before more are refused with 503."""


class CountingLanes:
    """The small-prompt and big-prompt counting threads of one gateway process."""

    __slots__ = ("_big", "_big_limit", "_big_waiting", "_small")

    def __init__(self, big_threads: int) -> None:
        self._small = ThreadPoolExecutor(2, "tokometer-count")
        self._big = ThreadPoolExecutor(big_threads, "tokometer-count-big", initializer=lower_thread_priority)
        self._big_limit = BIG_QUEUE_PER_THREAD * big_threads
        self._big_waiting = 0

    async def check(self, limiter: PromptLimiter, body: dict[str, Any], endpoint: Endpoint,
                    size: int) -> PromptCheck | None:
        """``limiter``'s check of ``body`` (``size``: its bytes), in the lane its size belongs to; None: the big
        lane is full. A route without a tokenizer has nothing to count: checked here, at once."""
        if limiter.tokenizer is None:
            return limiter.check(body, endpoint)  # nothing to count: cheap
        loop = asyncio.get_running_loop()
        if size < BIG_PROMPT_BYTES:
            return await loop.run_in_executor(self._small, limiter.check, body, endpoint)
        if self._big_waiting >= self._big_limit:
            return None
        self._big_waiting += 1
        try:
            return await loop.run_in_executor(self._big, limiter.check, body, endpoint)
        finally:
            self._big_waiting -= 1
            release_free_memory()

    def shutdown(self) -> None:
        """Stop the threads; counts not started are dropped."""
        for pool in (self._small, self._big):
            pool.shutdown(wait=False, cancel_futures=True)
