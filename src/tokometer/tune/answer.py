"""The answer of a tune: each variant against the baseline, metric by metric, with ``compare``'s verdicts.

`judge` reads each finished variant's run and requests from the store and compares it with the baseline's as
``tokometer compare`` compares two runs (`tokometer.compare.gate.compare_runs`: a percentile bootstrap of
each change, the threshold rule, and "cannot tell" where the noise is too large), over the loads both runs
ran (a find-max search probes loads of its own: those it shares with the baseline). The gate's words become
the tune's (`WORDS`): an improvement is ``better``, a regression ``worse``, "no change" and "within
threshold" (a real move smaller than the threshold) are ``no change``, and "cannot tell" is ``cannot decide``.
Runs of variants differ where the variant differs (another model file is another model): they are compared
anyway, and what differs is kept as a note.

The **headline** comparison of a variant, the one its ``verdicts`` hold, is at the heaviest load the baseline
ran (its last load) for a sweep; for ``--find-max`` it is each run's answer (the highest load that met the
objectives) against the baseline's, whatever the two loads are.

**Best per objective** (`OBJECTIVES`): throughput under the SLO (goodput where the runs have objectives,
else output tok/s; for a find-max search the output tok/s at its answer), per-request decode speed (TPOT
p50: the time a token of one request takes, lower is faster), TTFT p99, and memory. The best is the variant
with the best point value; it is named only when ``compare`` tells it apart: a variant must be ``better``
than the baseline, and ``better`` than each other variant that is also better than the baseline (the two
compared directly); the baseline is best only where every variant is ``worse``. Otherwise the answer is
"cannot decide", naming those it cannot tell apart. Memory has one reading per run and no interval: the
lowest is best unless another is within `MEMORY_TIE` of it.

**Pareto front** over the variants: every load of every finished variant (trials pooled) as a point of
per-request decode speed p50 against output throughput (`tokometer.metrics.pareto`, as ``compare`` and
``report`` draw it).

Beside each variant: what ``estimate`` says the hardware allows (`tokometer.tune.hardware.allowed_for`: the
bound of each step's decode speed, or why it cannot say), and for a variant that changes the weights its
``quality`` against the baseline in words beside its speed ("faster but different").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tokometer.benchmark import findmax
from tokometer.compare.gate import compare_runs, front_loads, load_groups
from tokometer.metrics import pareto
from tokometer.records import RequestRecord
from tokometer.store.runs import StoredRun, StoredStep
from tokometer.tune.noise import MEMORY_TIE, NoiseFloor, apply_floors, memory_tie
from tokometer.tune.outcome import TuneRecord, Variant, VariantOutcome
from tokometer.tune.verdicts import WORDS, MetricVerdict, Word, word_of
from tokometer.util.errors import ConfigError

__all__ = ["MEMORY_TIE", "OBJECTIVES", "WORDS", "Best", "FrontPoint", "MetricVerdict", "Objective", "TuneAnswer",
           "TuneFront", "VariantAnswer", "Word", "judge", "pick_best", "quality_line", "word_of"]

@dataclass(frozen=True)
class VariantAnswer:
    """One variant judged: its verdicts against the baseline and the figures the objectives rank."""

    variant: Variant
    outcome: VariantOutcome | None
    """None for a variant not tried yet (a cut tune)."""
    run: StoredRun | None = None
    headline: str | None = None
    """The load of the headline comparison: ``c=8``, or ``find-max answer c=8 (baseline c=4)``."""
    headline_steps: tuple[int, ...] = ()
    """This run's steps of the headline comparison."""
    verdicts: Mapping[str, MetricVerdict] = field(default_factory=dict)
    """At the headline load, by metric (empty for the baseline and a variant not compared)."""
    loads: tuple[tuple[str, Mapping[str, MetricVerdict]], ...] = ()
    """Every load it shares with the baseline: its short form and its verdicts."""
    memory: float | None = None
    memory_note: str = ""
    """Where the memory figure comes from, or why there is none."""
    estimate: Mapping[str, Any] | None = None
    estimate_note: str = ""
    quality_text: str | None = None
    notes: tuple[str, ...] = ()
    ranked: bool = False
    """Its headline compares against the baseline's own headline steps: it takes part in the best per
    objective."""

    @property
    def name(self) -> str:
        return self.variant.name

    @property
    def status(self) -> str:
        return self.outcome.status if self.outcome is not None else "not run"


