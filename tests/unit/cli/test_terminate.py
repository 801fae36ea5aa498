"""SIGTERM stops a command the way Ctrl-C does: a guarded task is cancelled, elsewhere it interrupts."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import click
import pytest

from tokometer.cli.terminate import EXIT_CODE, Terminate


def _terminate_soon(loop: asyncio.AbstractEventLoop) -> None:
    loop.call_later(0.05, os.kill, os.getpid(), signal.SIGTERM)


def test_a_guarded_task_is_cancelled_and_may_finish_its_work() -> None:
    async def step() -> str:
        _terminate_soon(asyncio.get_running_loop())
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            current = asyncio.current_task()
            assert current is not None
            current.uncancel()  # as a load step does: keep what finished
            return "interrupted"
        return "completed"

    previous = signal.getsignal(signal.SIGTERM)
    with Terminate() as terminate:
        assert asyncio.run(terminate.guard(step())) == "interrupted"
    assert terminate.received and EXIT_CODE == 143
    assert signal.getsignal(signal.SIGTERM) is previous


def test_outside_a_task_or_before_a_step_it_exits_143() -> None:
    async def preparing() -> None:
        _terminate_soon(asyncio.get_running_loop())
        await asyncio.sleep(10)

    with pytest.raises(click.exceptions.Exit) as caught, Terminate() as terminate:
        asyncio.run(terminate.guard(preparing()))
    assert caught.value.exit_code == EXIT_CODE
    with pytest.raises(click.exceptions.Exit), Terminate():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)
