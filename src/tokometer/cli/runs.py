"""``tokometer runs``: the saved benchmark runs, newest first; ``--id N``: one run as the ``tokometer.bench/2``
document ``bench --json`` wrote for it (`tokometer.report.json_out.run_json` of the run the store reads back)."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

import click

from tokometer.cli.options import RUN_ID
from tokometer.cli.say import say
from tokometer.util.jsontext import dumps
from tokometer.util.shown import clipped

if TYPE_CHECKING:
    from tokometer.store.runs import StoredStep

__all__ = ["command"]

_NONE_YET = "No runs saved yet in {}. Run 'tokometer bench' first."


def _headline(step: StoredStep) -> str:
    load = step.saved_load or {}
    what = f"c={load['concurrency']}" if "concurrency" in load else f"{load.get('rate')}/s"
    summary = step.summary
    if summary is None:
        return f"{what}: -"
    failed = summary.requests_failed
    return f"{what}: {summary.output_throughput_tok_s:,.1f} tok/s" + (f" ({failed} failed)" if failed else "")


class _RunsCommand(click.Command):
    """``runs 5`` is a likely slip for ``runs --id 5``: say so instead of "unexpected extra argument"."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.allow_extra_args = True  # collected in ctx.args, then judged here
        rest = super().parse_args(ctx, args)
        if ctx.params.get("tag") and ctx.params.get("run_id") is None and len(ctx.args) == 1 \
                and ctx.args[0].isdigit():
            ctx.params["run_id"] = int(ctx.args.pop())  # runs --tag NAME ID
        if ctx.args:
            extra = " ".join(ctx.args)
            hint = (f"; to show run {ctx.args[0]}, write 'tokometer runs --id {ctx.args[0]}'"
                    if len(ctx.args) == 1 and ctx.args[0].isdigit() else "")
            raise click.UsageError(f"runs takes no arguments (got {extra!r}){hint}", ctx)
        return rest


@click.command("runs", cls=_RunsCommand)
@click.option("--limit", type=click.IntRange(1, 1_000_000), default=20, show_default=True,
              help="List at most this many runs, newest first.")
@click.option("--id", "run_id", type=RUN_ID, default=None,
              help="Show one run in full: the JSON document bench --json wrote for it (tokometer.bench/2); the "
              "command line of the engine it measured, when known, on stderr.")
@click.option("--store", default=None, help="Results store: a SQLAlchemy URL or a SQLite file path.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
@click.option("--tag", default=None, metavar="NAME",
              help="Name the run given by --id (or as the argument) a baseline: 'compare baseline:NAME ID' then "
                   "compares against it. Retagging moves the name.")
def command(limit: int, run_id: int | None, store: str | None, as_json: bool, tag: str | None) -> None:
    """List saved runs (newest first), show one with --id, or name one a baseline with --tag NAME --id ID."""
    from rich.table import Table

    from tokometer.cli.output import make_console
    from tokometer.report.headline import startup_line
    from tokometer.report.json_out import run_json
    from tokometer.store import ResultStore, configured_store_url, default_store_url
    from tokometer.store.database import display_url, store_exists
    from tokometer.util.errors import ConfigError

    url = configured_store_url(store)
    if tag is not None:
        if run_id is None:
            raise ConfigError("--tag NAME needs the run: 'tokometer runs --tag NAME --id ID'")
        writer = ResultStore(url)
        try:
            writer.tag(tag, run_id)
        finally:
            writer.close()
        say(f"run {run_id} is baseline {tag!r}: 'tokometer compare baseline:{tag} NEW' compares against it")
        return
    if url is None and not store_exists(default_store_url()):
        make_console().print(_NONE_YET.format(display_url(default_store_url())))  # nothing to open: no error
        return
    results = ResultStore(url, read_only=True)
    try:
        if run_id is not None:
            run = results.run(run_id)
            if run is None:
                raise ConfigError(f"no run {run_id} in {results.display_url}: see 'tokometer runs' for the ids")
            click.echo(dumps(run_json(run), indent=2))
            if run.engine is not None and run.engine.argv:  # beside the document, not in it: stdout stays JSON
                say(f"engine command line: {shlex.join(run.engine.argv)}", err=True)
            if (startup := startup_line(run.engine)) is not None:
                say(startup.replace("Engine ", "engine start-up: ", 1), err=True)
            return
        listed = results.newest(limit)
        named: dict[int, list[str]] = {}
        for name, tagged in results.tags().items():
            named.setdefault(tagged, []).append(name)
    finally:
        results.close()
    if as_json:
        click.echo(dumps([run.to_json() for run in listed], indent=2))
        return
    console = make_console()
    if not listed:
        console.print(_NONE_YET.format(results.display_url))
        return
    table = Table(show_edge=False)
    for column in ("id", "started (UTC)", "status", "target", "model", "steps", "label", "baseline"):
        table.add_column(column)
    for run in listed:
        steps = "; ".join(_headline(s) for s in run.steps)
        table.add_row(str(run.id), run.started_at[:19].replace("T", " "), run.status, clipped(run.target),
                      clipped(run.model), steps, clipped(run.label or ""), ", ".join(named.get(run.id, [])))
    console.print(table)
