"""A watchdog between tokometer and an engine that forks helpers: when either end dies, the whole group goes.

``python reaper.py ARGV...`` (run by path, standard library only, Linux) starts ``ARGV`` as its child in
its own process group — the group `tokometer.engines.process.EngineProcess` made for it — and stays
there as the group's leader. It exists for engines like vLLM, whose API server forks an engine core
and workers (4 GB on a CPU): without it,

- a SIGKILLed API server leaves its engine core and workers running, orphaned; and
- a SIGKILLed tokometer takes only the API server with it (``PR_SET_PDEATHSIG`` signals one process).

With it:

- when the engine's leader exits for any reason, every other process in the group gets SIGKILL, the
  reaper waits until they have died (SIGKILL lands asynchronously; at most ``KILLED_WITHIN_S``), and
  exits the way the leader did (the same status, or killed by the same signal, so the caller's messages
  name the real cause): once the reaper is seen to have exited, its group is gone;
- SIGTERM, SIGINT or SIGHUP (also what the kernel sends when tokometer dies: the reaper asks for
  SIGTERM as its parent-death signal) is passed on to the group; if the engine is still there
  ``GRACE_S`` later, the group gets SIGKILL.

Group members are found by their process group id in ``/proc``, which also finds processes that were
re-parented to init when their own parent died.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from contextlib import suppress
from types import FrameType

GRACE_S = 10
KILLED_WITHIN_S = 5.0
"""How long the reaper waits for the group's SIGKILLed members to die before it exits anyway."""

_ME = os.getpid()


def _members(living: bool = False) -> list[int]:
    """Every other process in this process group (the reaper's own group); ``living``: those not yet dead (a
    zombie, waiting for its parent to reap it, has died)."""
    group = os.getpgid(0)
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == _ME:
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()  # after "pid (comm) ": state ppid pgrp ...
        if len(fields) > 2 and int(fields[2]) == group and not (living and fields[0] in (b"Z", b"X")):
            found.append(int(name))
    return found


def _wait_others_dead(within_s: float) -> None:
    """Until every other member of the group has died, or ``within_s`` has passed."""
    deadline = time.monotonic() + within_s
    while _members(living=True) and time.monotonic() < deadline:
        time.sleep(0.005)


def _signal_others(sig: int) -> None:
    for pid in _members():
        with suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def _on_alarm(signum: int, frame: FrameType | None) -> None:
    _signal_others(signal.SIGKILL)


def _on_stop(signum: int, frame: FrameType | None) -> None:
    _signal_others(signum)
    signal.alarm(GRACE_S)


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: reaper.py PROGRAM [ARGS...]", file=sys.stderr)
        return 2
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _on_stop)
    signal.signal(signal.SIGALRM, _on_alarm)
    try:
        child = subprocess.Popen(argv)
    except OSError as exc:
        print(f"reaper: cannot run {argv[0]}: {exc}", file=sys.stderr)
        return 127
    code = child.wait()
    _signal_others(signal.SIGKILL)  # what the leader left behind: its engine core, its workers
    _wait_others_dead(KILLED_WITHIN_S)
    if code < 0:  # leave the way the leader did, so the caller sees the same signal
        if -code not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(-code, signal.SIG_DFL)
        os.kill(_ME, -code)
        return 128 - code  # a signal whose default is not to end the process
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
