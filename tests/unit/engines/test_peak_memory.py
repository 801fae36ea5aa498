"""The peak resident memory of an engine's process group, read from the kernel for real: a process group of two
Python processes, one holding 64 MiB for a moment and giving it back."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tokometer.engines.peak_memory import _group_of, group_peak_memory

MIB = 2**20
_HOLD = """
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
block = bytearray(64 * 2**20)  # touched: resident
del block  # given back: the high-water mark keeps it
print("ready", flush=True)
time.sleep(30)
"""


def test_the_group_s_high_water_mark_counts_memory_given_back_and_every_process() -> None:
    if not sys.platform.startswith("linux"):
        pytest.skip("the high-water mark is read from /proc/PID/status, which only Linux has")
    leader = subprocess.Popen([sys.executable, "-c", _HOLD], stdout=subprocess.PIPE, start_new_session=True)
    try:
        assert leader.stdout is not None and leader.stdout.readline().strip() == b"ready"
        time.sleep(0.2)  # the child is up (it started before the block was made)
        found = group_peak_memory(leader.pid)
        assert found.processes == 2 and "2 processes" in found.note
        assert found.peak_bytes is not None and found.peak_bytes > 64 * MIB
        assert group_peak_memory(2**22 + 12345).peak_bytes is None  # no such group
    finally:
        os.killpg(leader.pid, signal.SIGKILL)
        leader.wait()
        if leader.stdout is not None:
            leader.stdout.close()


@pytest.mark.parametrize(("stat", "group"), [
    ("123 (llama-server) S 1 123 123 0 -1", 123),
    ("77 (a (tricky) name) R 5 80 80 0", 80),
    ("9 (x)", None),
])
def test_the_group_is_read_past_a_name_with_spaces_and_brackets(stat: str, group: int | None) -> None:
    assert _group_of(stat) == group
