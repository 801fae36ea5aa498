"""The reaper (engines that fork helpers, like vLLM): real processes, a fake engine that forks two helpers.

Three ways an engine can be left half-alive, each checked: its leader SIGKILLed (the helpers must go,
and the exit status must say SIGKILL), tokometer SIGKILLed (no atexit, no stop(): the helpers must go
too), and a normal stop()."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import psutil
import pytest

from tokometer.engines.process import EngineProcess

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the reaper is Linux-only")

# A leader that forks two helpers which outlive it unless someone kills them (as vLLM's engine core does).
FAKE_ENGINE = "sleep 300 & sleep 300 & echo started; wait"


def _wait_started(process: EngineProcess) -> None:
    deadline = time.monotonic() + 10
    while "started" not in process.log_tail() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert "started" in process.log_tail()


def _gone(pids: list[int], within_s: float = 10) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if not any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE for p in pids):
            return True
        time.sleep(0.05)
    return False


def _running(pid: int) -> bool:
    """Still running (a zombie, waiting for its parent to reap it, has died)."""
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False


def _family(pid: int) -> tuple[int, list[int]]:
    """The engine's leader (the reaper's only child) and the leader's helpers."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        children = psutil.Process(pid).children()
        if children and len(children[0].children()) == 2:
            return children[0].pid, [c.pid for c in children[0].children()]
        time.sleep(0.02)
    raise AssertionError("the fake engine did not fork its helpers")


def test_a_sigkilled_leader_takes_its_helpers_along() -> None:
    process = EngineProcess(["sh", "-c", FAKE_ENGINE], "fake-vllm", reap=True)
    try:
        _wait_started(process)
        leader, helpers = _family(process.pid)
        psutil.Process(leader).send_signal(signal.SIGKILL)
        assert _gone(helpers), "the helpers outlived their SIGKILLed leader"
        deadline = time.monotonic() + 5
        while process.alive() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert process.exit_code() == -signal.SIGKILL  # the caller learns the real cause
    finally:
        process.stop(grace_s=1)


def test_stop_takes_leader_and_helpers() -> None:
    process = EngineProcess(["sh", "-c", FAKE_ENGINE], "fake-vllm", reap=True)
    _wait_started(process)
    leader, helpers = _family(process.pid)
    process.stop(grace_s=5)
    assert _gone([process.pid, leader, *helpers], within_s=5)


def test_a_sigkilled_tokometer_takes_the_whole_engine_along() -> None:
    code = ("import json, sys, time, psutil\n"
            "from tokometer.engines.process import EngineProcess\n"
            f"p = EngineProcess(['sh', '-c', {FAKE_ENGINE!r}], 'fake-vllm', reap=True)\n"
            "deadline = time.monotonic() + 10\n"
            "while time.monotonic() < deadline:\n"
            "    kids = psutil.Process(p.pid).children(recursive=True)\n"
            "    if len(kids) == 3: break\n"
            "    time.sleep(0.02)\n"
            "print(json.dumps([p.pid] + [k.pid for k in kids]), flush=True)\n"
            "time.sleep(300)\n")
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        family = json.loads(parent.stdout.readline())
        assert len(family) == 4  # reaper, leader, two helpers
        parent.kill()  # SIGKILL: no atexit, no stop()
        parent.wait(10)
        assert _gone(family), "the engine outlived a SIGKILLed tokometer"
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()
        if parent.stdout is not None:
            parent.stdout.close()


def test_once_the_reaper_has_exited_its_group_is_dead() -> None:
    """SIGKILL lands asynchronously, and a helper holding much memory takes a while to die after it (its pages are
    freed on the way out: vLLM's workers hold gigabytes): the reaper waits for the helpers to die before it exits,
    so a caller that sees the engine gone never finds one of them still running."""
    big = f"{sys.executable} -c 'b = bytearray(1 << 30); import time; time.sleep(300)'"
    engine = f"{big} & {big} & sleep 1; echo started; wait"
    for _ in range(3):
        process = EngineProcess(["sh", "-c", engine], "fake-vllm", reap=True)
        try:
            deadline = time.monotonic() + 20
            while "started" not in process.log_tail() and time.monotonic() < deadline:
                time.sleep(0.02)
            leader, helpers = _family(process.pid)
            psutil.Process(leader).send_signal(signal.SIGKILL)
            deadline = time.monotonic() + 10
            while process.alive() and time.monotonic() < deadline:
                time.sleep(0.001)
            assert not process.alive()
            assert not [p for p in helpers if _running(p)], "a helper still ran after the reaper exited"
        finally:
            process.stop(grace_s=1)