@dataclass(frozen=True)
class Objective:
    """One thing a tune may optimise, and the ``compare`` metric that judges it."""

    key: str
    label: str
    metric: str | None
    """``compare``'s metric; None for memory (no interval: `MEMORY_TIE`)."""
    higher_is_better: bool


OBJECTIVES: tuple[Objective, ...] = (
    Objective("throughput", "throughput under the SLO", "output_throughput", True),
    Objective("decode_speed", "per-request decode speed (TPOT p50)", "tpot_p50", False),
    Objective("ttft_p99", "TTFT p99", "ttft_p99", False),
    Objective("memory", "memory", None, False),
)
"""The objectives in the order shown; throughput is judged on goodput where the runs have an SLO."""


@dataclass(frozen=True)
class Best:
    """The best variant for one objective, or why it cannot be decided."""

    objective: str
    label: str
    metric: str | None
    unit: str
    winner: str | None
    """The variant's name; None when it cannot be decided or nothing was measured."""
    value: float | None
    decided: bool
    text: str
    """One sentence: the answer and why."""
    tied: tuple[str, ...] = ()
    """The variants it cannot tell apart from the best by value."""

    def to_json(self) -> dict[str, Any]:
        return {"objective": self.objective, "label": self.label, "metric": self.metric, "unit": self.unit,
                "variant": self.winner, "value": self.value,
                "verdict": "decided" if self.decided else "cannot decide", "tied": list(self.tied),
                "text": self.text}


@dataclass(frozen=True)
class FrontPoint:
    """One load of one variant on the speed-against-throughput plane, and where it stands."""

    variant: str
    point: pareto.Point
    on_front: bool
    dominated_by: int | None
    """The position (in `TuneFront.points`) of the front point that dominates it."""

    def to_json(self) -> dict[str, Any]:
        return {"variant": self.variant, "load": self.point.load, "throughput_tok_s": self.point.throughput,
                "decode_speed_p50": self.point.speed, "on_front": self.on_front, "dominated_by": self.dominated_by}


@dataclass(frozen=True)
class TuneFront:
    points: tuple[FrontPoint, ...]
    front: tuple[int, ...]
    """The positions of the front's points, throughput ascending."""
    basis: str
    note: str

    def to_json(self) -> dict[str, Any]:
        return {"basis": self.basis, "note": self.note, "x": "output tok/s" + (" per GPU" if self.basis == "per GPU"
                                                                                 else ""),
                "y": "decode tok/s per request (p50)", "points": [p.to_json() for p in self.points],
                "front": list(self.front)}


@dataclass(frozen=True)
class TuneAnswer:
    """What `judge` found: every variant in the tune's order (baseline first), the best per objective, the front."""

    variants: tuple[VariantAnswer, ...]
    best: tuple[Best, ...]
    front: TuneFront
    throughput_metric: str = "output_throughput"
    """The metric the throughput objective was judged on: ``goodput`` where the runs had an SLO."""
    floor: NoiseFloor | None = None
    """The baseline's second run against its first: the noise floor every verdict was judged against."""

    def of(self, index: int) -> VariantAnswer:
        return next(v for v in self.variants if v.variant.index == index)


# -- reading the runs --------------------------------------------------------------------------------------

_Loaded = tuple[StoredRun, list[RequestRecord]]


def _load(store: Any, outcome: VariantOutcome | None) -> tuple[_Loaded | None, str | None]:
    """A finished variant's run and requests; else None and why not."""
    if outcome is None:
        return None, "not tried yet"
    if outcome.status != "finished" or outcome.run_id is None:
        return None, outcome.error or outcome.status
    run = store.run(outcome.run_id)
    if run is None:
        return None, f"its run {outcome.run_id} is not in the store"
    return (run, store.load_records(outcome.run_id)), None


