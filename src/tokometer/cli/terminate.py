"""SIGTERM handled like Ctrl-C: a run that is told to stop keeps what finished and says so.

`Terminate` installs a SIGTERM handler for as long as it is entered. While a coroutine it
wraps (`Terminate.guard`) runs, the first SIGTERM cancels that task exactly as asyncio's Ctrl-C
handling does, so ``tokometer bench`` keeps what finished, prints the partial summary and marks the
run ``interrupted``; outside it (starting an engine, say) and on a second SIGTERM it raises
`KeyboardInterrupt` there and then, so ``with`` blocks still clean up, and leaving the context turns
it into "terminated" on stderr. Either way the command exits with `EXIT_CODE`, 128 + SIGTERM, as
shells report a process ended by it (Ctrl-C: 130).
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Coroutine
from types import FrameType, TracebackType
from typing import Any, TypeVar

import click

__all__ = ["EXIT_CODE", "Terminate"]

EXIT_CODE = 128 + signal.SIGTERM

T = TypeVar("T")


class Terminate:
    """A context manager: while entered, SIGTERM stops the command the way Ctrl-C does."""

    def __init__(self) -> None:
        self.received = False
        self._task: asyncio.Task[Any] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._previous: Any = None

    def __enter__(self) -> Terminate:
        self._previous = signal.signal(signal.SIGTERM, self._handle)
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        signal.signal(signal.SIGTERM, self._previous)
        if isinstance(value, KeyboardInterrupt) and self.received:
            click.echo("tokometer: terminated (SIGTERM)", err=True)
            raise click.exceptions.Exit(EXIT_CODE) from None

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        first = not self.received
        self.received = True
        if first and self._task is not None and self._loop is not None and not self._task.done():
            self._loop.call_soon_threadsafe(self._task.cancel)
            return
        raise KeyboardInterrupt

    async def guard(self, work: Coroutine[Any, Any, T]) -> T:
        """Await ``work`` in this task; a SIGTERM meanwhile cancels it (see the module docstring)."""
        self._task, self._loop = asyncio.current_task(), asyncio.get_running_loop()
        try:
            return await work
        except asyncio.CancelledError:
            if self.received:
                raise KeyboardInterrupt from None  # cancelled before a step could take it as an interruption
            raise
        finally:
            self._task = self._loop = None
