"""Keeping big requests from costing everyone else: freed memory handed back, counting threads niced.

Counting a multi-megabyte prompt allocates hundreds of megabytes (the rendered chat, token ids,
the tokenizer's work buffers); once freed, glibc keeps most of it in its arenas, so the gateway's
RSS stays at its high-water mark. ``malloc_trim(0)`` returns the free pages. Elsewhere (musl,
macOS) this does nothing.

Prompt counting runs in worker threads; on Linux a thread has its own nice value, and the
counting threads take nice 10 so that, when the cores are busy, the event loop that relays
everyone's streams is scheduled first.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import os
import threading
from collections.abc import Callable

__all__ = ["lower_thread_priority", "release_free_memory"]

_COUNTING_NICE = 10


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        trim: Callable[[int], int] = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    return trim


def release_free_memory() -> None:
    """Give free heap pages back to the system where the C library can (glibc)."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


def lower_thread_priority() -> None:
    """Make the calling thread yield the CPU to others (Linux: per-thread nice; elsewhere nothing)."""
    with contextlib.suppress(AttributeError, OSError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), _COUNTING_NICE)