def _only(loaded: _Loaded, steps: Sequence[StoredStep]) -> _Loaded:
    """The run with only ``steps`` (in that order) and their requests."""
    run, records = loaded
    keep = {s.index for s in steps}
    return dataclasses.replace(run, steps=tuple(steps)), [r for r in records if r.step in keep]


def _shared_loads(base: StoredRun, new: StoredRun) -> list[tuple[str, list[StoredStep], list[StoredStep]]]:
    """The loads both runs ran, in the baseline's order: their short form and each run's steps (trials) of it."""
    theirs = load_groups(new)
    out = []
    for load, steps in load_groups(base):
        match = next((n_steps for n_load, n_steps in theirs if load is not None and n_load == load), None)
        if match is not None:
            out.append((_short(steps[0]), steps, match))
    return out


def _short(step: StoredStep) -> str:
    return step.load.short() if step.load is not None else f"step {step.index}"


def _compared(base: _Loaded, new: _Loaded, base_steps: Sequence[StoredStep],
              new_steps: Sequence[StoredStep]) -> tuple[dict[int, dict[str, MetricVerdict]], list[str]]:
    """NEW against BASE over the given steps, loads paired in order: the verdicts of each load compared, by the
    index of its first step in BASE, and the notes (what differs between the runs, what was not compared)."""
    b_run, b_records = _only(base, base_steps)
    n_run, n_records = _only(new, new_steps)
    try:
        found = compare_runs(b_run, n_run, b_records, n_records, force=True)
    except ConfigError as exc:
        return {}, [str(exc)]
    verdicts = {step.index: {x.key: MetricVerdict.of(x) for x in step.metrics} for step in found.steps}
    return verdicts, [f"differs from the baseline: {u}" for u in found.unlike] + list(found.notes)


def _answer_steps(run: StoredRun) -> list[StoredStep] | None:
    """A find-max run's answer: the steps (trials) of the highest load that met the objectives; None for a
    sweep, and for a search that found no such load."""
    search = findmax.outcome(run.spec, [(s.index, s.load, s.summary) for s in run.steps])
    if search is None or search.best is None:
        return None
    step = next((p.step for p in search.probes if p.passed and p.value == search.best), None)
    chosen = next((s for s in run.steps if s.index == step), None)
    return [s for s in run.steps if chosen is not None and s.load == chosen.load] or None


def _headline_steps(base: StoredRun, new: StoredRun) -> tuple[str, list[StoredStep], list[StoredStep]] | None:
    """The headline comparison's load and each run's steps: the find-max answers, else the baseline's last
    load that NEW ran too."""
    b_answer, n_answer = _answer_steps(base), _answer_steps(new)
    if b_answer and n_answer:
        b_load, n_load = _short(b_answer[0]), _short(n_answer[0])
        label = f"find-max answer {n_load}" + (f" (baseline {b_load})" if b_load != n_load else "")
        return label, b_answer, n_answer
    shared = _shared_loads(base, new)
    return shared[-1] if shared else None


