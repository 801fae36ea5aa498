"""Reading a whole file into memory, but never more than a stated size: one reader for every file a user
hands over whole (a ``bench --json`` result, another tool's results), so a huge or endless file (a FIFO,
``/dev/zero``) costs at most the limit and a one-line error, not the machine's memory, and a pipe whose writer
never closes it at most `READ_DEADLINE_S`, not a wait for ever."""

from __future__ import annotations

import json
import os
import select
import stat
import time
import tomllib
from collections.abc import Callable, Generator, Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO, Final

from tokometer.util.errors import ConfigError, TokometerError

__all__ = ["READ_DEADLINE_S", "UTF8_BOM", "iter_at_most", "open_input", "read_at_most", "read_json", "read_text",
           "read_toml", "read_yaml", "split_lines", "without_bom"]

READ_DEADLINE_S: Final = 60.0
"""How long reading a whole file that is not a regular one (a FIFO, a pipe such as ``<(sops -d g.toml)``) may
take, from its opening to its writer's close. What one command writes for another to read whole (a decrypted
config, a generated file) comes in well under a second, so a minute is ample; without a deadline a writer that
holds the pipe open and never writes, or never closes it, keeps the command waiting for ever."""

UTF8_BOM: Final = b"\xef\xbb\xbf"
"""The byte-order mark some editors and spreadsheets write at the start of a UTF-8 text file (Notepad, Excel's
"CSV UTF-8"): not part of the text, dropped by every reader of a user's text file here."""


