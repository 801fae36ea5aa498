"""A line on stderr when a request has waited a while for a server that does not answer.

A server that accepts the connection and then says nothing leaves a user in silence until a timeout
passes (60 s and more by default). `say_while_waiting` schedules one line, after ``after_s`` of
waiting, naming what is awaited and which limit ends the wait; nothing is printed when the answer
comes first. A leaf: the bench's check request and doctor's requests use it.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from tokometer.util.shown import printable

__all__ = ["WAIT_NOTICE_AFTER_S", "say_while_waiting"]

WAIT_NOTICE_AFTER_S = 5.0
"""Silence after which the user is told what is awaited."""


@contextmanager
def say_while_waiting(message: Callable[[], str], after_s: float = WAIT_NOTICE_AFTER_S) -> Iterator[None]:
    """Within a running event loop: if the block is still running after ``after_s``, write ``message()``
    (called then, so it can say how far the request got) as one line on stderr."""
    def say() -> None:
        sys.stderr.write(printable(message().rstrip("\n"), keep="\n") + "\n")
        sys.stderr.flush()

    handle = asyncio.get_running_loop().call_later(after_s, say)
    try:
        yield
    finally:
        handle.cancel()