def _against_baseline(base: _Loaded, new: _Loaded) -> dict[str, Any]:
    """The fields of a `VariantAnswer` that compare NEW with the baseline: the headline, its verdicts, every
    shared load's, the notes. A variant whose headline is not the baseline's (it did not run the baseline's
    heaviest load) is not ranked: its values are not of the same load as the others'."""
    shared = _shared_loads(base[0], new[0])
    found, notes = _compared(base, new, [s for _, b, _ in shared for s in b], [s for _, _, n in shared for s in n])
    by_load = tuple((label, found[b[0].index]) for label, b, _ in shared if b[0].index in found)
    head = _headline_steps(base[0], new[0])
    if head is None:
        return {"loads": by_load, "notes": (*notes, "no load in common with the baseline: nothing compared")}
    label, b_steps, n_steps = head
    if b_steps[0].index in found and label == _short(b_steps[0]):
        verdicts: Mapping[str, MetricVerdict] = found[b_steps[0].index]
    else:
        at, more = _compared(base, new, b_steps, n_steps)
        verdicts = next(iter(at.values()), {})
        notes += [m for m in more if m not in notes and not m.startswith("differs from the baseline: load")]
    if not verdicts:
        return {"loads": by_load, "notes": tuple(notes)}
    ranked = tuple(s.index for s in b_steps) == _baseline_headline(base[0])["headline_steps"]
    if not ranked:
        notes.append(f"compared at {label}, not at the baseline's {_baseline_headline(base[0])['headline']}: "
                     "not ranked for the best per objective")
    return {"headline": label, "headline_steps": tuple(s.index for s in n_steps), "verdicts": verdicts,
            "loads": by_load, "notes": tuple(notes), "ranked": ranked}


def _baseline_headline(base: StoredRun) -> dict[str, Any]:
    """The baseline's own headline: its find-max answer, else its last load."""
    groups = load_groups(base)
    steps = _answer_steps(base) or (groups[-1][1] if groups else [])
    label = ("find-max answer " if _answer_steps(base) else "") + (_short(steps[0]) if steps else "")
    return {"headline": label or None, "headline_steps": tuple(s.index for s in steps)}


def _memory(run: StoredRun, outcome: VariantOutcome | None) -> tuple[float | None, str]:
    """The most memory the run's engine used, and where that comes from: the GPUs' memory in use (all of them
    together, the most of any step) where the run read its GPUs; else the engine's peak resident memory as the
    tune read it (`tokometer.engines.peak_memory`); else the engine's own report (``peak_memory_bytes`` in its
    identity); else None and why."""
    per_step = [sum(float(g.get("memory_used_max_bytes") or 0) for g in step.gpu) for step in run.steps if step.gpu]
    if any(per_step):
        return max(per_step), "GPU memory in use, the most of any step (all GPUs)"
    if outcome is not None and outcome.peak_memory_bytes:
        return float(outcome.peak_memory_bytes), outcome.peak_memory_note or "the engine's peak resident memory"
    reported = run.engine.facts.get("peak_memory_bytes") if run.engine is not None else None
    if isinstance(reported, (int, float)) and not isinstance(reported, bool) and reported > 0:
        return float(reported), "the engine's peak memory, as it reported it"
    why = outcome.peak_memory_note if outcome is not None and outcome.peak_memory_note else "the engine reported none"
    return None, f"no memory reading: the run read no GPU and {why}"


def _estimate(run: StoredRun, records: Sequence[RequestRecord]) -> tuple[Mapping[str, Any] | None, str]:
    """What ``estimate`` says the hardware allows for the run (`tokometer.tune.hardware.allowed_for`: its
    figures and their ``line``), or None and why it cannot say."""
    from tokometer.tune.hardware import allowed_for

    found = allowed_for(run, records)
    if "reason" in found and "line" not in found:
        return None, str(found["reason"])
    return found, ""


_SPEED: Mapping[Word, str] = {"better": "faster", "worse": "slower", "no change": "no faster",
                              "cannot decide": "speed within noise"}
_QUALITY: Mapping[str, str] = {"same": ", answers the same", "close": ", answers mostly the same",
                               "different": " but different", "worse": " but less accurate",
                               "better": " and more accurate"}
"""`tokometer.quality.verdict`'s kinds as they read after the speed."""


