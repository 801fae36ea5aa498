"""``tokometer runs``: the saved benchmark runs, newest first."""

from __future__ import annotations

import json
from typing import Any

import click

__all__ = ["command"]


def _headline(step: dict[str, Any]) -> str:
    load = step.get("load") or {}
    what = f"c={load['concurrency']}" if "concurrency" in load else f"{load.get('rate')}/s"
    summary = step.get("summary") or {}
    tps = summary.get("output_throughput_tok_s")
    failed = summary.get("requests_failed")
    text = f"{what}: {tps:,.1f} tok/s" if isinstance(tps, (int, float)) else f"{what}: -"
    return text + (f" ({failed} failed)" if failed else "")


@click.command("runs")
@click.option("--limit", type=int, default=20, show_default=True)
@click.option("--id", "run_id", type=int, default=None, help="Show one run's steps in full (as JSON).")
@click.option("--store", default=None, help="Results store: a SQLAlchemy URL or a SQLite file path.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def command(limit: int, run_id: int | None, store: str | None, as_json: bool) -> None:
    """List saved runs (newest first), or show one with --id."""
    from rich.console import Console
    from rich.table import Table

    from tokometer.cli.bench import _store_url
    from tokometer.errors import ConfigError
    from tokometer.store import ResultStore

    results = ResultStore(_store_url(store))
    try:
        if run_id is not None:
            run = results.get_run(run_id)
            if run is None:
                raise ConfigError(f"no run {run_id} in {results.url}: see 'tokometer runs' for the ids")
            click.echo(json.dumps(run, indent=2, default=str))
            return
        rows = results.list_runs(limit)
    finally:
        results.close()
    if as_json:
        click.echo(json.dumps(rows, indent=2, default=str))
        return
    console = Console(highlight=False)
    if not rows:
        console.print(f"No runs saved yet in {results.url}. Run 'tokometer bench' first.")
        return
    table = Table(show_edge=False)
    for column in ("id", "started (UTC)", "status", "target", "model", "steps", "label"):
        table.add_column(column)
    for row in rows:
        steps = "; ".join(_headline(s) for s in row["steps"])
        table.add_row(str(row["id"]), str(row["started_at"])[:19].replace("T", " "), row["status"], row["target"],
                      str(row["model"])[-40:], steps, row.get("label") or "")
    console.print(table)
