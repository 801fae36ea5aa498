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

Nor does a console print a character a terminal would act on (an escape sequence a server put in a model id, a
C1 control, a bidi override: `tokometer.util.shown.printable`), whoever made the text: a string printed or put in a
table is written out as it becomes rich text (`TerminalSafeConsole.render_str`, so its width is measured as
shown), and every segment of every renderable (a `rich.text.Text` made elsewhere) is checked again as it is
rendered (`TerminalSafeConsole.render`). Rich's own escape codes (colour, styles, cursor moves) are not text: they
are added after, and work as before.

When an output option writes standard output (``--json -``, ``-o /dev/stdout``: see
`tokometer.util.outputtarget`), the command's console moves to standard error (`make_console`'s
``beside``), so what lands on standard output is that file alone, whole; `check_outputs` refuses two
outputs sent there at once.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TextIO

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment
from rich.text import Text

from tokometer.util.shown import printable

__all__ = ["PIPE_WIDTH", "TerminalSafeConsole", "check_outputs", "make_console"]

PIPE_WIDTH = 10_000
"""Columns of a console writing to a pipe or a file: wider than any table's content."""


def _is_tty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a replaced or closed stream
        return False


class TerminalSafeConsole(Console):
    """A rich console that writes out every non-printable character of the text it prints but newlines and tabs
    (`tokometer.util.shown.printable`), leaving rich's own control segments and styles as they are."""

    def render_str(self, text: str, **kwargs: Any) -> Text:
        """A string as rich text (`Console.print` and table cells come here), written out first."""
        return super().render_str(printable(text, keep=_KEPT), **kwargs)

    def render(self, renderable: RenderableType, options: ConsoleOptions | None = None) -> Iterable[Segment]:
        """Rich's segments, the text of each (not rich's control codes) written out."""
        for segment in super().render(renderable, options):
            text = segment.text
            if segment.control or text.isprintable():
                yield segment
            else:
                yield Segment(printable(text, keep=_KEPT), segment.style, segment.control)


_KEPT = "\n\t"
"""What a console prints as it is of the non-printable characters: line breaks and tabs (rich lays them out)."""


def make_console(*, stderr: bool = False, beside: tuple[Path | str | None, ...] = ()) -> Console:
    """A console on stdout (or ``stderr``, or when one of the output options' values ``beside`` writes standard
    output): terminal-sized on a terminal, full-width elsewhere; strings printed as they are."""
    from tokometer.util.outputtarget import is_standard_output

    stderr = stderr or any(is_standard_output(path) for path in beside)
    width = None if _is_tty(sys.stderr if stderr else sys.stdout) else PIPE_WIDTH
    return TerminalSafeConsole(stderr=stderr, width=width, markup=False, emoji=False, highlight=False)


def check_outputs(outputs: Mapping[str, Path | str | None]) -> None:
    """Refuse two output options (option -> its value) that both write standard output: they would interleave."""
    from tokometer.util.errors import ConfigError
    from tokometer.util.outputtarget import is_standard_output

    both = [option for option, path in outputs.items() if is_standard_output(path)]
    if len(both) > 1:
        raise ConfigError(f"{' and '.join(both)} both write standard output: send one of them to a file")