def without_bom(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """``chunks`` (a text file's bytes, as read) without a UTF-8 byte-order mark at their very start."""
    head = b""
    iterator = iter(chunks)
    for block in iterator:
        head += block
        if len(head) >= len(UTF8_BOM) or not UTF8_BOM.startswith(head):
            break
    if head:
        yield head[len(UTF8_BOM):] if head.startswith(UTF8_BOM) else head
    yield from iterator


def open_input(path: Path) -> BinaryIO:
    """``path`` opened for reading without waiting for a writer: a FIFO nobody writes to reads as empty
    (opening one blocks until a writer comes, which may be never); once open, reads block as usual."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_at_most(path: Path, limit: int, beyond: str, error: type[TokometerError] = ConfigError, *,
                 deadline_s: float | None = None) -> bytes:
    """``path``'s bytes, at most ``limit`` of them, read by `iter_at_most`; one that is not a regular file (a pipe)
    must have ended ``deadline_s`` seconds after its opening (None: `READ_DEADLINE_S`). A file that cannot be
    read, has more or has not ended in time raises ``error`` naming it: ``<path> is larger than N MiB: <beyond>``."""
    within = READ_DEADLINE_S if deadline_s is None else deadline_s
    # a chunk of the whole limit: a regular file in one read, nothing to copy to join
    return b"".join(iter_at_most(path, limit, beyond, error, chunk=limit + 1, deadline_s=within))


def read_text(path: Path, limit: int, beyond: str, where: str, error: type[TokometerError] = ConfigError, *,
              deadline_s: float | None = None) -> str:
    """A text file the user hands over, read with `read_at_most` (within its ``deadline_s``), without a byte-order
    mark at its start; not UTF-8 is one ``error`` starting with ``where`` (e.g. ``eval set FILE``) and naming the
    first bad byte."""
    raw = read_at_most(path, limit, beyond, error, deadline_s=deadline_s)
    try:
        return raw.decode("utf-8-sig")  # a byte-order mark at the start is not text (`UTF8_BOM`)
    except UnicodeDecodeError as exc:
        raise error(f"{where}: not UTF-8 text (byte {exc.start})") from None


def read_toml(path: Path, limit: int, beyond: str, where: str) -> dict[str, Any]:
    """A TOML file the user hands over, read with `read_text`; not UTF-8 or not TOML (`_parsed`) is one
    `ConfigError` starting with ``where`` (e.g. ``--mix FILE``)."""
    parsed: dict[str, Any] = _parsed(tomllib.loads, read_text(path, limit, beyond, where), "TOML", (ValueError,),
                                     where, ConfigError)
    return parsed


def read_json(path: Path, limit: int, beyond: str, where: str, error: type[TokometerError] = ConfigError) -> Any:
    """A JSON file read whole with `read_text`; not UTF-8 or not JSON (`_parsed`) is one ``error`` starting with
    ``where``."""
    return _parsed(json.loads, read_text(path, limit, beyond, where, error), "JSON", (ValueError,), where, error)


def read_yaml(path: Path, limit: int, beyond: str, where: str) -> Any:
    """A YAML file of settings the user hands over, read with `read_text` and loaded by
    `tokometer.util.yamlfile` (no aliases); not UTF-8, not YAML (`_parsed`) or holding an alias is one
    `ConfigError` starting with ``where``."""
    from tokometer.util.yamlfile import YAML_ERRORS, load_settings

    text = read_text(path, limit, beyond, where)
    return _parsed(lambda t: load_settings(t, where), text, "YAML", YAML_ERRORS, where, ConfigError)


def _parsed(parse: Callable[[str], Any], text: str, kind: str, invalid: tuple[type[Exception], ...], where: str,
            error: type[TokometerError]) -> Any:
    """``parse(text)``; a failure one ``error`` starting with ``where``: the parser's words for an ``invalid``
    one, and in words where Python's recursive parsers (json, tomllib, yaml) run out of stack or memory on the
    nesting a small file can hold (100,000 ``[``), which would otherwise be a traceback."""
    try:
        return parse(text)
    except RecursionError:
        raise error(f"{where}: not valid {kind}: nested too deep") from None
    except MemoryError:
        raise error(f"{where}: {kind} too large to hold in memory") from None
    except invalid as exc:
        raise error(f"{where}: not valid {kind}: {exc}") from None


def iter_at_most(path: Path, limit: int, beyond: str, error: type[TokometerError] = ConfigError, *,
                 chunk: int = 1 << 20, what: str = "", deadline_s: float | None = None) -> Generator[bytes]:
    """``path``'s bytes, ``chunk`` at a time, for a reader that parses as it goes (memory: one chunk, not the
    file); ``error`` naming the file (``what`` it is, e.g. ``dataset``) when it cannot be read or holds more than
    ``limit`` bytes (a FIFO or ``/dev/zero`` too: nothing is trusted to end). With ``deadline_s``, a file that is
    not a regular one (a pipe that trickles, or whose writer never writes) is read only until that many seconds
    after the start: each read takes what has come, waiting at most until then."""
    named = f"{what} {path}" if what else str(path)
    try:
        with open_input(path) as handle:
            total = 0
            status = os.fstat(handle.fileno())
            if status.st_size > limit:  # a regular file says its size: refused before reading
                raise error(f"{named} is larger than {limit // 2**20} MiB: {beyond}")
            read: Callable[[], bytes] = lambda: handle.read(chunk)  # noqa: E731
            if deadline_s is not None and not stat.S_ISREG(status.st_mode):
                late = f"{named}: not read within {deadline_s:g} s (a pipe its writer has not closed?)"
                read = _timed_read(handle.fileno(), chunk, time.monotonic() + deadline_s, lambda: error(late))
            while block := read():
                total += len(block)
                if total > limit:
                    raise error(f"{named} is larger than {limit // 2**20} MiB: {beyond}")
                yield block
    except OSError as exc:
        raise error(f"cannot read {named}: {exc.strerror or exc}") from None


def _timed_read(fd: int, chunk: int, deadline: float, late: Callable[[], TokometerError]) -> Callable[[], bytes]:
    """One read of what has come on ``fd`` (at most ``chunk`` bytes; empty at its end, as when no writer holds a
    pipe open), waiting no later than ``deadline``."""
    os.set_blocking(fd, False)

    def read() -> bytes:
        while True:
            try:
                return os.read(fd, chunk)
            except BlockingIOError:  # a writer holds it open and has sent nothing yet
                left = deadline - time.monotonic()
                if left <= 0:
                    raise late() from None
                select.select([fd], [], [], left)

    return read


def split_lines(chunks: Iterable[bytes], line_limit: int, too_long: Callable[[int], Exception]) -> Iterator[
        tuple[int, bytes]]:
    """``(line number, line)`` for every line of ``chunks`` (without its newline), one at a time: memory is one
    chunk and one line. A line longer than ``line_limit`` bytes raises ``too_long(its number)`` as soon as it
    is seen to be, before the rest of it is read. Only the new bytes are searched for the next newline. A UTF-8
    byte-order mark at the very start is not part of the first line (`without_bom`)."""
    pending = b""
    number = 0
    for block in without_bom(chunks):
        start, searched = 0, len(pending)
        pending += block
        while (end := pending.find(b"\n", searched)) >= 0:
            number += 1
            if end - start > line_limit:
                raise too_long(number)
            yield number, pending[start:end]
            start = searched = end + 1
        pending = pending[start:]
        if len(pending) > line_limit:
            raise too_long(number + 1)
    if pending:
        yield number + 1, pending