def quality_line(speed: Word | None, quality: Mapping[str, Any] | None) -> str:
    """A weight-changing variant's speed and quality in a few words: "faster but different", "faster, answers
    the same" (``quality``: `tokometer.tune.quality.quality_against_baseline`'s figures: its ``verdict``, one of
    `tokometer.quality.verdict`'s kinds, and ``agreement``, or its ``error``; ``speed``: the throughput verdict)."""
    said = _SPEED[speed] if speed is not None else "speed not compared"
    if not quality:
        return f"{said}; quality not measured"
    verdict = quality.get("verdict")
    kind = verdict.get("kind") if isinstance(verdict, Mapping) else verdict
    if not isinstance(kind, str) or kind not in _QUALITY:
        why = quality.get("error") or quality.get("reason")
        return f"{said}; quality not judged" + (f": {why}" if why else "")
    agreement = quality.get("agreement", quality.get("exact_match"))
    share = (f" ({agreement:.0%} of answers identical)" if isinstance(agreement, (int, float)) and kind != "same"
             else "")
    return f"{said}{_QUALITY[kind]}{share}"


# -- the best per objective -----------------------------------------------------------------------------------

Candidate = tuple[str, float | None, Word | None]
"""A variant's name, its value at the headline and its word against the baseline (None for the baseline)."""


def _listed(names: Sequence[str]) -> str:
    return ", ".join(names)


def pick_best(objective: Objective, metric: str, unit: str, baseline: str, candidates: Sequence[Candidate],
              between: Callable[[str, str], Word | None], reasons: Mapping[str, str] | None = None) -> Best:
    """The best of ``candidates`` on ``metric`` (see the module docstring); ``between(a, b)``: the word of
    variant ``a`` against variant ``b`` compared directly (None when they cannot be); ``reasons``: why a
    variant's verdict against the baseline is what it is (said when it stops a winner)."""
    why = reasons or {}
    values = [c for c in candidates if c[1] is not None]
    head = (objective.key, objective.label, metric, unit)
    if len(values) < 2 or not any(name == baseline for name, _, _ in values):
        return Best(*head, None, None, False, "cannot decide: the baseline and at least one variant must be measured")
    ranked = sorted(values, key=lambda c: -(c[1] or 0.0) if objective.higher_is_better else (c[1] or 0.0))
    name, value, word = ranked[0]
    if name == baseline:
        rivals = [n for n, _, w in values if n != baseline and w != "worse"]
        if not rivals:
            return Best(*head, name, value, True, f"{baseline}: every variant is worse")
        because = next((f" ({why[r]})" for r in rivals if why.get(r)), "")
        return Best(*head, None, value, False, f"cannot decide: {baseline} has the best value, but "
                    f"{_listed(rivals)} cannot be told apart from it{because}", (baseline, *rivals))
    if word != "better":
        because = f" ({why[name]})" if why.get(name) else ""
        return Best(*head, None, value, False, f"cannot decide: {name} has the best value, but against the "
                    f"baseline it is '{word}'{because}", (name, baseline))
    rivals = [n for n, _, w in values if n not in (name, baseline) and w == "better"]
    undecided = [r for r in rivals if between(name, r) != "better"]
    if undecided:
        return Best(*head, None, value, False, f"cannot decide between {name} and {_listed(undecided)}: each is "
                    "better than the baseline, and they cannot be told apart", (name, *undecided))
    beaten = f" and than {_listed(rivals)}" if rivals else ""
    return Best(*head, name, value, True, f"{name}: better than the baseline{beaten}")


def _memory_best(answers: Sequence[VariantAnswer], tie: float = MEMORY_TIE) -> Best:
    """The variant that used least memory; "cannot decide" when another is within ``tie`` of it (`MEMORY_TIE`,
    or the baseline's own two readings' difference where larger: `tokometer.tune.noise.memory_tie`)."""
    objective = OBJECTIVES[-1]
    head = (objective.key, objective.label, None, "bytes")
    read = sorted(((a.memory, a.name) for a in answers if a.memory is not None), key=lambda m: m[0])
    if len(read) < 2:
        return Best(*head, None, None, False, "cannot decide: fewer than two variants have a memory reading")
    lowest, name = read[0]
    close = [n for m, n in read[1:] if m <= lowest * (1 + tie)]
    if close:
        return Best(*head, None, lowest, False, f"cannot decide between {name} and {_listed(close)}: within "
                    f"{tie:.0%} of each other", (name, *close))
    return Best(*head, name, lowest, True, f"{name}: least memory (one reading a run)")


