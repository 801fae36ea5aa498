"""A FIFO nobody writes to, handed over as a file to read whole: it reads as empty at once (opening it for
reading used to wait for a writer, which may never come)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from tokometer.util.readlimit import iter_at_most, read_at_most


def _fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe"
    os.mkfifo(path)
    return path


def test_a_fifo_without_a_writer_reads_as_empty_without_waiting(tmp_path: Path) -> None:
    path = _fifo(tmp_path)
    done: list[object] = []
    reader = threading.Thread(target=lambda: done.append((read_at_most(path, 1024, "x"),
                                                          list(iter_at_most(path, 1024, "x")))), daemon=True)
    reader.start()
    reader.join(10)
    if reader.is_alive():  # unblock the thread so the test process can end, then fail
        with open(path, "wb"):
            pass
        raise AssertionError("reading a FIFO without a writer waited for one")
    assert done == [(b"", [])]


def test_a_fifo_with_a_writer_is_read_to_its_end(tmp_path: Path) -> None:
    """Reads of an opened FIFO block as usual: what a slow writer sends is all read, then its close ends it."""
    path = _fifo(tmp_path)
    writer = os.open(path, os.O_RDWR)  # a writer there before the reader opens it (Linux: no wait)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(b"".join(iter_at_most(path, 1 << 20, "x", chunk=64))),
                              daemon=True)
    reader.start()
    data = memoryview(b"hello\n" * 40_000)  # 240 KB, more than a pipe holds: the writes wait for the reader,
    while data:                              # so it has opened the FIFO before the writer closes it
        data = data[os.write(writer, data):]
    os.close(writer)
    reader.join(10)
    assert got == [b"hello\n" * 40_000]
