"""What a report shows, as plain JSON-able data: `report_data` turns saved runs into it.

The HTML page (`tokometer.report.html`) plots exactly these numbers and embeds them, whole, in a
``<script type="application/json" id="tokometer-data">`` tag; the markdown summary
(`tokometer.report.markdown`) prints them. Nothing here recomputes a step's figures: each step carries
its stored summary (`StepSummary.to_json`) as saved, and the knee comes from `tokometer.metrics.knee`.
What is added is per request, from the run's records with the metric functions of
`tokometer.metrics.request`: the TTFT and TPOT samples behind each step's distributions (for the CDFs)
and each request's timeline (lag, wait, prefill, decode).

Schema ``tokometer.report/1``::

    {"schema", "title", "tokometer_version",
     "runs": [{"id", "name", "model", "target", "api", "status", "started_at", "finished_at", "label",
               "spec", "engine", "host",
               "steps": [{"index", "label", "load", "interrupted", "summary", "power", "health", "server",
                          "gpu"}],
               "knee": position in steps or null, "annotations": [{"step", "kind", "text"}],
               "cdf": {"ttft_ms": [[...] per step], "tpot_ms": [[...] per step]},
               "timeline": {"requests", "shown", "every", "columns": {...}},
               "efficiency": {...} or null, "efficiency_note": str or null}]}
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tokometer import __version__
from tokometer.benchmark import findmax
from tokometer.benchmark.findmax import FindMax
from tokometer.errors import TokometerError
from tokometer.metrics import request as m
from tokometer.metrics.knee import knee, summary_power
from tokometer.records import RequestRecord
from tokometer.store.runs import StoredRun, StoredStep

__all__ = ["MAX_CDF_POINTS", "MAX_TIMELINE_REQUESTS", "SCHEMA", "report_data", "run_name", "step_label"]

SCHEMA = "tokometer.report/1"
MAX_TIMELINE_REQUESTS = 5000
"""A run with more measured requests shows every k-th one in its timeline (the page says so)."""
MAX_CDF_POINTS = 2000
"""A step with more samples plots this many evenly spaced order statistics (min and max kept)."""


def run_name(run: StoredRun) -> str:
    """How a run is named in legends: ``run 3``, with its label where it has one."""
    return f"run {run.id}" + (f" ({run.label})" if run.label else "")


def step_label(step: StoredStep) -> str:
    """How a step is labelled on every chart: its load's short form (``c=4``, ``10/s``), with its trial
    (``c=4 #2``) for a sweep run several times over (``bench --repeat``)."""
    label = step.load.short() if step.load is not None else f"step {step.index}"
    return label + (f" #{step.trial}" if step.trial is not None else "")


def find_max_of(run: StoredRun) -> FindMax | None:
    """The answer of a ``bench --find-max`` run, recomputed from its saved steps (None for a sweep)."""
    return findmax.outcome(run.spec, [(s.index, s.load, s.step_summary) for s in run.steps])


def _annotations(run: StoredRun, knee_at: int | None) -> list[dict[str, Any]]:
    """Run-level markers drawn on the rate-vs-throughput chart: the knee, and a search's answer
    (``bench --find-max``): ``{"step": position, "kind": ..., "text": ...}``."""
    marks: list[dict[str, Any]] = []
    if knee_at is not None:
        marks.append({"step": knee_at, "kind": "knee", "text": f"knee: {step_label(run.steps[knee_at])}"})
    search = find_max_of(run)
    if search is not None and search.best is not None:
        best = next((p.step for p in search.probes if p.passed and p.value == search.best), None)
        position = next((i for i, s in enumerate(run.steps) if s.index == best), None)
        if position is not None:
            marks.append({"step": position, "kind": "find_max",
                          "text": f"find-max: {search.best:g} {search.unit}"})
    return marks


def _thin(values: list[float], limit: int) -> list[float]:
    """``values`` sorted, cut to ``limit`` evenly spaced order statistics (first and last kept)."""
    ordered = sorted(values)
    if len(ordered) <= limit:
        return ordered
    last = len(ordered) - 1
    return [ordered[round(i * last / (limit - 1))] for i in range(limit)]


def _measured(records: Sequence[RequestRecord]) -> list[RequestRecord]:
    """The requests a step's summary counts: not warm-up, and sent."""
    return [r for r in records if not r.warmup and r.sent_ns]


def _cdf(records: Sequence[RequestRecord], fn: Any) -> list[float]:
    values = [v * 1e-6 for v in (fn(r) for r in records if r.ok) if v is not None]
    return [round(v, 4) for v in _thin(values, MAX_CDF_POINTS)]


def _seconds(stamp: int, t0: int) -> float | None:
    return round((stamp - t0) / 1e9, 6) if stamp else None


def _timeline(steps: Sequence[StoredStep], records: Sequence[RequestRecord]) -> dict[str, Any]:
    """Each measured request's moments, in seconds from the run's first send: due, sent, first token, end,
    and the server's own prompt time where it reported one (which splits TTFT into wait and prefill)."""
    position = {step.index: i for i, step in enumerate(steps)}
    measured = sorted((r for r in _measured(records) if r.step in position), key=lambda r: r.sent_ns)
    every = -(-len(measured) // MAX_TIMELINE_REQUESTS) if measured else 1
    shown = measured[::every]
    t0 = min((min(r.due_ns or r.sent_ns, r.sent_ns) for r in measured), default=0)
    columns: dict[str, list[Any]] = {name: [] for name in ("step", "index", "due_s", "sent_s", "first_token_s",
                                                          "end_s", "server_prefill_s", "ok", "error")}
    for r in shown:
        prefill = r.server.prompt_ms / 1e3 if r.ok and r.server is not None and r.server.prompt_ms else None
        row = {"step": position[r.step], "index": r.index, "due_s": _seconds(r.due_ns or r.sent_ns, t0),
               "sent_s": _seconds(r.sent_ns, t0), "first_token_s": _seconds(r.first_token_ns, t0) if r.ok else None,
               "end_s": _seconds(r.end_ns, t0), "server_prefill_s": prefill, "ok": r.ok, "error": r.error}
        for name, value in row.items():
            columns[name].append(value)
    return {"requests": len(measured), "shown": len(shown), "every": every, "columns": columns}


def _step(step: StoredStep) -> dict[str, Any]:
    return {"index": step.index, "label": step_label(step), "load": step.load.label() if step.load else None,
            "interrupted": step.interrupted, "summary": dict(step.summary) if step.summary else None,
            "power": summary_power(step.summary), "health": step.health.to_json() if step.health else None,
            "server": dict(step.server) if step.server else None, "gpu": [dict(g) for g in step.gpu]}


def _efficiency(run: StoredRun, records: list[RequestRecord]) -> tuple[dict[str, Any] | None, str | None]:
    """The run judged against its roofline (`tokometer.perf.app.judge_stored_run`) when its model and hardware
    are known (a run of the embedded engine: its GGUF, on this host); otherwise why not, in words."""
    engine = run.engine
    if engine is None or not engine.is_llamacpp or not engine.model_file:
        return None, (f"not shown: the model and hardware of {run_name(run)} are not known (only a run of the "
                      f"embedded engine names its model file and ran on this host); 'tokometer estimate --run "
                      f"{run.id} --model NAME --hardware NAME' judges it against a deployment you name")
    from tokometer.perf.app import EstimateSpec, judge_stored_run
    from tokometer.perf.roofline import Efficiency

    try:
        judged = judge_stored_run(EstimateSpec(), run, records)
    except TokometerError as exc:
        return None, f"not shown: {exc}"
    expected = Efficiency()
    out = judged.to_json()
    out["expected"] = {"mbu": expected.decode_bandwidth, "decode_mfu": expected.decode_compute,
                       "prefill_mfu": expected.prefill_compute}
    labels = {step.index: step_label(step) for step in run.steps}
    for step in out["steps"]:
        step["label"] = labels.get(step["step"], step["load"])
    return out, None


def _run(run: StoredRun, records: list[RequestRecord], judge: bool) -> dict[str, Any]:
    steps = [_step(s) for s in run.steps]
    knee_at = knee([s["power"] for s in steps])
    by_step: dict[int, list[RequestRecord]] = {}
    for r in _measured(records):
        by_step.setdefault(r.step, []).append(r)
    efficiency, note = _efficiency(run, records) if judge else (None, "not shown: not asked for")
    return {
        "id": run.id, "name": run_name(run), "model": run.model, "target": run.target, "api": run.api,
        "status": run.status, "started_at": run.started_at, "finished_at": run.finished_at, "label": run.label,
        "spec": dict(run.spec), "engine": run.engine.to_json() if run.engine else None,
        "host": dict(run.host) if run.host else None, "steps": steps, "knee": knee_at,
        "annotations": _annotations(run, knee_at),
        "find_max": search.to_json() if (search := find_max_of(run)) is not None else None,
        "cdf": {"ttft_ms": [_cdf(by_step.get(s.index, []), m.ttft_ns) for s in run.steps],
                "tpot_ms": [_cdf(by_step.get(s.index, []), m.tpot_ns) for s in run.steps]},
        "timeline": _timeline(run.steps, records), "efficiency": efficiency, "efficiency_note": note,
    }


def report_data(runs: Sequence[tuple[StoredRun, list[RequestRecord]]], title: str | None = None,
                judge: bool = True) -> dict[str, Any]:
    """The report of ``runs`` (each a saved run and its records, as `ResultStore` reads them), in order.

    ``judge``: judge runs of known model and hardware against the roofline (reads the model file and, the
    first time, measures this host; the markdown summary does without)."""
    names = ", ".join(str(run.id) for run, _ in runs)
    default = f"tokometer report: run{'s' if len(runs) > 1 else ''} {names}"
    return {"schema": SCHEMA, "title": title or default, "tokometer_version": __version__,
            "runs": [_run(run, records, judge) for run, records in runs]}
