"""``tokometer report RUN [RUN ...]``: saved runs as one self-contained HTML page, or a markdown summary.

HTML (``-o report.html``) needs the ``report`` extra (plotly); markdown (``--format md``, printed or written
to ``-o``) does not. Bad input is one line and exit status 2, as for every command."""

from __future__ import annotations

from pathlib import Path

import click

__all__ = ["command"]


@click.command("report")
@click.argument("runs", nargs=-1, required=True, metavar="RUN [RUN ...]")
@click.option("--store", default=None, help="Results store: a SQLAlchemy URL or a SQLite file path.")
@click.option("-o", "--output", type=click.Path(path_type=Path, dir_okay=True), default=None,
              help="Write the report here (required for html; md is printed without it).")
@click.option("--format", "fmt", type=click.Choice(["html", "md"]), default="html", show_default=True,
              help="html: one offline page with interactive charts; md: headline numbers and tables for a "
                   "pull-request comment.")
@click.option("--title", default=None, help="The report's title [default: 'tokometer report: run N'].")
def command(runs: tuple[str, ...], store: str | None, output: Path | None, fmt: str, title: str | None) -> None:
    """Report saved runs (ids, or baseline:NAME as 'runs --tag' names it): one run, or several overlaid.

    \b
      tokometer report 3 -o report.html            # one run
      tokometer report baseline:main 7 -o both.html # two runs overlaid
      tokometer report 7 --format md                # markdown on stdout
    """
    from tokometer.atomicfile import write_atomic
    from tokometer.cli.options import check_output_path
    from tokometer.errors import ConfigError
    from tokometer.report.data import report_data
    from tokometer.store import ResultStore, configured_store_url

    if fmt == "html":
        if output is None:
            raise ConfigError("-o/--output is required for an HTML report: e.g. -o report.html "
                              "(or --format md to print a markdown summary)")
        from tokometer.report.charts import require_plotly

        require_plotly()
    check_output_path(output, "--output", "report.html" if fmt == "html" else "report.md")
    results = ResultStore(configured_store_url(store), read_only=True)
    try:
        loaded = []
        for ref in dict.fromkeys(runs):
            run_id = results.resolve(ref)
            run = results.run(run_id)
            if run is None:
                raise ConfigError(f"no run {run_id} in {results.display_url}: see 'tokometer runs' for the ids")
            loaded.append((run, results.load_records(run_id)))
    finally:
        results.close()
    data = report_data(loaded, title, judge=fmt == "html")
    if fmt == "md":
        from tokometer.report.markdown import render_markdown

        text = render_markdown(data)
        if output is None:
            click.echo(text, nl=False)
            return
    else:
        from tokometer.report.html import render_html

        text = render_html(data)
    assert output is not None
    output = output.expanduser()
    write_atomic(output, text)
    click.echo(f"wrote {output} ({len(text.encode()) / 1e6:.1f} MB): {len(loaded)} run"
               f"{'s' if len(loaded) != 1 else ''}, {sum(len(r.steps) for r, _ in loaded)} steps")
