"""What the CPU offers a build: a fingerprint of its model and flags, and whether AMX really works.

``cpu_fingerprint()`` hashes the architecture, the CPU model name and its feature flags (from
``/proc/cpuinfo`` on Linux). A cached ``-march=native`` build records it; a different fingerprint
at start (the cache copied to another machine, a VM moved to another host type) means the build
must prove it still runs before it is trusted.

``probe_amx()`` answers a question ``/proc/cpuinfo`` cannot: a CPU can advertise AMX while this
process may not use it (a VM or container that does not pass the tile state through). Linux wants
a process to ask for the tile-data state first (``arch_prctl(ARCH_REQ_XCOMP_PERM,
XFEATURE_XTILEDATA)``, as ggml does); the probe asks in a child process, then runs ``ldtilecfg;
tilezero; tilerelease`` there. A refused request or a trapped instruction (SIGILL) means a native
build with AMX would die at its first matrix multiply, so the build skips straight to native
without AMX.
"""

from __future__ import annotations

import hashlib
import platform
import subprocess
import sys
from dataclasses import dataclass
from functools import cache

from tokometer.engines.signals import exit_reason, signal_of
from tokometer.util.hostinfo import cpu_model

__all__ = ["AmxProbe", "amx_advertised", "cpu_fingerprint", "cpu_flags", "is_x86_64", "probe_amx"]

# Runs in a child: exit 0 = tile instructions ran, 3 = the kernel refused the tile state (errno text on
# stdout), 4 = could not map executable memory (no answer); death by SIGILL = the instructions trapped.
_PROBE = r"""
import ctypes, mmap, os, resource, sys
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a trap leaves no core file behind
if sys.argv[1] == "ask":
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(ctypes.c_long(158), ctypes.c_long(0x1023), ctypes.c_long(18)) != 0:  # SYS_arch_prctl
        print(os.strerror(ctypes.get_errno()))
        sys.exit(3)
try:
    page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
except OSError as exc:
    print(exc)
    sys.exit(4)
# ldtilecfg (%rdi); tilezero %tmm0; tilerelease; ret
page.write(bytes.fromhex("c4e2784907" "c4e27b49c0" "c4e27849c0" "c3"))
config = (ctypes.c_ubyte * 64)()
config[0], config[16], config[48] = 1, 64, 16  # palette 1; tmm0: 64 bytes x 16 rows
ctypes.CFUNCTYPE(None, ctypes.c_void_p)(ctypes.addressof(ctypes.c_char.from_buffer(page)))(ctypes.addressof(config))
"""


def is_x86_64() -> bool:
    """True on 64-bit x86 (where GCC and Clang know ``-mno-amx-*``)."""
    return platform.machine().lower() in ("x86_64", "amd64")


@cache
def cpu_flags() -> frozenset[str]:
    """The CPU feature flags the kernel reports (``flags`` or ARM's ``Features`` in /proc/cpuinfo); empty elsewhere."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                key, _, value = line.partition(":")
                if key.strip() in ("flags", "Features"):
                    return frozenset(value.split())
    except OSError:
        pass
    return frozenset()


def cpu_fingerprint() -> str:
    """16 hex digits that change when the CPU model or its feature flags do."""
    text = "|".join((platform.machine(), cpu_model(), " ".join(sorted(cpu_flags()))))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def amx_advertised() -> bool:
    """True when this is x86-64 Linux and the kernel lists AMX tiles among the CPU's flags."""
    return sys.platform.startswith("linux") and is_x86_64() and "amx_tile" in cpu_flags()


@dataclass(frozen=True)
class AmxProbe:
    """The probe's answer: ``usable`` True/False, or None when it could not tell; ``detail`` in words."""

    usable: bool | None
    detail: str


def probe_amx(ask_permission: bool = True, timeout_s: float = 20.0) -> AmxProbe:
    """Whether this process may really execute AMX tile instructions (x86-64 Linux; see the module doc).

    ``ask_permission=False`` skips the ``arch_prctl`` request (a test uses it to see a trap for real).
    """
    if not (sys.platform.startswith("linux") and is_x86_64()):
        return AmxProbe(False, "not x86-64 Linux")
    argv = [sys.executable, "-c", _PROBE, "ask" if ask_permission else "skip"]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return AmxProbe(None, f"the probe did not run: {exc}")
    said = done.stdout.strip()
    if done.returncode == 0:
        return AmxProbe(True, "tile instructions ran")
    if done.returncode == 3:
        return AmxProbe(False, f"the kernel refuses this process AMX tile state (arch_prctl: {said})")
    if signal_of(done.returncode) is not None:
        return AmxProbe(False, f"the tile instructions trap (the probe {exit_reason(done.returncode)})")
    return AmxProbe(None, f"the probe could not tell ({said or f'exit {done.returncode}'})")
