"""Every file a command writes is written whole or not at all: `write_atomic` and `atomic_open`.

The new contents go to a temporary file beside the target (same directory, so the same file
system), which is flushed and fsynced and then renamed over the target (`os.replace`, atomic on
POSIX); the directory is fsynced after, so the rename survives a crash. A reader therefore sees the
old file or the new one, never a part: a full disk, an I/O error, Ctrl-C or SIGTERM part-way leave
the previous version intact and the temporary file removed (SIGTERM is turned into exit status 143
for the length of the write, where the process had no handler of its own).

A failure is a `OutputError` (one line, exit status 2) that names the file and says whether an
earlier version is still there: "cannot write report.html: No space left on device (errno 28); the
previous report.html is unchanged".

The new file gets the permissions of the one it replaces, or the umask's for a new file; a
symbolic link is followed, so its target is replaced and the link kept.
"""

from __future__ import annotations

import contextlib
import io
import os
import secrets
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import IO, Any, Literal, overload

from tokometer.util.errors import OutputError

__all__ = ["atomic_open", "atomic_path", "write_atomic"]

_TERMINATED = 128 + signal.SIGTERM


def write_atomic(path: Path | str, data: str | bytes, *, encoding: str = "utf-8") -> None:
    """Write ``data`` (text in ``encoding``, or bytes) to ``path`` atomically; missing directories are made."""
    raw = data.encode(encoding) if isinstance(data, str) else data
    with atomic_open(path, "wb") as handle:
        handle.write(raw)


@overload
def atomic_open(path: Path | str, mode: Literal["w"] = "w", *, encoding: str = "utf-8",
                newline: str | None = None) -> contextlib.AbstractContextManager[IO[str]]: ...


@overload
def atomic_open(path: Path | str, mode: Literal["wb"], *, encoding: str = "utf-8",
                newline: str | None = None) -> contextlib.AbstractContextManager[IO[bytes]]: ...


def atomic_open(path: Path | str, mode: Literal["w", "wb"] = "w", *, encoding: str = "utf-8",
                newline: str | None = None) -> contextlib.AbstractContextManager[IO[Any]]:
    """A file to write ``path``'s new contents into; it replaces ``path`` when the ``with`` block ends without
    an exception, and is removed otherwise (``path`` then keeps its previous contents)."""
    return _atomic(Path(path), mode, encoding, newline)


@contextlib.contextmanager
def _atomic(path: Path, mode: str, encoding: str, newline: str | None) -> Iterator[IO[Any]]:
    shown = path
    target = Path(os.path.realpath(path.expanduser()))
    existed = target.exists()
    temp = target.parent / f".{target.name}.{secrets.token_hex(4)}.tmp"
    with _sigterm_as_exit():
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
        except OSError as exc:
            raise _error(shown, exc, existed) from None
        try:
            try:
                if existed:
                    with contextlib.suppress(OSError):
                        os.chmod(fd, target.stat().st_mode & 0o7777)
                raw = io.FileIO(fd, "wb", closefd=True)
                handle: IO[Any] = (io.BufferedWriter(raw) if mode == "wb" else
                                   io.TextIOWrapper(io.BufferedWriter(raw), encoding=encoding, newline=newline))
            except BaseException:
                os.close(fd)
                raise
            try:
                yield handle
                handle.flush()
                os.fsync(handle.fileno())
            finally:
                handle.close()  # a close that fails to flush (ENOSPC) raises here too
            os.replace(temp, target)
        except OSError as exc:
            _remove(temp)
            raise _error(shown, exc, existed) from None
        except BaseException:
            _remove(temp)
            raise
    _sync_directory(target.parent)


@contextlib.contextmanager
def atomic_path(path: Path | str) -> Iterator[Path]:
    """A temporary path beside ``path`` for a writer that wants a file name (a library's ``save(path)``); the
    file written there replaces ``path`` when the ``with`` block ends without an exception, else it is removed."""
    shown = Path(path)
    target = Path(os.path.realpath(shown.expanduser()))
    existed = target.exists()
    temp = target.parent / f".{target.name}.{secrets.token_hex(4)}.tmp"
    with _sigterm_as_exit():
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            yield temp
            fd = os.open(temp, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(temp, target)
        except OSError as exc:
            _remove(temp)
            raise _error(shown, exc, existed) from None
        except BaseException:
            _remove(temp)
            raise
    _sync_directory(target.parent)


def _error(path: Path, exc: OSError, existed: bool) -> OutputError:
    why = exc.strerror or str(exc)
    if exc.errno is not None:
        why += f" (errno {exc.errno})"
    blocking = next((p for p in path.expanduser().parents if p.exists() and not p.is_dir()), None)
    if blocking is not None:
        why = f"{blocking} is a file, not a directory"
    after = f"the previous {path.name} is unchanged" if existed else "nothing was written"
    return OutputError(f"cannot write {path}: {why}; {after}")


def _remove(temp: Path) -> None:
    with contextlib.suppress(OSError):
        temp.unlink()


def _sync_directory(directory: Path) -> None:
    """fsync the directory so the rename is on disk too (best effort: not every file system allows it)."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class _Terminated(SystemExit):
    """SIGTERM arrived during a write: unwind (removing the temporary file) and exit 143."""


@contextlib.contextmanager
def _sigterm_as_exit() -> Iterator[None]:
    """While writing, SIGTERM unwinds the write instead of killing the process outright, if nobody else
    handles it (`tokometer.cli.terminate` does during a benchmark) and this is the main thread."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) != signal.SIG_DFL:
        yield
        return

    def handle(signum: int, frame: FrameType | None) -> None:
        raise _Terminated(_TERMINATED)

    signal.signal(signal.SIGTERM, handle)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
