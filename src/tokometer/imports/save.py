"""Save an `ImportedRun` into the results store as a run, each step summarised by tokometer.

Each step's summary is `tokometer.runs.finish.finish_step` over the imported records (or, for a file of
statistics without requests, an llm-d report, the file's own numbers: `ImportedStep.summary`) — the same code as for a
run tokometer measured, less what an imported run cannot give: no steady state or time slices (its load is not
one tokometer ran), no SLO, GPU count or text check — so ``compare`` and ``report`` read an imported run like
any other. The run's ``api`` is the protocol the tool spoke (so runs of two tools over one protocol compare);
its label names the tool and its ``spec.import`` holds the tool, its version, the tool's own numbers and what
could not be recomputed (`ImportedRun.provenance`). The run is dated when the tool ran it
(`ImportedRun.started_at`), not when it was imported.
"""

from __future__ import annotations

from typing import Any

from tokometer.imports.source import ImportedRun
from tokometer.metrics.summary import StepSummary
from tokometer.runs.finish import finish_step
from tokometer.store import ResultStore

__all__ = ["save_import"]


def save_import(store: ResultStore, run: ImportedRun) -> tuple[int, list[StepSummary]]:
    """Write ``run`` to ``store``; its new id and each step's summary, as saved."""
    spec: dict[str, Any] = {"url": run.target, "model": run.model, "label": f"{run.tool} import",
                            "import": run.provenance()}
    run_id = store.create_run(target=run.target, api=run.api, model=run.model, spec=spec,
                              engine=run.engine, host=None, label=f"{run.tool} {run.tool_version or ''}".strip(),
                              started_at=run.started_at)  # when the tool ran it, not now
    summaries = []
    try:
        for index, step in enumerate(run.steps):
            summary = (StepSummary.from_json(step.summary) if step.summary is not None  # a file of statistics
                       else finish_step(step.records, load=None))  # no windows: see the module docstring
            store.start_step(run_id, index, step.load)
            for record in step.records:
                record.step = index
                store.append(run_id, record)
            store.finish_step(run_id, index, summary.to_json(), {}, False, server=step.server)
            summaries.append(summary)
    except BaseException:
        store.finish_run(run_id, "failed")
        raise
    store.finish_run(run_id, "completed")
    return run_id, summaries