def _candidates(answers: Sequence[VariantAnswer], metric: str) -> tuple[list[Candidate], str]:
    """Each measured variant's value on ``metric`` at its headline, the baseline's from the comparisons; and
    the metric's unit."""
    compared = [a.verdicts[metric] for a in answers if a.ranked and metric in a.verdicts]
    unit = compared[0].unit if compared else ""
    base_value = next((x.base for x in compared if x.base is not None), None)
    out: list[Candidate] = []
    for a in answers:
        if a.variant.is_baseline:
            out.append((a.name, base_value, None))
        elif a.ranked and metric in a.verdicts:
            out.append((a.name, a.verdicts[metric].new, a.verdicts[metric].word))
    return out, unit


def _throughput_label(answers: Sequence[VariantAnswer], throughput: str) -> str:
    """What the throughput objective was judged on: goodput under the SLO, the find-max answer, or the heaviest
    load's output tok/s."""
    if throughput == "goodput":
        return "throughput under the SLO (goodput)"
    if any((a.headline or "").startswith("find-max answer") for a in answers):
        return "throughput under the SLO (output tok/s at the find-max answer)"
    return "throughput (output tok/s at the heaviest load; no SLO given)"


def _bests(answers: Sequence[VariantAnswer], throughput: str, loaded: Mapping[int, _Loaded],
           floor: NoiseFloor) -> tuple[Best, ...]:
    """The best variant for each of `OBJECTIVES`, every verdict judged against the noise floor."""
    by_name = {a.name: a for a in answers}

    def steps(a: VariantAnswer) -> list[StoredStep]:
        return [s for s in loaded[a.variant.index][0].steps if s.index in a.headline_steps]

    out = []
    for objective in OBJECTIVES:
        if objective.metric is None:
            out.append(_memory_best(answers, memory_tie(*floor.memory)))
            continue
        metric = throughput if objective.key == "throughput" else objective.metric
        if objective.key == "throughput":
            objective = dataclasses.replace(objective, label=_throughput_label(answers, throughput))

        def between(new: str, base: str, metric: str = metric) -> Word | None:
            a, b = by_name[new], by_name[base]
            found, _ = _compared(loaded[b.variant.index], loaded[a.variant.index], steps(b), steps(a))
            verdicts = apply_floors(next(iter(found.values()), {}), floor.headline, floor.why_none)
            verdict = verdicts.get(metric)
            return verdict.word if verdict is not None else None

        candidates, unit = _candidates(answers, metric)
        reasons = {a.name: a.verdicts[metric].reason or "" for a in answers if a.ranked and metric in a.verdicts}
        out.append(pick_best(objective, metric, unit, answers[0].name, candidates, between, reasons))
    return tuple(out)


# -- the front, and the whole ----------------------------------------------------------------------------------


def _front(answers: Sequence[VariantAnswer], loaded: Mapping[int, _Loaded]) -> TuneFront:
    """Every load of every finished variant on the speed-against-throughput plane, and the front."""
    runs = [(a.name, front_loads(*loaded[a.variant.index], name=a.name)) for a in answers
            if a.variant.index in loaded]
    if not runs:
        return TuneFront((), (), "total", "No variant finished: no front.")
    basis, rows = pareto.points([r for _, r in runs])
    flat = [(name, p) for (name, _), row in zip(runs, rows, strict=True) for p in row if p is not None]
    pts = [p for _, p in flat]
    points = tuple(FrontPoint(name, p, s.on_front, s.dominated_by)
                   for (name, p), s in zip(flat, pareto.standings(pts), strict=True))
    return TuneFront(points, tuple(pareto.front(pts)), basis, pareto.basis_note(basis, [r for _, r in runs]))


