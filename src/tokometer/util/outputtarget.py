"""What an output option's value names, decided once for every option of every command: `output_target`.

- ``-`` is standard output, for every output option (``bench --json -``, ``report -o -``).
- A name of one of this process's open descriptors (``/dev/stdout``, ``/dev/stderr``, ``/dev/fd/N`` as a
  shell's process substitution ``>(cmd)`` gives it, ``/proc/self/fd/N``) is that descriptor, written through
  (standard output's through ``sys.stdout``, so it keeps its place among what else is printed).
- A character device (``/dev/null``, ``/dev/full``, a terminal) or a FIFO is opened and written in place:
  such a node is never replaced or removed.
- A regular file, or a name that does not exist yet, is written atomically (`tokometer.util.atomicfile`);
  through a symbolic link the file it points to is replaced and the link kept.
- A directory, a block device or a socket is refused, in one line naming it (`OutputError`).
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from tokometer.util.errors import OutputError

__all__ = ["STDOUT_NAME", "OutputTarget", "is_standard_output", "output_target"]

STDOUT_NAME = "-"
"""The value of any output option that means standard output."""

_DESCRIPTOR = re.compile(r"/proc/(?:self|thread-self|(?P<pid>\d+)(?:/task/\d+)?)/fd/(?P<fd>\d+)|/dev/fd/(?P<dev>\d+)")
_MAX_HOPS = 40
"""Symbolic links followed at most while looking for a descriptor's name (the kernel's own limit)."""


@dataclass(frozen=True)
class OutputTarget:
    """Where one output goes, and how it is written."""

    shown: str
    """The name as the user gave it (for messages)."""
    kind: Literal["stdout", "descriptor", "in_place", "file"]
    """``stdout``: ``sys.stdout``; ``descriptor``: an open descriptor of this process, written through a
    duplicate; ``in_place``: a special file opened and written as it is; ``file``: a regular file replaced
    atomically."""
    path: Path
    """``file``: the regular file to replace (symbolic links resolved); ``in_place``: the node to open."""
    fd: int = -1
    """``descriptor``: the descriptor written through."""

    @property
    def label(self) -> str:
        """How messages name it: ``standard output`` or the name as given."""
        return "standard output" if self.kind == "stdout" else self.shown


def output_target(path: Path | str) -> OutputTarget:
    """Where writing ``path`` goes (see the module docstring); OutputError for a directory, a block device or
    a socket, and for a name that cannot be looked at."""
    shown = str(path)
    if shown == STDOUT_NAME:
        return OutputTarget(shown, "stdout", Path(STDOUT_NAME))
    name = os.path.expanduser(shown)
    fd = _descriptor_of(name)
    if fd == 1:
        return OutputTarget(shown, "stdout", Path(name))
    if fd is not None:
        return OutputTarget(shown, "descriptor", Path(name), fd)
    try:
        mode = os.stat(name).st_mode
    except (FileNotFoundError, NotADirectoryError):  # a new file (the writer says what is in the way, if anything)
        return OutputTarget(shown, "file", Path(os.path.realpath(name)))
    except OSError as exc:
        raise OutputError(f"cannot write {shown}: {exc.strerror or exc}") from None
    if stat.S_ISREG(mode):
        return OutputTarget(shown, "file", Path(os.path.realpath(name)))
    if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):
        return OutputTarget(shown, "in_place", Path(name))
    raise OutputError(f"cannot write {shown}: {_refused(mode)}; give a file path, '-' for standard output, "
                      "a FIFO or a character device")


def is_standard_output(path: Path | str | None) -> bool:
    """Whether ``path`` (an output option's value; None: not given) writes to standard output."""
    if path is None:
        return False
    try:
        return output_target(path).kind == "stdout"
    except OutputError:
        return False


def _refused(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "it is a directory"
    if stat.S_ISBLK(mode):
        return "it is a block device (a disk is not overwritten with a report)"
    if stat.S_ISSOCK(mode):
        return "it is a socket"
    return "it is not a regular file, a FIFO or a character device"


def _descriptor_of(name: str) -> int | None:
    """The descriptor of this process that ``name`` reaches through ``/proc/.../fd/N`` or ``/dev/fd/N``, or None.

    Links are followed one hop at a time (``/dev/stdout`` -> ``/proc/self/fd/1``): resolving the whole name at
    once would follow the descriptor's own link too, to a pipe's ``pipe:[...]`` that has no file behind it."""
    current = os.path.abspath(name)
    for _ in range(_MAX_HOPS):
        found = _match(current)
        if found is not None:
            return found
        parent = os.path.realpath(os.path.dirname(current))
        current = os.path.join(parent, os.path.basename(current))
        found = _match(current)
        if found is not None or not os.path.islink(current):
            return found
        try:
            current = os.path.normpath(os.path.join(parent, os.readlink(current)))
        except OSError:
            return None
    return None


def _match(name: str) -> int | None:
    match = _DESCRIPTOR.fullmatch(name)
    if match is None or (match["pid"] is not None and int(match["pid"]) != os.getpid()):
        return None
    return int(match["fd"] if match["fd"] is not None else match["dev"])
