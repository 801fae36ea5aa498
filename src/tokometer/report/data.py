"""What a report shows, as plain JSON-able data: `report_data` turns saved runs into it.

The HTML page (`tokometer.report.html`) plots exactly these numbers and embeds them, whole, in a
``<script type="application/json" id="tokometer-data">`` tag; the markdown summary
(`tokometer.report.markdown`) prints them. Nothing here recomputes a step's figures: each step is written as
the store and ``bench --json`` write it (`StoredRun`'s `StoredStep.to_json`, its summary `StepSummary.to_json`),
and the knee comes from `tokometer.metrics.knee`.
The knee is over loads, not steps: the trials of a load (``bench --repeat``) are pooled (`_loads`), a run of one
load has no knee, and in a find-max run a probe that missed its objectives is never the knee.
What is added is per request, from the run's records with the metric functions of
`tokometer.metrics.request`: the TTFT and TPOT samples behind each step's distributions (for the CDFs)
and each request's timeline (lag, wait, prefill, decode).

Schema ``tokometer.report/2`` (``/1`` named a step's ``step`` ``index``, wrote its ``load`` without the trial
and ``gpu`` as ``[]`` when not read, and had no ``started_at``)::

    {"schema", "title", "tokometer_version",
     "runs": [{"id", "name", "model", "target", "api", "status", "started_at", "finished_at", "label",
               "spec", "engine", "host",
               "steps": [{"step", "load", "started_at", "summary", "health", "interrupted", "server", "gpu"
                          (as `StoredStep.to_json`), "label", "power",
                          "probe": {"passed", "misses", "saturated"} or null (a find-max probe's verdict)}],
               "loads": [{"label", "value", "mode", "steps": [positions of its trials], "trials",
                          "output_throughput_tok_s", "decode_speed_p50", "ttft_p50_ms", "power", "eligible"}],
               "knee": position in steps (the knee load's first trial) or null, "knee_load": position in loads,
               "annotations": [{"step", "kind", "text", "x", "y"}],
               "slo": {"ttft_ms", "name"} or null (the TTFT objective, for the TTFT-against-load chart),
               "cdf": {"ttft_ms": [[...] per step], "tpot_ms": [[...] per step]},
               "timeline": {"requests", "shown", "every", "columns": {...}, "ramps": [...]},
               "efficiency": {...} or null, "efficiency_note": str or null}],
     "pareto": {"basis": "total" or "per GPU", "note": how each run's GPUs are known, "axes": {"x", "y"},
                "gpus": [{"run", "count" or null, "source"}],
                "points": [{"run", "run_name", "load", "load_index", "throughput_tok_s" (on the basis),
                            "decode_speed_p50", "gpus", "knee", "missed" (a find-max probe that missed), "on_front",
                            "dominated_by": position or null}],
                "front": [positions in points, throughput ascending]}}

The Pareto front (`tokometer.metrics.pareto`) is over the loads of every run given, at the same pooled points
as the knee.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tokometer import __version__
from tokometer.benchmark import findmax
from tokometer.benchmark.findmax import FindMax, parse_objectives
from tokometer.compare.gate import load_groups, run_gpus
from tokometer.metrics import pareto
from tokometer.metrics import request as m
from tokometer.metrics.knee import knee, power, summary_power
from tokometer.metrics.pooling import pool_trials
from tokometer.records import RequestRecord
from tokometer.report.ramps import ramp_targets
from tokometer.runs.stored_spec import StoredSpec
from tokometer.store.runs import StoredRun, StoredStep
from tokometer.util.errors import TokometerError

__all__ = ["MAX_CDF_POINTS", "MAX_TIMELINE_REQUESTS", "SCHEMA", "LoadPoint", "report_data", "run_name",
           "step_label"]

SCHEMA = "tokometer.report/2"
MAX_TIMELINE_REQUESTS = 5000
"""A run with more measured requests shows every k-th one in its timeline (the page says so)."""
MAX_CDF_POINTS = 2000
"""A step with more samples plots this many evenly spaced order statistics (min and max kept)."""


@dataclass(frozen=True)
class LoadPoint:
    """One load of a run, its trials pooled (`tokometer.metrics.pooling`): where the knee and the Pareto front are
    looked for. `to_json` is its entry in the run's ``loads``."""

    label: str
    mode: str | None
    value: float | None
    """The number it is plotted at: its concurrency, or its rate (`_load_value`)."""
    steps: tuple[int, ...]
    """The positions in the run's steps of its trials."""
    trials: int
    output_throughput_tok_s: float | None
    decode_speed_p50: float | None
    ttft_p50_ms: float | None
    power: float | None
    eligible: bool
    """May be the knee: finished, and in a find-max run every probe of it met the objectives."""

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "steps": list(self.steps)}