def _floored(fields: dict[str, Any], floor: NoiseFloor) -> dict[str, Any]:
    """The verdicts of `_against_baseline`'s ``fields`` judged against the noise floor (`tokometer.tune.noise`):
    the headline's against the floor at the baseline's headline (or at the load compared, for a variant not
    ranked), each load's against the floor at that load."""
    out = dict(fields)
    if "verdicts" in fields:
        drift = floor.headline if fields.get("ranked") else floor.loads.get(str(fields.get("headline")))
        out["verdicts"] = apply_floors(fields["verdicts"], drift, floor.why_none)
    out["loads"] = tuple((label, apply_floors(verdicts, floor.loads.get(label), floor.why_none))
                         for label, verdicts in fields.get("loads", ()))
    return out


def _variant(variant: Variant, outcome: VariantOutcome | None, loaded: _Loaded | None, why: str | None,
             base: _Loaded | None, throughput: str, floor: NoiseFloor) -> VariantAnswer:
    """One variant judged against the baseline's run (``base``) and the noise floor."""
    if loaded is None:
        return VariantAnswer(variant, outcome, notes=(why,) if why else ())
    run = loaded[0]
    memory, memory_note = _memory(run, outcome)
    estimate, estimate_note = _estimate(*loaded)
    if variant.is_baseline:
        fields = _baseline_headline(run)
    elif base is None:
        fields = {"notes": ("the baseline has no run: nothing to compare against",)}
    else:
        fields = _floored(_against_baseline(base, loaded), floor)
    quality = None
    if variant.changes_weights:
        verdict = fields.get("verdicts", {}).get(throughput)
        quality = quality_line(verdict.word if verdict is not None else None, outcome.quality if outcome else None)
    return VariantAnswer(variant, outcome, run, memory=memory, memory_note=memory_note, estimate=estimate,
                         estimate_note=estimate_note, quality_text=quality, **fields)


def _noise_floor(record: TuneRecord, base: _Loaded | None, store: Any) -> NoiseFloor:
    """The baseline's second run (`TuneRecord.baseline_again`) against its first: the tune's noise floor."""
    again = record.baseline_again
    if again is None:
        return NoiseFloor(None, "not run", {}, {}, note="the baseline has not run a second time (a tune cut short, "
                          "or saved before every tune ran it twice: --resume runs it)")
    loaded, why = _load(store, again)
    if loaded is None or base is None:
        said = f"{again.status} ({why})" if why and why != again.status else again.status
        reason = f"the baseline's second run: {said}" if loaded is None else "the baseline's first run is missing"
        return NoiseFloor(again.run_id, again.status, {}, {}, note=reason)
    fields = _against_baseline(base, loaded)
    headline = fields.get("verdicts", {}) if fields.get("ranked") else {}
    memory = (_memory(base[0], record.outcome_of(record.baseline))[0], _memory(loaded[0], again)[0])
    note = "" if headline else "the baseline's two runs could not be compared at its headline load"
    return NoiseFloor(again.run_id, again.status, headline, dict(fields.get("loads", ())), memory, note)


def judge(record: TuneRecord, store: Any) -> TuneAnswer:
    """Each variant of ``record`` against its baseline, the best per objective and the front, from the runs in
    ``store`` (a `tokometer.store.ResultStore`: ``run(id)`` and ``load_records(id)``)."""
    loaded: dict[int, _Loaded] = {}
    why: dict[int, str | None] = {}
    for variant in record.variants:
        found, why[variant.index] = _load(store, record.outcome_of(variant))
        if found is not None:
            loaded[variant.index] = found
    base = loaded.get(record.baseline.index)
    has_slo = base is not None and not base[0].spec.slo_limits.empty and base[0].spec.find_max is None
    throughput = "goodput" if has_slo else "output_throughput"
    floor = _noise_floor(record, base, store)
    answers = tuple(_variant(v, record.outcome_of(v), loaded.get(v.index), why[v.index], base, throughput, floor)
                    for v in record.variants)
    return TuneAnswer(answers, _bests(answers, throughput, loaded, floor), _front(answers, loaded), throughput,
                      floor)
