"""The command line's lines for a person outside its consoles: a warning, a note, a line of progress.

Such a line often carries what a peer or a file said (a server's error, an engine's last words, a stored label, a
config's value), so each is written through `say`, which writes out every character a terminal would act on but
its line breaks and tabs (`tokometer.util.shown.printable`). What a command writes as a file's content on
standard output (JSON, a digest, a command line to run) is no line for a person and keeps ``click.echo``; a unit
test holds every other ``click.echo`` of the command line to `say`.
"""

from __future__ import annotations

import click

from tokometer.util.shown import printable

__all__ = ["say"]


def say(message: str, *, err: bool = False, nl: bool = True) -> None:
    """Write ``message`` to standard output (or ``err``: error), its non-printable characters but line breaks and
    tabs written out."""
    click.echo(printable(message, keep="\n\t"), err=err, nl=nl)
