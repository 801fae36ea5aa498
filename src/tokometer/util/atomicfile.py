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

Only a regular file is replaced: what a name is comes from `tokometer.util.outputtarget`, the one resolver
of every output. ``-`` and ``/dev/stdout`` write standard output, ``/dev/fd/N`` that descriptor, and a
character device or a FIFO (``/dev/full``, ``mkfifo``) is written in place, never replaced or removed; a
write that fails there (``/dev/full``'s ENOSPC, a reader gone: EPIPE) is an `OutputError` naming it too.
"""

from __future__ import annotations

import contextlib
import io
import os
import secrets
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import IO, Any, Literal, overload

from tokometer.util.errors import OutputError
from tokometer.util.outputtarget import OutputTarget, output_target

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
    return _output(path, mode, encoding, newline)


@contextlib.contextmanager
def _output(path: Path | str, mode: str, encoding: str, newline: str | None) -> Iterator[IO[Any]]:
    """The writer ``path`` takes (`output_target`): a regular file's atomic one, else one in place."""
    target = output_target(path)
    writer = (_atomic(Path(path), target.path, mode, encoding, newline) if target.kind == "file"
              else _in_place(target, mode, encoding, newline))
    with writer as handle:
        yield handle


@contextlib.contextmanager
def _in_place(target: OutputTarget, mode: str, encoding: str, newline: str | None) -> Iterator[IO[Any]]:
    """Standard output, an open descriptor, a character device or a FIFO, written as it is (never replaced);
    nothing is buffered past the ``with`` block, and a write that fails is an OutputError naming it."""
    try:
        sys.stdout.flush()  # what was printed before comes first
        sys.stderr.flush()
        fd = _in_place_fd(target)
        if fd is None:  # a standard output with no descriptor of its own (replaced in-process)
            stream: IO[Any] = sys.stdout.buffer if mode == "wb" else sys.stdout
            yield stream
            stream.flush()
            return
        with _wrap(fd, mode, encoding, newline, raw=_WholeWrites(fd)) as handle:
            yield handle
    except OSError as exc:
        if target.kind == "stdout":  # what is still buffered for it cannot be written: no second complaint at exit
            with contextlib.suppress(OSError):
                sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - replaces the broken stream until exit
        raise _error(Path(target.shown), exc, None, label=target.label) from None


def _in_place_fd(target: OutputTarget) -> int | None:
    """A descriptor of this process's own to write ``target`` through (None: standard output has none)."""
    if target.kind == "stdout":
        try:
            return os.dup(sys.stdout.fileno())
        except (AttributeError, ValueError, io.UnsupportedOperation):
            return None
    if target.kind == "descriptor":
        return os.dup(target.fd)
    return os.open(target.path, os.O_WRONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0))


class _WholeWrites(io.RawIOBase):
    """A descriptor whose every write is whole: a pipe whose reader leaves part-way takes part of a write
    without an error, so the rest is written again, and that write fails (EPIPE) instead of being lost."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self._fd = fd

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        total = len(view)
        while view:
            view = view[os.write(self._fd, view):]
        return total

    def close(self) -> None:
        if not self.closed:
            try:
                os.close(self._fd)
            finally:
                super().close()


def _wrap(fd: int, mode: str, encoding: str, newline: str | None, *, raw: io.RawIOBase | None = None) -> IO[Any]:
    """A buffered (text or binary) file over ``fd`` (through ``raw`` when given), which it closes."""
    try:
        raw = raw or io.FileIO(fd, "wb", closefd=True)
    except BaseException:
        os.close(fd)
        raise
    return (io.BufferedWriter(raw) if mode == "wb" else
            io.TextIOWrapper(io.BufferedWriter(raw), encoding=encoding, newline=newline))


@contextlib.contextmanager
def _atomic(shown: Path, target: Path, mode: str, encoding: str, newline: str | None) -> Iterator[IO[Any]]:
    existed = target.exists()
    temp = target.parent / f".{target.name}.{secrets.token_hex(4)}.tmp"
    with _sigterm_as_exit():
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
        except OSError as exc:
            raise _error(shown, exc, existed) from None
        try:
            if existed:
                with contextlib.suppress(OSError):
                    os.chmod(fd, target.stat().st_mode & 0o7777)
            handle = _wrap(fd, mode, encoding, newline)
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
    file written there replaces ``path`` when the ``with`` block ends without an exception, else it is removed.
    ``path`` must be a regular file (or not exist yet): a library's writer cannot be pointed at a device."""
    shown = Path(path)
    resolved = output_target(shown)
    if resolved.kind != "file":
        raise OutputError(f"cannot write {shown}: a regular file is needed here, not {resolved.label}")
    target = resolved.path
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


def _error(path: Path, exc: OSError, existed: bool | None, *, label: str | None = None) -> OutputError:
    """The one line of a failed write: the file, why, and whether its previous version is still there
    (``existed`` None: written in place, so there was none to keep)."""
    why = exc.strerror or str(exc)
    if exc.errno is not None:
        why += f" (errno {exc.errno})"
    if existed is None:
        return OutputError(f"cannot write {label or path}: {why}; what was written there is incomplete")
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
