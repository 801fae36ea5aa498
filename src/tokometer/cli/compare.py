"""``tokometer compare BASE NEW``: a noise-aware regression gate between two saved runs.

Exit status 1 when any metric regressed, 0 otherwise, 2 for bad input (one line, as every command)."""

from __future__ import annotations

import click

from tokometer.cli.say import say
from tokometer.util.jsontext import dumps

__all__ = ["command"]


@click.command("compare")
@click.argument("base")
@click.argument("new")
@click.option("--store", default=None, help="Results store: a SQLAlchemy URL or a SQLite file path.")
@click.option("--threshold", default=None, metavar="NAME=PCT,...",
              help="Smallest change that counts, per metric, e.g. ttft_p50=5%,tpot_p50=3% [default: 5% for "
                   "p50s and throughput, 10% for p99s, 1 point for error_rate].")
@click.option("--force", is_flag=True, help="Compare runs that are not alike (model, API, prompts, loads, "
                                            "prompt-cache hit rates) anyway.")
@click.option("--format", "fmt", type=click.Choice(["table", "md"]), default="table", show_default=True,
              help="md: a markdown summary for a pull-request comment.")
@click.option("--window", type=click.Choice(["step", "steady"]), default="step", show_default=True,
              help="steady: compare each load over its steady state (the first wave and the drain left out), as "
                   "bench saved it.")
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
def command(base: str, new: str, store: str | None, threshold: str | None, force: bool, fmt: str,
            window: str, as_json: bool) -> int:
    """Compare run NEW against run BASE (ids, or baseline:NAME as 'runs --tag' names it); exit status 1 on a
    regression."""
    from tokometer.cli.output import make_console
    from tokometer.compare.gate import compare_runs, parse_thresholds
    from tokometer.report.compare import render_compare, render_markdown
    from tokometer.store import ResultStore, configured_store_url
    from tokometer.util.errors import ConfigError

    thresholds = parse_thresholds(threshold)
    results = ResultStore(configured_store_url(store), read_only=True)
    try:
        runs = []
        base_id, new_id = results.resolve(base), results.resolve(new)
        for run_id in (base_id, new_id):
            run = results.run(run_id)
            if run is None:
                raise ConfigError(f"no run {run_id} in {results.display_url}: see 'tokometer runs' for the ids")
            runs.append(run)
        base_run, new_run = runs
        base_records, new_records = results.load_records(base_id), results.load_records(new_id)
    finally:
        results.close()
    comparison = compare_runs(base_run, new_run, base_records, new_records, thresholds, force=force,
                              window="steady" if window == "steady" else "step")
    if as_json:
        click.echo(dumps(comparison.to_json(), indent=2))
    elif fmt == "md":
        say(render_markdown(comparison), nl=False)
    else:
        render_compare(make_console(), comparison)
    return 1 if comparison.regressions else 0