@dataclass(frozen=True)
class _Judged:
    """What the report works out of one saved run besides its steps: its loads, its knee and a search's answer."""

    run: StoredRun
    loads: tuple[LoadPoint, ...]
    knee_load: int | None
    """The knee's position in ``loads``; None where there is none."""
    search: FindMax | None

    @property
    def knee_step(self) -> int | None:
        """The knee's position in the run's steps: its load's first trial."""
        return self.loads[self.knee_load].steps[0] if self.knee_load is not None else None


def _judged(run: StoredRun, records: Sequence[RequestRecord]) -> _Judged:
    search = findmax.run_outcome(run)
    loads = _loads(run, records, search)
    return _Judged(run, loads, knee([load.power if load.eligible else None for load in loads]), search)


def run_name(run: StoredRun) -> str:
    """How a run is named in legends: ``run 3``, with its label where it has one."""
    return f"run {run.id}" + (f" ({run.label})" if run.label else "")


def step_label(step: StoredStep) -> str:
    """How a step is labelled on every chart: its load's short form (``c=4``, ``10/s``), with its trial
    (``c=4 #2``) for a sweep run several times over (``bench --repeat``)."""
    label = step.load.short() if step.load is not None else f"step {step.index}"
    return label + (f" #{step.trial}" if step.trial is not None else "")


def _annotations(judged: _Judged) -> list[dict[str, Any]]:
    """Run-level markers drawn on the rate-vs-throughput chart: the knee (at its load's pooled point), and a
    search's answer (``bench --find-max``): ``{"step": position, "kind": ..., "text": ..., "x": ..., "y": ...}``.
    When both fall on one load they are one marker (``knee and find-max: ...``), never two stars on one point."""
    run, loads, knee_load, search = judged.run, judged.loads, judged.knee_load, judged.search
    marks: list[dict[str, Any]] = []
    if knee_load is not None:
        load = loads[knee_load]
        marks.append({"step": load.steps[0], "kind": "knee", "text": f"knee: {load.label}",
                      "x": load.output_throughput_tok_s, "y": load.decode_speed_p50})
    if search is not None and search.best is not None:
        best = next((p.step for p in search.probes if p.passed and p.value == search.best), None)
        position = next((i for i, s in enumerate(run.steps) if s.index == best), None)
        if position is not None:
            text = f"find-max: {search.best:g} {search.unit}"
            if marks and position in loads[knee_load or 0].steps:
                marks[0]["kind"], marks[0]["text"] = "knee_find_max", f"knee and {text}"
            else:
                summary = run.steps[position].summary
                marks.append({"step": position, "kind": "find_max", "text": text,
                              "x": summary.output_throughput_tok_s if summary is not None else None,
                              "y": summary.decode_speed_tok_s.p50 if summary is not None else None})
    return marks


def _loads(run: StoredRun, records: Sequence[RequestRecord], search: FindMax | None) -> tuple[LoadPoint, ...]:
    """The run's loads, each with its trials pooled (`tokometer.metrics.pooling`), and the power of the two
    (`tokometer.metrics.knee.power`)."""
    position = {step.index: i for i, step in enumerate(run.steps)}
    verdicts = {p.step: p.passed for p in search.probes} if search is not None else {}
    out = []
    for _, steps in load_groups(run):
        summaries = [s.summary for s in steps if s.summary is not None]
        indices = {s.index for s in steps}
        pooled = pool_trials(summaries, [r for r in records if r.step in indices])
        throughput, decode = pooled.throughput, pooled.decode_p50
        first = steps[0]
        out.append(LoadPoint(label=first.load.short() if first.load is not None else f"step {first.index}",
                             mode=first.load.mode if first.load is not None else None, value=_load_value(first),
                             steps=tuple(position[s.index] for s in steps), trials=len(summaries),
                             output_throughput_tok_s=throughput, decode_speed_p50=decode,
                             ttft_p50_ms=pooled.ttft_p50_ms, power=power(throughput, decode),
                             eligible=bool(summaries) and all(verdicts.get(s.index, True) for s in steps)))
    return tuple(out)


def _load_value(step: StoredStep) -> float | None:
    """The number a load is plotted at: its concurrency, or its rate."""
    load = step.load
    if load is None or load.mode == "trace":
        return None
    return load.rate if load.mode == "rate" else float(load.concurrency)


def _slo(spec: StoredSpec) -> dict[str, Any] | None:
    """The run's TTFT objective: a ``--slo`` ttft percentile (find-max), else ``--slo-ttft-ms`` (goodput)."""
    if spec.slo:
        try:
            objectives = parse_objectives(spec.slo)
        except TokometerError:
            objectives = []
        for o in objectives:
            if o.metric == "ttft_ms":
                return {"ttft_ms": o.limit, "name": o.name, "percentile": o.percentile_key}
    if (limit := spec.slo_limits.ttft_ms) is not None:
        return {"ttft_ms": limit, "name": "slo_ttft_ms", "percentile": None}
    return None


