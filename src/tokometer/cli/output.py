"""The one place the command line makes its rich consoles.

On a terminal a console behaves as rich's default: as wide as the terminal,
with colour. When the stream is not a terminal (a pipe, a file, a CI log),
rich would fall back to 80 columns (or ``COLUMNS``) and cut table headers and
figures with "…", losing the numbers exactly where people keep them. There
the console is given a width no table of tokometer reaches, so every table is
printed at its natural width and every cell whole. ``COLUMNS`` is not honoured
then: a narrower width could only cut figures. Colour follows rich's rules
(none unless ``FORCE_COLOR`` asks for it).

A console prints text as it is: no rich markup, emoji codes or highlighting is read in it, so a path, a model
name, a label or a server's message with brackets (``m[/x]``, ``E[max]``) is printed verbatim, never taken for
a style or a broken tag. What is styled on purpose says so through rich's own API (``style=``, `rich.text.Text`),
not through markup in a string.

When an output option writes standard output (``--json -``, ``-o /dev/stdout``: see
`tokometer.util.outputtarget`), the command's console moves to standard error (`make_console`'s
``beside``), so what lands on standard output is that file alone, whole; `check_outputs` refuses two
outputs sent there at once.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from rich.console import Console

__all__ = ["PIPE_WIDTH", "check_outputs", "make_console"]

PIPE_WIDTH = 10_000
"""Columns of a console writing to a pipe or a file: wider than any table's content."""


def _is_tty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a replaced or closed stream
        return False


def make_console(*, stderr: bool = False, beside: tuple[Path | str | None, ...] = ()) -> Console:
    """A console on stdout (or ``stderr``, or when one of the output options' values ``beside`` writes standard
    output): terminal-sized on a terminal, full-width elsewhere; strings printed as they are."""
    from tokometer.util.outputtarget import is_standard_output

    stderr = stderr or any(is_standard_output(path) for path in beside)
    width = None if _is_tty(sys.stderr if stderr else sys.stdout) else PIPE_WIDTH
    return Console(stderr=stderr, width=width, markup=False, emoji=False, highlight=False)


def check_outputs(outputs: Mapping[str, Path | str | None]) -> None:
    """Refuse two output options (option -> its value) that both write standard output: they would interleave."""
    from tokometer.util.errors import ConfigError
    from tokometer.util.outputtarget import is_standard_output

    both = [option for option, path in outputs.items() if is_standard_output(path)]
    if len(both) > 1:
        raise ConfigError(f"{' and '.join(both)} both write standard output: send one of them to a file")
