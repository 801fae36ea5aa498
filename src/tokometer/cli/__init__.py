"""The ``tokometer`` command line: a thin layer over library calls.

Subcommands live in their own modules and are imported only when used, so
``tokometer --help`` is instant. Every error reaches the user as one line on
stderr with exit status 2 (its control characters written out and its length bounded:
`tokometer.util.shown.one_line`); ``--debug`` (anywhere on the line) shows the
traceback instead.
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import os
import sys
from typing import Any

import click

from tokometer import __version__
from tokometer.util.errors import TokometerError
from tokometer.util.shown import one_line

__all__ = ["cli", "main"]

_COMMANDS: dict[str, tuple[str, str]] = {
    "bench": ("tokometer.cli.bench", "Benchmark an inference endpoint (or the embedded engine)."),
    "compare": ("tokometer.cli.compare", "Compare two saved runs: a noise-aware regression gate (exit 1)."),
    "count": ("tokometer.cli.count", "Count tokens with the model's own tokenizer; budgets and cost."),
    "doctor": ("tokometer.cli.doctor", "Why is a server slow or failing: checks, each a finding with a fix."),
    "import": ("tokometer.cli.imports", "Import vllm bench serve, GuideLLM and AIPerf results as runs, recomputed."),
    "gateway": ("tokometer.cli.gateway", "OpenAI-compatible gateway: fallback, cache, budgets, keys, metrics."),
    "estimate": ("tokometer.cli.estimate", "Roofline limits of a deployment, and the efficiency of a measured run."),
    "quality": ("tokometer.cli.quality", "Same prompts to two endpoints: agreement, accuracy and speed, a verdict."),
    "report": ("tokometer.cli.report", "Saved runs as one offline HTML page of charts, or a markdown summary."),
    "runs": ("tokometer.cli.runs", "List saved benchmark runs."),
    "sim": ("tokometer.cli.sim", "A simulated inference server: scripted timing or a modelled GPU deployment."),
    "serve": ("tokometer.cli.serve", "Start an inference engine and wait until it answers."),
    "top": ("tokometer.cli.top", "Live view of a running server: requests, KV cache, tok/s, latencies, GPUs."),
    "tune": ("tokometer.cli.tune", "Tune an engine: a baseline, then one setting changed at a time, each measured."),
}


class _LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(_COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in _COMMANDS:
            return None
        module = importlib.import_module(_COMMANDS[cmd_name][0])
        command: click.Command = module.command
        return command

    def resolve_command(self, ctx: click.Context,
                        args: list[str]) -> tuple[str | None, click.Command | None, list[str]]:
        """The command, once its arguments give no value-taking option the next option as its value
        (`tokometer.cli.argcheck`)."""
        from tokometer.cli.argcheck import swallowed_option

        name, command, rest = super().resolve_command(ctx, args)
        if command is not None and (found := swallowed_option(command, rest)) is not None:
            option, took = found
            raise click.UsageError(f"{option} needs a value and would take the option {took} as it: give {option} "
                                   f"its value before {took}, or write {option}={took} if that is its value "
                                   f"(see 'tokometer {name} --help')")
        return name, command, rest

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, help_text) for name, (_, help_text) in sorted(_COMMANDS.items())]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="tokometer")
def cli() -> None:
    """tokometer: measure, explain and serve LLM inference speed."""


def _replace_what_cannot_be_encoded() -> None:
    """Standard output and error in an encoding narrower than Unicode's (``PYTHONIOENCODING=ascii``, a latin-1
    locale) write a character they cannot encode (the tables' →, µ, ±, ×; a model's name) as ``?``, so that
    the output is written whole rather than broken off by a traceback midway."""
    for stream in (sys.stdout, sys.stderr):
        encoding = (getattr(stream, "encoding", None) or "").lower().replace("_", "-")
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None and not encoding.startswith("utf"):
            reconfigure(errors="replace")


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the CLI, turning every error into one line and exit status 2."""
    _replace_what_cannot_be_encoded()
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    if debug:
        args = [a for a in args if a != "--debug"]
    prog = "tokometer"
    try:
        result: Any = cli.main(args, prog_name=prog, standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.UsageError as exc:
        if debug:
            raise
        hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx else ""
        print(f"{prog}: error: {one_line(exc.format_message())}{hint}", file=sys.stderr)
        sys.exit(2)
    except TokometerError as exc:
        if debug:
            raise
        print(f"{prog}: error: {one_line(str(exc))}", file=sys.stderr)
        sys.exit(exc.exit_status)
    except click.Abort:
        print(f"{prog}: interrupted", file=sys.stderr)
        sys.exit(130)
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        sys.exit(130)
    except click.ClickException as exc:
        if debug:
            raise
        print(f"{prog}: error: {one_line(exc.format_message())}", file=sys.stderr)
        sys.exit(2)
    except OSError as exc:
        if debug:
            raise
        if exc.filename is None and exc.errno in _OUTPUT_ERRNOS:  # files are named (tokometer.util.atomicfile)
            _stdout_lost(prog, exc)
        print(f"{prog}: error: {one_line(str(exc))} (run with --debug for details)", file=sys.stderr)
        sys.exit(2)
    if _stdout_fails():  # what is still buffered cannot be written (a full disk behind '> file', /dev/full)
        _stdout_lost(prog, None)
    sys.exit(result if isinstance(result, int) else 0)


_OUTPUT_ERRNOS = frozenset({errno.ENOSPC, errno.EFBIG, errno.EDQUOT, errno.EIO, errno.EPIPE})
"""Write errors without a file name: every file tokometer writes is named, so these are standard output's."""


def _stdout_fails() -> bool:
    try:
        sys.stdout.flush()
    except OSError:
        return True
    return False


def _stdout_lost(prog: str, exc: OSError | None) -> None:
    """Standard output cannot take what was written to it: one line naming it, exit 2 (and no second
    complaint when the interpreter flushes it on the way out)."""
    try:
        sys.stdout.flush()
    except OSError as again:
        exc = again
    why = (exc.strerror or str(exc)) if exc is not None else "the output could not be written"
    print(f"{prog}: error: cannot write to standard output: {why}; what was shown is incomplete", file=sys.stderr)
    with contextlib.suppress(OSError):
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - replaces the broken stream until exit
    sys.exit(2)