def _probe(step: StoredStep, search: FindMax | None) -> dict[str, Any] | None:
    probe = next((p for p in search.probes if p.step == step.index), None) if search is not None else None
    if probe is None:
        return None
    return {"passed": probe.passed, "misses": list(probe.misses), "saturated": probe.saturated}


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
    return {"requests": len(measured), "shown": len(shown), "every": every, "columns": columns,
            "ramps": ramp_targets(steps, records, t0)}


def _step(step: StoredStep, search: FindMax | None) -> dict[str, Any]:
    return {**step.to_json(), "label": step_label(step), "power": summary_power(step.summary),
            "probe": _probe(step, search)}


def _efficiency(run: StoredRun, records: list[RequestRecord]) -> tuple[dict[str, Any] | None, str | None]:
    """The run judged against its roofline (`tokometer.perf.questions.judge_stored_run`) when its model and hardware
    are known (a run of the embedded engine: its GGUF, on this host); otherwise why not, in words."""
    engine = run.engine
    if engine is None or not engine.is_llamacpp or not engine.model_file:
        return None, (f"not shown: the model and hardware of {run_name(run)} are not known (only a run of the "
                      f"embedded engine names its model file and ran on this host); 'tokometer estimate --run "
                      f"{run.id} --model NAME --hardware NAME' judges it against a deployment you name")
    from tokometer.perf.questions import EstimateSpec, judge_stored_run
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


def _run(judged: _Judged, records: list[RequestRecord], judge: bool) -> dict[str, Any]:
    run, search = judged.run, judged.search
    by_step: dict[int, list[RequestRecord]] = {}
    for r in _measured(records):
        by_step.setdefault(r.step, []).append(r)
    efficiency, note = _efficiency(run, records) if judge else (None, "not shown: not asked for")
    return {
        "id": run.id, "name": run_name(run), "model": run.model, "target": run.target, "api": run.api,
        "status": run.status, "started_at": run.started_at, "finished_at": run.finished_at, "label": run.label,
        "spec": dict(run.spec), "engine": run.engine.to_json() if run.engine else None,
        "host": dict(run.host) if run.host else None, "steps": [_step(s, search) for s in run.steps],
        "loads": [load.to_json() for load in judged.loads], "knee": judged.knee_step,
        "knee_load": judged.knee_load, "annotations": _annotations(judged),
        "slo": _slo(run.spec), "find_max": search.to_json() if search is not None else None,
        "cdf": {"ttft_ms": [_cdf(by_step.get(s.index, []), m.ttft_ns) for s in run.steps],
                "tpot_ms": [_cdf(by_step.get(s.index, []), m.tpot_ns) for s in run.steps]},
        "timeline": _timeline(run.steps, records), "efficiency": efficiency, "efficiency_note": note,
    }


def _pareto(runs: Sequence[_Judged]) -> dict[str, Any]:
    """The Pareto front of every load of every run (`tokometer.metrics.pareto`): each point with its run, its
    load (position in the run's ``loads``), whether it is its run's knee, and its standing (``dominated_by``:
    the position in ``points`` of a front point that dominates it)."""
    loads = []
    for judged in runs:
        gpus, source = run_gpus(judged.run)
        loads.append(pareto.RunLoads(judged.run.id, run_name(judged.run),
                                     tuple((load.label, load.output_throughput_tok_s, load.decode_speed_p50)
                                           for load in judged.loads), gpus, source))
    basis, per_run = pareto.points(loads)
    placed = [(judged, position, p) for judged, pts in zip(runs, per_run, strict=True)
              for position, p in enumerate(pts) if p is not None]
    standing = pareto.standings([p for _, _, p in placed])
    points = [{**p.to_json(), "load_index": position, "knee": judged.knee_load == position,
               "missed": not judged.loads[position].eligible,
               "on_front": s.on_front, "dominated_by": s.dominated_by}
              for (judged, position, p), s in zip(placed, standing, strict=True)]
    order = pareto.front([p for _, _, p in placed])
    counts = [{"run": r.run, "count": r.gpus, "source": r.gpus_source} for r in loads]
    return {"basis": basis, "note": pareto.basis_note(basis, loads), "gpus": counts, "points": points, "front": order,
            "axes": {"x": "output tok/s" + (" per GPU" if basis == "per GPU" else ", all requests"),
                     "y": "decode tok/s per request (p50)"}}


def report_data(runs: Sequence[tuple[StoredRun, list[RequestRecord]]], title: str | None = None,
                judge: bool = True) -> dict[str, Any]:
    """The report of ``runs`` (each a saved run and its records, as `ResultStore` reads them), in order.

    ``judge``: judge runs of known model and hardware against the roofline (reads the model file and, the
    first time, measures this host; the markdown summary does without)."""
    names = ", ".join(str(run.id) for run, _ in runs)
    default = f"tokometer report: run{'s' if len(runs) > 1 else ''} {names}"
    judged = [_judged(run, records) for run, records in runs]
    out = [_run(j, records, judge) for j, (_, records) in zip(judged, runs, strict=True)]
    return {"schema": SCHEMA, "title": title or default, "tokometer_version": __version__, "runs": out,
            "pareto": _pareto(judged)}
