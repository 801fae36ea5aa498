"""tokometer's cache directory and an inter-process file lock: the two things every cache writer needs; and
whether a cache file may be written over (`replaceable`).

The lock is advisory (``fcntl.flock`` on POSIX, ``msvcrt.locking`` on Windows) and is released by
the OS if the holder dies, so a killed build or model assembly never leaves a stale lock behind.
This module imports nothing from tokometer.
"""

from __future__ import annotations

import os
import stat
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["cache_root", "file_lock", "replaceable"]


def cache_root() -> Path:
    """tokometer's cache directory (``platformdirs.user_cache_dir("tokometer")``)."""
    import platformdirs  # imported when needed: not every command touches the cache

    return Path(platformdirs.user_cache_dir("tokometer"))


def replaceable(path: Path) -> bool:
    """Whether a cache file may be written at ``path``: nothing is there, or a regular file. A FIFO put there
    would hold the write until a reader came (``write_atomic`` writes such a file in place), and a device would
    take it; a cache only saves time, so it is then not written."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except FileNotFoundError:
        return True
    except OSError:
        return False


@contextmanager
def file_lock(path: Path, poll_s: float = 0.5) -> Iterator[None]:
    """Hold an exclusive lock on ``path`` (created if missing) for the duration of the block."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
            import msvcrt

            while True:
                try:
                    msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
                    break
                except OSError:
                    time.sleep(poll_s)
            try:
                yield
            finally:
                os.lseek(fd, 0, os.SEEK_SET)
                msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
        else:
            import fcntl

            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
