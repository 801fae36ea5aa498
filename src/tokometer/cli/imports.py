"""``tokometer import FILE...``: other tools' results into the store as runs, under tokometer's definitions.

Reads vLLM ``bench serve`` JSON (saved with ``--save-detailed``), GuideLLM's benchmarks JSON and AIPerf's
``profile_export.jsonl`` (`tokometer.imports`), recomputes every metric from the per-request data with
tokometer's own code, saves each file as a run, and prints, per file, the run's id, tokometer's numbers beside
the tool's own, and what could not be recomputed. Bad files are one line and exit status 2; every file is
read and checked before any is saved.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from tokometer.cli.say import say

if TYPE_CHECKING:
    from tokometer.imports.source import ImportedRun
    from tokometer.metrics.summary import StepSummary

__all__ = ["command"]

_SIDE_BY_SIDE = (("TTFT p50", "ttft_ms", "ttft"), ("TPOT p50", "tpot_ms", "tpot"), ("ITL p50", "itl_ms", "itl"),
                 ("chunk gap p50", "chunk_gap_ms", "chunk_gap"), ("E2E p50", "e2e_ms", "e2e"))
"""Line label, `StepSummary` field, the metric's short name (``tool_summary`` key ``NAME_p50_ms``)."""


@click.command("import")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path, dir_okay=False),
                metavar="FILE [FILE ...]")
@click.option("--store", default=None, help="Results store: a SQLAlchemy URL or a SQLite file path.")
def command(files: tuple[Path, ...], store: str | None) -> None:
    """Import vllm bench serve, GuideLLM and AIPerf results as runs, every metric recomputed by tokometer.

    \b
      tokometer import vllm-result.json            # vllm bench serve --save-result --save-detailed
      tokometer import guidellm.json               # guidellm run --output kind=json,path=guidellm.json
      tokometer import artifacts/*/profile_export.jsonl   # aiperf profile
      tokometer compare 12 13                      # then as any two runs
    """
    from tokometer.imports.save import save_import
    from tokometer.store import ResultStore, configured_store_url

    imported = _read_all(files)
    results = ResultStore(configured_store_url(store))
    try:
        for run in imported:
            run_id, summaries = save_import(results, run)
            _print(run, run_id, summaries, results.display_url)
    finally:
        results.close()


def _read_all(files: tuple[Path, ...]) -> list[ImportedRun]:
    """Every file read and checked (before any is saved): together at most `MAX_EVENTS` requests and chunk
    gaps, as one file may hold, so the records held stay within one file's bound however many are given."""
    from tokometer.imports.detect import read_import
    from tokometer.imports.source import MAX_EVENTS, ImportFormatError

    imported: list[ImportedRun] = []
    held = 0
    for path in dict.fromkeys(files):
        run = read_import(path.expanduser())
        held += sum(1 + len(record.event_ns) for record in run.records)
        if held > MAX_EVENTS and imported:
            raise ImportFormatError(f"{path}: these files hold more than {MAX_EVENTS:,} requests and chunk gaps "
                                    "together: import them in separate commands")
        imported.append(run)
    return imported


def _print(run: ImportedRun, run_id: int, summaries: list[StepSummary], where: str) -> None:
    ok = sum(s.requests_completed for s in summaries)
    failed = sum(s.requests_failed for s in summaries)
    steps = f", {len(summaries)} steps (the first shown)" if len(summaries) > 1 else ""
    say(f"{run.source}: {run.tool} {run.tool_version or '(version not in the file)'} -> run {run_id} "
        f"in {where}: {ok} requests ok, {failed} failed{steps}")
    if run.started_at:
        say(f"  ran {run.started_at}, from {run.dated_from}")
    for warning in run.warnings:
        say(f"tokometer: warning: {run.source}: {warning}", err=True)
    if not summaries:
        return
    summary = summaries[0]
    own = run.tool + "'s own"
    say(f"  {'':<14} {'tokometer':>12}  {own:>20}")
    for label, name, short in _SIDE_BY_SIDE:
        ours = getattr(summary, name).p50
        theirs = run.tool_summary.get(f"{short}_p50_ms")
        if ours is None and theirs is None:
            continue
        ours_text = f"{ours:9.2f} ms" if ours is not None else "          -"
        their_text = f"{theirs:17.2f} ms" if theirs is not None else f"{'-':>20}"
        differs = "  (defined differently)" if theirs is not None and short not in run.agrees else ""
        say(f"  {label:<14} {ours_text:>12}  {their_text}{differs}")
    say(f"  output tok/s   {summary.output_throughput_tok_s:9.1f}")
    if run.not_recomputed:
        say("  not recomputed: " + "; ".join(f"{k} ({why})" for k, why in run.not_recomputed.items()))
