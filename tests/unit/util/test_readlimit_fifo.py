"""A FIFO handed over as a file to read whole: nobody writing to it, it reads as empty at once (opening it for
reading used to wait for a writer, which may never come); a writer that holds it open and never writes or never
closes it is an error at the deadline (reading used to wait for ever)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from tokometer.util import readlimit
from tokometer.util.errors import ConfigError, DatasetError
from tokometer.util.readlimit import iter_at_most, read_at_most, read_json, read_text


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


def _silent_writer(path: Path) -> tuple[int, int]:
    """A writer that holds ``path`` open and never writes (and a reader holding it too, so that opening the writer
    does not wait): both descriptors, to close."""
    holder = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    return holder, os.open(path, os.O_WRONLY)


def test_a_fifo_whose_writer_never_writes_is_an_error_at_the_deadline(tmp_path: Path) -> None:
    """Read whole, a pipe has a deadline: a writer that holds it open and never writes (or never closes it) is one
    error naming the file once the deadline has passed (shortened here), not a wait for ever."""
    path = _fifo(tmp_path)
    descriptors = _silent_writer(path)
    try:
        started = time.monotonic()
        with pytest.raises(DatasetError, match=r"^.*/pipe: not read within 0\.2 s \(a pipe its writer has not "
                                               r"closed\?\)$"):
            read_text(path, 1024, "x", "the file", DatasetError, deadline_s=0.2)
        assert 0.2 <= time.monotonic() - started < 5
        os.write(descriptors[1], b"sent, never closed")
        with pytest.raises(ConfigError, match=r"not read within 0\.2 s"):
            read_at_most(path, 1024, "x", deadline_s=0.2)
    finally:
        for descriptor in descriptors:
            os.close(descriptor)


def test_read_whole_the_deadline_is_read_deadline_s_unless_given(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Without ``deadline_s`` the module's one `READ_DEADLINE_S` holds, read when the file is (so a test may
    shorten it for a command it runs)."""
    monkeypatch.setattr(readlimit, "READ_DEADLINE_S", 0.2)
    path = _fifo(tmp_path)
    descriptors = _silent_writer(path)
    try:
        with pytest.raises(ConfigError, match=r"not read within 0\.2 s"):
            read_json(path, 1024, "x", "the file")
    finally:
        for descriptor in descriptors:
            os.close(descriptor)
