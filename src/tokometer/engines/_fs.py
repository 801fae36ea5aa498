"""Small file-system helpers shared by the engine modules: the cache dir, where the llama.cpp build
lives, and an inter-process lock.

The lock is advisory (``fcntl.flock`` on POSIX, ``msvcrt.locking`` on Windows) and is released by
the OS if the holder dies, so a killed build never leaves a stale lock behind.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import platformdirs

__all__ = ["LLAMA_CPP_BUILD", "LLAMA_SERVER_EXE", "build_dir", "built_binary_path", "cache_root", "file_lock"]

LLAMA_CPP_BUILD = "b11434"
LLAMA_SERVER_EXE = "llama-server.exe" if sys.platform == "win32" else "llama-server"


def cache_root() -> Path:
    """tokometer's cache directory (``platformdirs.user_cache_dir("tokometer")``)."""
    return Path(platformdirs.user_cache_dir("tokometer"))


def build_dir() -> Path:
    """Where tokometer's llama.cpp build lives: ``<user cache>/tokometer/llama.cpp/b11434``."""
    return cache_root() / "llama.cpp" / LLAMA_CPP_BUILD


def built_binary_path() -> Path:
    """The path of the cached build's ``llama-server`` (it may not exist yet)."""
    return build_dir() / "bin" / LLAMA_SERVER_EXE


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
