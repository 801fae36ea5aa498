"""An option that takes a value never takes the next option as it.

Click gives an option that needs a value (``--json PATH``, ``--model NAME``, ``--store URL``) whatever comes next
on the line, an option included: ``estimate --json --explain`` wrote the estimate to a file named
``--explain`` and did not explain, and ``bench --label --seed 7`` labelled the run ``--seed``. `swallowed_option`
finds, for one command's arguments, a value-taking option followed by one of the command's own options, so that
the command line refuses it before anything runs (`tokometer.cli._LazyGroup.resolve_command`, for every command).
A value that only looks like an option (``--seed -1``, ``--label --x``, ``--json=--explain``) is left as given;
so is an option whose value may be left out (``--find-max``, ``--hash-key``: Click does not take an option as it).
"""

from __future__ import annotations

from collections.abc import Sequence

import click

__all__ = ["swallowed_option"]


def swallowed_option(command: click.Command, args: Sequence[str]) -> tuple[str, str] | None:
    """The first (option, next option) where ``command``'s ``option`` needs a value and ``args`` give it one of the
    command's own options instead; None when there is none."""
    names = {"--help", "-h"}
    takes: dict[str, int] = {}  # an option that needs values: how many
    for param in command.params:
        if isinstance(param, click.Option):
            names.update(param.opts + param.secondary_opts)
            if not (param.is_flag or param.count or param._flag_needs_value):  # Click's own test
                takes.update(dict.fromkeys(param.opts, max(1, param.nargs)))
    at = 0
    while at < len(args) and args[at] != "--":
        values = takes.get(args[at], 0)
        for value in args[at + 1: at + 1 + values]:
            if value.startswith("--") and value.split("=", 1)[0] in names:
                return args[at], value
        at += 1 + values
    return None
