"""The one place the command line makes its rich consoles.

On a terminal a console behaves as rich's default: as wide as the terminal,
with colour. When the stream is not a terminal (a pipe, a file, a CI log),
rich would fall back to 80 columns (or ``COLUMNS``) and cut table headers and
figures with "…", losing the numbers exactly where people keep them. There
the console is given a width no table of tokometer reaches, so every table is
printed at its natural width and every cell whole. ``COLUMNS`` is not honoured
then: a narrower width could only cut figures. Colour follows rich's rules
(none unless ``FORCE_COLOR`` asks for it).
"""

from __future__ import annotations

import sys
from typing import TextIO

from rich.console import Console

__all__ = ["PIPE_WIDTH", "make_console"]

PIPE_WIDTH = 10_000
"""Columns of a console writing to a pipe or a file: wider than any table's content."""


def _is_tty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a replaced or closed stream
        return False


def make_console(*, stderr: bool = False) -> Console:
    """A console on stdout (or ``stderr``): terminal-sized on a terminal, full-width elsewhere."""
    stream = sys.stderr if stderr else sys.stdout
    if _is_tty(stream):
        return Console(stderr=stderr, highlight=False)
    return Console(stderr=stderr, highlight=False, width=PIPE_WIDTH)
