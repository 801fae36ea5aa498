"""``tokometer report RUN [RUN ...]``: saved runs as one self-contained HTML page, or a markdown summary;
one run as CSV or as ``bench --json``'s JSON.

HTML (``-o report.html``) needs the ``report`` extra (plotly); markdown, CSV and JSON (printed, or written to
``-o``) do not. For CSV and JSON the run may also be a file ``bench --json`` wrote. Bad input is one line and
exit status 2, as for every command."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from tokometer.cli.say import say
from tokometer.util.jsontext import dumps

if TYPE_CHECKING:
    from tokometer.store.runs import StoredRun
    from tokometer.tune.outcome import TuneRecord

__all__ = ["MAX_RESULT_BYTES", "command"]

MAX_RESULT_BYTES = 256 * 1024 * 1024
"""The largest ``bench --json`` file read back."""


def _bench_file(path: Path) -> StoredRun:
    """The run in a ``bench --json`` file; a one-line error for one that cannot be read as such."""
    from tokometer.imports.jsonstream import ImportStream
    from tokometer.store.runs import BENCH_SCHEMA, StoredRun
    from tokometer.store.typecheck import problem
    from tokometer.util.errors import ConfigError

    try:  # parsed as read, within the import reader's memory budget (its size limit is MAX_RESULT_BYTES)
        data = ImportStream(path, refusal="not a bench --json result", limit=MAX_RESULT_BYTES).document()
        run = StoredRun.from_bench_json(data)
    except (ValueError, RecursionError) as exc:
        raise ConfigError(f"{path}: {exc} (bench --json writes a {BENCH_SCHEMA} result)") from None
    except ConfigError as exc:
        raise ConfigError(f"{exc} (bench --json writes a {BENCH_SCHEMA} result)") from None
    if (found := problem(run, StoredRun, "run")) is not None:  # the store's check of a run read back
        raise ConfigError(f"{path}: {found.removeprefix('run.')} (bench --json writes a {BENCH_SCHEMA} result)")
    return run


@click.command("report")
@click.argument("runs", nargs=-1, required=False, metavar="RUN [RUN ...]")
@click.option("--store", default=None, help="Results store: a SQLAlchemy URL or a SQLite file path.")
@click.option("-o", "--output", type=click.Path(path_type=Path, dir_okay=True), default=None,
              help="Write the report here (required for html; md is printed without it).")
@click.option("--format", "fmt", type=click.Choice(["html", "md", "csv", "json", "llmd", "llmd-0.1"]),
              default="html", show_default=True,
              help="html: one offline page with interactive charts; md: headline numbers and tables for a "
                   "pull-request comment; csv: one row per step, as bench --csv; json: the run as bench --json "
                   "writes it; llmd: llm-d's Benchmark Report v0.2, one per step (llmd-0.1: its v0.1) (csv, json "
                   "and llmd: one run, an id or a bench --json file).")
@click.option("--title", default=None, help="The report's title [default: 'tokometer report: run N'].")
@click.option("--tune", "tune", default=None, metavar="NAME",
              help="Report a tune saved in the store (html or md): each variant against its baseline.")
@click.option("--tune-json", "tune_json", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Report the tune in a 'tune --json' file (its runs are read from the store).")
def command(runs: tuple[str, ...], store: str | None, output: Path | None, fmt: str, title: str | None,
            tune: str | None, tune_json: Path | None) -> None:
    """Report saved runs (ids, or baseline:NAME as 'runs --tag' names it): one run, or several overlaid.

    \b
      tokometer report 3 -o report.html            # one run
      tokometer report baseline:main 7 -o both.html # two runs overlaid
      tokometer report 7 --format md                # markdown on stdout
      tokometer report 7 --format csv -o run7.csv   # one row per step
      tokometer report result.json --format csv     # a bench --json file
      tokometer report 7 --format llmd -o run7.json # llm-d's Benchmark Report v0.2 (llmd-0.1: v0.1)
      tokometer report --tune NAME --format md      # a tune: each variant against its baseline
    """
    from tokometer.cli.options import check_output_path
    from tokometer.report.data import report_data
    from tokometer.store import ResultStore, configured_store_url
    from tokometer.util.atomicfile import write_atomic
    from tokometer.util.errors import ConfigError
    from tokometer.util.outputtarget import is_standard_output

    if not runs and tune is None and tune_json is None:
        raise ConfigError("give the runs to report (ids, or baseline:NAME), or --tune NAME")
    _html_needs(fmt, output, charts=tune is None and tune_json is None)
    check_output_path(output, "--output", "report.html" if fmt == "html" else f"report.{fmt}")
    if _tune_report(runs, store, output, fmt, title, tune, tune_json):
        return
    if fmt in ("csv", "json", "llmd", "llmd-0.1"):
        _write_table(runs, store, output, fmt)
        return
    if files := [ref for ref in runs if ref.endswith(".json")]:
        raise ConfigError(f"{files[0]}: a bench --json file is reported with --format csv or json (the HTML "
                          "and markdown reports read the run's requests from the store)")
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
            say(text, nl=False)
            return
    else:
        from tokometer.report.html import render_html

        text = render_html(data)
    assert output is not None
    write_atomic(output, text)  # a regular file atomically; '-', a FIFO or a device in place
    say(f"wrote {output} ({len(text.encode()) / 1e6:.1f} MB): {len(loaded)} run"
        f"{'s' if len(loaded) != 1 else ''}, {sum(len(r.steps) for r, _ in loaded)} steps",
        err=is_standard_output(output))


def _html_needs(fmt: str, output: Path | None, *, charts: bool) -> None:
    """An HTML report (``fmt`` html) needs ``-o``, and plotly for its charts (a tune's page has none)."""
    from tokometer.util.errors import ConfigError

    if fmt != "html":
        return
    if output is None:
        raise ConfigError("-o/--output is required for an HTML report: e.g. -o report.html "
                          "(or --format md to print a markdown summary)")
    if charts:
        from tokometer.report.charts import require_plotly

        require_plotly()


def _write_table(runs: tuple[str, ...], store: str | None, output: Path | None, fmt: str) -> None:
    """``--format csv|json``: one run, by id from the store or from a ``bench --json`` file."""
    from tokometer.store import ResultStore, configured_store_url
    from tokometer.util.atomicfile import write_atomic
    from tokometer.util.errors import ConfigError
    from tokometer.util.outputtarget import is_standard_output

    if len(runs) != 1:
        raise ConfigError(f"--format {fmt} reports one run; {len(runs)} were given (one command per run)")
    ref = runs[0]
    if ref.endswith(".json") or Path(ref).expanduser().is_file():
        run = _bench_file(Path(ref).expanduser())
    else:
        results = ResultStore(configured_store_url(store), read_only=True)
        try:
            run_id = results.resolve(ref)
            found = results.run(run_id)
            if found is None:
                raise ConfigError(f"no run {run_id} in {results.display_url}: see 'tokometer runs' for the ids")
            run = found
        finally:
            results.close()
    if fmt == "csv":
        from tokometer.report.csv_out import csv_text

        text = csv_text(run)
    elif fmt == "llmd":
        from tokometer.report.llmd_v02 import llmd_v02_reports

        text = dumps(llmd_v02_reports(run), indent=2) + "\n"
    elif fmt == "llmd-0.1":
        from tokometer.report.llmd import llmd_reports

        text = dumps(llmd_reports(run), indent=2) + "\n"
    else:
        from tokometer.report.json_out import run_json

        text = dumps(run_json(run), indent=2) + "\n"
    if output is None:
        click.echo(text, nl=False)
        return
    write_atomic(output, text)
    say(f"wrote {output}: {len(run.steps)} steps", err=is_standard_output(output))


def _tune_file(path: Path) -> TuneRecord:
    """The tune in a ``tune --json`` file, checked as the store checks a tune it reads; one line if it is not."""
    from tokometer.imports.jsonstream import ImportStream
    from tokometer.tune.outcome import TUNE_SCHEMA
    from tokometer.tune.saved import read_tune
    from tokometer.util.errors import ConfigError

    fix = f"(tune --json writes a {TUNE_SCHEMA} document)"
    try:
        data = ImportStream(path, refusal="not a tune --json result", limit=MAX_RESULT_BYTES).document()
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        return read_tune(data)
    except ValueError as exc:
        raise ConfigError(f"{path}: {exc} {fix}") from None
    except ConfigError as exc:
        raise ConfigError(f"{exc} {fix}") from None


def _tune_report(runs: tuple[str, ...], store: str | None, output: Path | None, fmt: str, title: str | None,
                 name: str | None, path: Path | None) -> bool:
    """``--tune NAME`` / ``--tune-json FILE``: the tune's answer as markdown or HTML, its runs from the store;
    False when neither is given (then runs must be)."""
    from tokometer.report.tune import tune_html, tune_markdown
    from tokometer.store import ResultStore, configured_store_url
    from tokometer.tune.answer import judge
    from tokometer.tune.saved import load_tune
    from tokometer.util.atomicfile import write_atomic
    from tokometer.util.errors import ConfigError
    from tokometer.util.outputtarget import is_standard_output

    if name is None and path is None:
        return False
    if runs or (name is not None and path is not None) or fmt not in ("html", "md"):
        raise ConfigError("--tune NAME or --tune-json FILE reports one tune, alone, as html or md "
                          "(no run ids, no other --format)")
    record = _tune_file(path.expanduser()) if path is not None else None
    results = ResultStore(configured_store_url(store), read_only=True)
    try:
        if record is None and name is not None:
            record = load_tune(results, name)
            if record is None:
                raise ConfigError(f"no tune {name!r} in {results.display_url}: 'tokometer tune' saves one")
        assert record is not None
        answer = judge(record, results)
    finally:
        results.close()
    text = tune_markdown(record, answer) if fmt == "md" else tune_html(record, answer, title)
    if output is None:
        say(text, nl=False)
        return True
    write_atomic(output, text)
    say(f"wrote {output}: tune {record.name}, {len(record.variants)} variants", err=is_standard_output(output))
    return True
