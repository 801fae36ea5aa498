"""``bench --find-max``: the highest load that still meets the objectives (``--slo``).

**Objectives** (`parse_objectives`): ``ttft_p99=2s,tpot_p50=50ms,goodput_share=0.9``. The names are the
metric registry's (`tokometer.metrics.registry.objective`). A percentile objective (``ttft``, ``tpot``,
``itl`` or ``e2e`` at ``p50``, ``p90``, ``p95``, ``p99`` or ``p99.9``) is met when the step's percentile is at
or below the limit (a bare number is in milliseconds); ``goodput_share=F`` when at least the share F of the
measured requests completed within every per-request objective (``--slo-*-ms``, or else the limits of the
ttft, tpot and e2e objectives taken per request); ``error_rate=P%`` when at most P % of them failed (1 % unless
given). ``goodput=`` and ``errors=``, the names of these two before ``goodput`` meant req/s everywhere, are
still read (a saved run's spec has them).

**Probes** (`judge`): each probe is one step of the run. It passes when every objective is met and the
server kept up. Under a request rate, a server that does not keep up is *overloaded*, by either of the two
tests of `tokometer.metrics.overload` (each one-sided at 1 %): its queue grew (the Theil–Sen slope of TTFT
against send time has its lower confidence bound above zero) or it finished clearly fewer requests than were
sent (completions over their span against sends over theirs, an exact test of two Poisson rates). Such a probe
misses whatever the objectives say: a rate the server cannot sustain is never an answer (a longer step would
miss any latency objective). A concurrency probe is judged by the concurrency it reached (`reach_problem`): one whose
step sent fewer requests than its slots, or whose mean number in flight stayed under half of them, misses and
is said to be *not reached*; the search never probes above what ``-n`` (plus ``--warmup``) can hold in flight
(`concurrency_ceiling`), and ``bench`` refuses a first probe above it.

A percentile objective's verdict is **uncertain** when the 95 % interval of the percentile (from order
statistics, `tokometer.metrics.order_stats`) holds the limit: a p99 of 100 requests has no upper end at all,
since a p99 is bounded from above only from 368 requests. The verdict then follows the point estimate, and
`Probe.uncertain` says so with the requests a probe would need (`requests_needed`).

**Search** (`next_probe`): start at the first ``--rate``/``--concurrency`` value (1 when none is given); while
probes pass, double the load; once one fails, bisect between the highest pass below the lowest failure and
that failure, until they are within `RESOLUTION` of each other (rates) or adjacent (concurrency). A first
probe that fails halves the load instead (rates only; concurrency 1 is the floor). At most `MAX_PROBES`.

**Ramp search** (``--search ramp``; `scan_ramp`, `next_confirm`): one step ramps the load from ``--ramp-from`` to
the ``-r``/``-c`` value over ``--ramp-time`` and ends there; its time slices (`tokometer.benchmark.ramp_search`)
are judged by `judge`, each as a probe at its mean load; the ramp fails at the first slice that misses and whose
next slice misses too (a lone miss is noise: above the limit the queue keeps growing). The first steady
probe (`RampScan.candidate`) is the rate the server sustained in that slice when its queue grew there (the
overload test's ``sustained_rps``), else the last good slice's load. While no steady probe has met, the next is
the next good slice's load below the lowest miss (else half of it); then bisection between the highest steady pass
and the lowest failure, the ramp's standing miss counted as one (`RampScan.miss_loads`: the failing slice's load and
those of the later slices that missed, for concurrency at the most slots open in each; a steady probe that meets
at or above one overrules it), until `RESOLUTION` (or adjacent). Where the bracket's top is then a ramp's miss, not
a steady failure, the next steady probe is at its load: it confirms the miss, or meets and the search goes on above
it. At most `ramp_search.MAX_CONFIRMS` steady probes. The answer is always a steady probe that met; the ramp only
points.

**Answer** (`outcome`): the highest passing load below the lowest failing one; the limit lies between the two
(the bracket; in a ramp search the ramp's standing miss counts as a failure, never its slices as passes), and
the answer names the probes whose verdicts were uncertain. It is recomputed from the
saved steps (their load and summary) and the saved spec, so a stored run carries its answer without a column
of its own, and the report and the console agree by construction.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from tokometer.benchmark.ramp_search import MAX_CONFIRMS, MIN_SLICE_REQUESTS, ramp_slices
from tokometer.load.profiles import LoadStep
from tokometer.load.ramp import Ramp
from tokometer.metrics import registry
from tokometer.metrics.order_stats import bounded_from
from tokometer.metrics.summary import SLO, StepSummary
from tokometer.runs.stored_spec import StoredSpec
from tokometer.store.runs import StoredRun
from tokometer.util.errors import ConfigError
from tokometer.util.limits import MAX_SECONDS
from tokometer.util.shown import quoted
from tokometer.util.units import duration_seconds

__all__ = [
    "MAX_PROBES",
    "RESOLUTION",
    "FindMax",
    "Objective",
    "Probe",
    "RampScan",
    "SliceVerdict",
    "concurrency_ceiling",
    "judge",
    "next_confirm",
    "next_probe",
    "outcome",
    "parse_objectives",
    "per_request_slo",
    "reach_problem",
    "run_outcome",
    "scan_ramp",
]

Kind = Literal["rate", "concurrency"]
Search = Literal["bisect", "ramp"]

MAX_PROBES = 16
REACHED_SHARE = 0.5
"""A concurrency probe reached its concurrency when the mean number in flight over its step was at least this
share of it (the first wave and the drain lower the mean of a short step: half is clear of both)."""
RESOLUTION = 0.05
"""Rates: the search stops when the highest pass and the lowest failure are within 5 % of the pass."""
_LEGACY_SHARE, _LEGACY_GROWTH = 0.9, 2.0
"""Summaries stored before the overload tests: completion rate under 90 % of the send rate and TTFT growth
above 2x."""
DEFAULT_ERRORS = 0.01

_OLD_NAMES = {"goodput": "goodput_share", "errors": "error_rate"}
"""Objective names of runs saved before one vocabulary, read as today's."""
_PER_REQUEST = frozenset(f.name for f in fields(SLO))
"""The distributions a per-request limit (``slo_ttft_ms``) exists for: ``ttft_ms``, ``tpot_ms``, ``e2e_ms``."""


@dataclass(frozen=True)
class Objective:
    """One objective of ``--slo``."""

    name: str
    """``ttft_p99``, ``goodput_share`` or ``error_rate``."""
    limit: float
    """Milliseconds for a percentile; a share (0.9) for goodput and errors."""

    @property
    def metric(self) -> str | None:
        """The summary distribution a percentile objective reads (``ttft_ms``); None for the others."""
        found = registry.objective(self.name)
        return found[0].name if found is not None and found[1] is not None else None

    @property
    def percentile_key(self) -> str:
        """The percentile a percentile objective names (``p99``)."""
        found = registry.objective(self.name)
        assert found is not None and found[1] is not None, self.name
        return found[1]

    def describe(self) -> str:
        if self.name == "goodput_share":
            return f"goodput_share >= {100 * self.limit:g}%"
        if self.name == "error_rate":
            return f"error_rate <= {100 * self.limit:g}%"
        return f"{self.name} <= {_ms(self.limit)}"


def _ms(value: float) -> str:
    return f"{value / 1000:g} s" if value >= 1000 else f"{value:g} ms"


def parse_objectives(text: str) -> list[Objective]:
    """``"ttft_p99=2s,tpot_p50=50ms,goodput_share=0.9"`` -> objectives (``error_rate=1%`` added unless given);
    `ConfigError` naming the part that is wrong."""
    out: dict[str, Objective] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name, sep, value = (x.strip() for x in part.partition("="))
        if not sep:
            raise ConfigError(f"--slo: {part!r} is not NAME=LIMIT "
                              "(write e.g. ttft_p99=2s,tpot_p50=50ms,goodput_share=0.9)")
        found = registry.objective(_OLD_NAMES.get(name, name))
        if found is not None and found[1] is not None:  # a percentile
            seconds = duration_seconds(value, default_unit="ms")
            if seconds is None or seconds <= 0:
                raise ConfigError(f"--slo: {quoted(value)} for {name} is not a time (write e.g. {name}=2s or 500ms)")
            if seconds > MAX_SECONDS:
                raise ConfigError(f"--slo: {name} is longer than a week ({MAX_SECONDS:g} s), the longest a limit may "
                                  "be")
            out[name] = Objective(name, seconds * 1000.0)
        elif found is not None and found[0].unit == "share":
            share = _share(value)
            if share is None or not 0 <= share <= 1:
                raise ConfigError(f"--slo: {value!r} for {name} is not a share (write e.g. {name}=0.9 or 90%)")
            out[found[0].short] = Objective(found[0].short, share)
        else:
            raise ConfigError(f"--slo: unknown objective {name!r}: use {_KNOWN} (ttft_p99=2s), "
                              "goodput_share=SHARE or error_rate=PERCENT")
    if not any(o.name != "error_rate" for o in out.values()):
        raise ConfigError("--slo: give at least one latency or goodput objective (e.g. ttft_p99=2s)")
    out.setdefault("error_rate", Objective("error_rate", DEFAULT_ERRORS))
    return list(out.values())


def _or(words: Sequence[str]) -> str:
    return ", ".join(words[:-1]) + " or " + words[-1]


_KNOWN = (f"{_or([m.short for m in registry.percentile_metrics()])} with "
          f"{_or(registry.LATENCY_PERCENTILES)}")
"""The percentile objectives, in words: ``ttft, tpot, itl or e2e with p50, p90, p95, p99 or p99.9``."""


def _share(text: str) -> float | None:
    try:
        return float(text[:-1]) / 100.0 if text.endswith("%") else float(text)
    except ValueError:
        return None


def per_request_slo(objectives: Sequence[Objective]) -> dict[str, float]:
    """The ``slo_*_ms`` per-request limits a goodput objective counts against when none are given: the
    limits of the ttft, tpot and e2e objectives (the tightest of each)."""
    out: dict[str, float] = {}
    for o in objectives:
        metric = o.metric
        key = f"slo_{metric}" if metric in _PER_REQUEST else None
        if key is not None:
            out[key] = min(out.get(key, math.inf), o.limit)
    return out


@dataclass(frozen=True)
class Probe:
    """One probe of the search, judged."""

    value: float
    """The load probed: requests/s, or concurrency."""
    step: int
    """The run's step index."""
    passed: bool
    misses: tuple[str, ...] = ()
    """Each objective missed (``ttft_p99 2,340 ms > 2 s``), and overload (``overloaded: TTFT rose ...``)."""
    saturated: bool = False
    """The server did not keep up (overloaded); the JSON keeps this name."""
    observed: Mapping[str, float | None] = field(default_factory=dict)
    """Each objective's value in the probe (ms, or a share)."""
    uncertain: tuple[str, ...] = ()
    """Each percentile objective whose 95 % interval holds its limit, in words; empty when a sure miss (overload,
    another objective) settles the verdict anyway."""
    requests_needed: int | None = None
    """About how many requests would settle the uncertain verdicts (None: none uncertain)."""
    overload: Mapping[str, Any] | None = None
    """The overload tests as stored (`tokometer.metrics.overload.Overload.to_json`); None untested."""
    unreached: bool = False
    """A concurrency probe whose requests never had its concurrency in flight (`reach_problem`): it misses,
    whatever its latencies, and the answer says it was not reached rather than that it failed."""


def load_value(load: LoadStep, kind: Kind) -> float | None:
    """The searched load of a step: its rate or its concurrency; None when the step is of the other kind."""
    if kind == "rate":
        return load.rate if load.mode == "rate" else None
    return float(load.concurrency) if load.mode == "concurrency" else None


def _observed(summary: StepSummary, o: Objective) -> float | None:
    found = registry.objective(o.name)
    value = getattr(summary, found[0].attribute or found[0].name) if found is not None else None
    if found is not None and found[1] is not None:
        return value.stat(found[1]) if value is not None else None
    return None if value is None else float(value)


def _doubt(summary: StepSummary, o: Objective, seen: float) -> tuple[str, int] | None:
    """For a percentile objective whose interval holds its limit: (why, requests needed); else None."""
    assert o.metric is not None
    bounds = (summary.percentile_ci or {}).get(o.metric, {}).get(o.percentile_key)
    if not bounds:
        return None
    low, high = bounds
    met = seen <= o.limit
    if (met and high is not None and high <= o.limit) or (not met and low is not None and low > o.limit):
        return None
    n = int(getattr(summary, o.metric).count)
    q = float(o.percentile_key[1:]) / 100.0
    needed = bounded_from(q)
    if low is not None and high is not None and seen != o.limit:  # the interval narrows as 1 / sqrt(n)
        needed = max(needed, math.ceil(n * ((high - low) / (2 * abs(seen - o.limit))) ** 2))
    span = f"{_ms(low) if low is not None else 'unbounded'} to {_ms(high) if high is not None else 'unbounded'}"
    return (f"{o.name} {seen:,.0f} ms of {n} requests, 95% interval {span} holds the limit {_ms(o.limit)}",
            needed)


def reach_problem(summary: StepSummary, concurrency: float) -> str | None:
    """Why a concurrency probe did not reach its concurrency, or None when it did: it sent fewer requests than
    its slots (warm-up included: so many were never in flight at once), or the mean number in flight over the
    step (`StepSummary.achieved_concurrency`) stayed under `REACHED_SHARE` of it."""
    sent = summary.requests_completed + summary.requests_failed + summary.requests_warmup
    if sent < concurrency:
        return (f"not reached: {sent} requests sent, so never {concurrency:g} in flight (raise -n or give "
                "--duration)")
    if 0 < summary.achieved_concurrency < REACHED_SHARE * concurrency:  # 0: a summary saved without it
        return (f"not reached: {summary.achieved_concurrency:.3g} in flight on average, under "
                f"{100 * REACHED_SHARE:g}% of {concurrency:g}")
    return None


def _overloaded(summary: StepSummary) -> str | None:
    """Why the server did not keep up, or None when it did (or the step was not tested)."""
    test = summary.overload
    if test is not None:
        return test.why() if test.overloaded else None
    sent, done, growth = summary.send_rate_rps, summary.completion_rate_rps, summary.ttft_growth
    if sent and done is not None and growth is not None and done < _LEGACY_SHARE * sent and growth > _LEGACY_GROWTH:
        return f"finished {float(done):.3g} req/s of {float(sent):.3g} sent, TTFT grew {float(growth):.1f}x"
    return None


def judge(summary: StepSummary, load: LoadStep, objectives: Sequence[Objective], step: int = 0,
          kind: Kind = "rate", *, reach: bool = True) -> Probe:
    """One probe (a step's summary) against the objectives; see the module docstring. ``reach``: whether a
    concurrency probe is held to the concurrency it reached (a steady step; not a ramp's slice, whose load is
    the ramp's target)."""
    value = load_value(load, kind) or 0.0
    misses: list[str] = []
    observed: dict[str, float | None] = {}
    doubts: list[tuple[str, int, bool]] = []
    for o in objectives:
        seen = _observed(summary, o)
        observed[o.name] = seen
        if seen is None:
            misses.append(f"{o.name}: not measured")
        elif o.name == "goodput_share" and seen < o.limit:
            misses.append(f"goodput_share {100 * seen:.0f}% < {100 * o.limit:g}%")
        elif o.name == "error_rate" and seen > o.limit:
            misses.append(f"error_rate {100 * seen:.1f}% > {100 * o.limit:g}%")
        elif o.metric is not None and seen > o.limit:
            misses.append(f"{o.name} {seen:,.0f} ms > {_ms(o.limit)}")
        if seen is not None and o.metric is not None and (doubt := _doubt(summary, o, seen)) is not None:
            doubts.append((*doubt, seen > o.limit))
    why = _overloaded(summary) if load.mode == "rate" else None
    if why is not None:
        misses.append(f"overloaded: {why}")
    steady = reach and load.mode == "concurrency" and kind == "concurrency"
    short = reach_problem(summary, value) if steady else None
    if short is not None:
        misses.append(short)
    if len(misses) > sum(1 for d in doubts if d[2]):  # a sure miss settles the verdict, whatever the doubts
        doubts = []
    return Probe(value=value, step=step, passed=not misses, misses=tuple(misses), saturated=why is not None,
                 observed=observed, uncertain=tuple(d[0] for d in doubts),
                 requests_needed=max((d[1] for d in doubts), default=None),
                 overload=summary.overload.to_json() if summary.overload is not None else None,
                 unreached=short is not None)


def _bounds(history: Sequence[tuple[float, bool]]) -> tuple[float | None, float | None]:
    """(highest pass below the lowest failure, lowest failure)."""
    fails = [v for v, ok in history if not ok]
    hi = min(fails) if fails else None
    passes = [v for v, ok in history if ok and (hi is None or v < hi)]
    return (max(passes) if passes else None), hi


def next_probe(kind: Kind, history: Sequence[tuple[float, bool]], start: float, *,
               resolution: float = RESOLUTION, max_probes: int = MAX_PROBES,
               ceiling: float | None = None) -> float | None:
    """The next load to probe after ``history`` ((load, passed) in order), or None when the search is done;
    never above ``ceiling`` (the most a probe can reach: `concurrency_ceiling`)."""
    if not history:
        return start
    if len(history) >= max_probes:
        return None
    lo, hi = _bounds(history)
    if hi is None:  # every probe passed: grow
        assert lo is not None
        grown = float(max(2 * int(lo), int(lo) + 1)) if kind == "concurrency" else 2 * lo
        if ceiling is not None and grown > ceiling:
            return float(ceiling) if lo < ceiling else None
        return grown
    if lo is None:  # every probe failed: shrink
        return _shrink(kind, hi)
    return _between(kind, lo, hi, resolution)


def _shrink(kind: Kind, hi: float) -> float | None:
    """Half the lowest failure (concurrency 1 is the floor: None)."""
    if kind == "concurrency":
        return None if hi <= 1 else float(max(1, int(hi) // 2))
    return hi / 2


def _between(kind: Kind, lo: float, hi: float, resolution: float) -> float | None:
    """The midpoint of a pass and a failure, or None once they are adjacent (concurrency) or within ``resolution``."""
    if kind == "concurrency":
        return None if hi - lo <= 1 else float((int(lo) + int(hi)) // 2)
    return None if (hi - lo) / lo <= resolution else (lo + hi) / 2


@dataclass(frozen=True)
class SliceVerdict:
    """One time slice of a ramp search's ramp step, judged (`tokometer.benchmark.ramp_search`)."""

    index: int
    start_s: float
    end_s: float
    requests: int
    probe: Probe
    """The slice judged as a probe at its load (its ``step`` is the ramp step's)."""

    def describe(self) -> str:
        what = "; ".join(self.probe.misses) if self.probe.misses else "met"
        return (f"slice {self.index} ({self.start_s:g}-{self.end_s:g} s, {self.probe.value:g}, "
                f"{self.requests} requests): {what}")


@dataclass(frozen=True)
class RampScan:
    """The ramp phase of ``--search ramp``: the ramp step and its slices judged up to the first that missed."""

    step: int
    ramp: Ramp
    kind: Kind
    slices: tuple[SliceVerdict, ...]

    @property
    def failing(self) -> SliceVerdict | None:
        """The first slice that missed and whose next judged slice missed too (or that is the last judged one);
        None when there is none. Above the limit a queue keeps growing, so a real miss lasts; a lone miss that
        the next slice does not repeat (a few requests' noise, TTFT rising as a batch fills) is not the limit."""
        for k, v in enumerate(self.slices):
            if not v.probe.passed and (k + 1 == len(self.slices) or not self.slices[k + 1].probe.passed):
                return v
        return None

    @property
    def good(self) -> tuple[SliceVerdict, ...]:
        """The slices before the failing one that met."""
        fail = self.failing
        before = self.slices if fail is None else self.slices[:self.slices.index(fail)]
        return tuple(v for v in before if v.probe.passed)

    @property
    def miss_load(self) -> float | None:
        """The load the first failing slice counts as a miss at (None: none failed; `_miss_at`)."""
        fail = self.failing
        return None if fail is None else self._miss_at(fail)

    @property
    def miss_loads(self) -> tuple[float, ...]:
        """The loads the ramp's misses count at, from the first failing slice on: that slice's and those of the
        later slices that missed too, rising with the ramp. Each is a pointer, not a verdict: a steady probe that
        meets at or above one overrules it, and the next above becomes the bracket's top (`_ramp_bounds`)."""
        fail = self.failing
        if fail is None:
            return ()
        later = self.slices[self.slices.index(fail):]
        return tuple(sorted({self._miss_at(v) for v in later if not v.probe.passed}))

    def _miss_at(self, verdict: SliceVerdict) -> float:
        """The load a slice that missed counts as a miss at. A rate slice counts at its mean rate; a concurrency
        slice at the most slots open in it (the ramp's target at the slice's end, whole slots): a slice whose mean
        is 8.4 had a 9th slot open for part of it, and the 9th may be what missed, so counting the miss at 8 could
        put the answer below a limit of 8."""
        if self.kind == "rate":
            return verdict.probe.value
        return float(max(verdict.probe.value, math.floor(self.ramp.at(verdict.end_s) + 1e-9)))

    @property
    def candidate(self) -> float:
        """The first steady probe: for a rate whose first failing slice's queue grew, the rate the server sustained
        there (`Overload.sustained_rps`: an estimate of its capacity, finer than the slices' steps); else the load of
        the last good slice, else the ramp's start."""
        fail, sustained = self.failing, self.sustained
        if fail is not None and sustained is not None and 0 < sustained < fail.probe.value:
            return sustained
        if self.good:
            return self.good[-1].probe.value
        return float(max(1, int(self.ramp.start))) if self.kind == "concurrency" else self.ramp.start

    @property
    def sustained(self) -> float | None:
        """The rate the server sustained in the first failing slice, by its queue's growth; None when its queue
        did not grow (or the search is over concurrency)."""
        fail = self.failing
        test = fail.probe.overload if fail is not None and self.kind == "rate" else None
        if not test or not test.get("queue_grew") or not test.get("sustained_rps"):
            return None
        return round(float(test["sustained_rps"]), 3)

    def describe(self) -> str:
        top = f"{self.ramp.start:g} to {self.ramp.end:g}{'/s' if self.kind == 'rate' else ''}"
        head = f"ramp {self.ramp.strategy} {top} over {self.ramp.duration_s:g} s (step {self.step})"
        if not self.slices:
            return f"{head}: no slice had {MIN_SLICE_REQUESTS} requests to judge"
        fail = self.failing
        if fail is None:
            return f"{head}: all {len(self.slices)} judged slices met"
        good = f"last good slice {self.good[-1].index} at {self.good[-1].probe.value:g}" if self.good else \
            "no slice met before it"
        sustained = f", sustained about {self.sustained:g}/s" if self.sustained is not None else ""
        return f"{head}: first lasting miss {fail.describe()}; {good}{sustained}; first steady probe {self.candidate:g}"

    def to_json(self) -> dict[str, Any]:
        fail = self.failing
        return {"step": self.step, "ramp": self.ramp.label(), "candidate": self.candidate,
                "failed_slice": fail.index if fail is not None else None, "summary": self.describe(),
                "slices": [{"index": v.index, "start_s": v.start_s, "end_s": v.end_s, "load": v.probe.value,
                            "requests": v.requests, "passed": v.probe.passed, "misses": list(v.probe.misses),
                            "saturated": v.probe.saturated} for v in self.slices]}


def scan_ramp(summary: StepSummary, load: LoadStep, objectives: Sequence[Objective], step: int, kind: Kind) -> RampScan:
    """The ramp step's slices (`ramp_search.ramp_slices`), each judged by `judge` (`RampScan.failing` reads them)."""
    assert load.ramp is not None
    verdicts = []
    for piece in ramp_slices(summary.time_slices, load.ramp, kind):
        at = (LoadStep("rate", rate=piece.load) if kind == "rate"
              else LoadStep("concurrency", concurrency=int(piece.load)))
        probe = judge(piece.summary, at, objectives, step, kind, reach=False)
        verdicts.append(SliceVerdict(piece.index, piece.start_s, piece.end_s, piece.requests, probe))
    return RampScan(step, load.ramp, kind, tuple(verdicts))


def _ramp_miss(scan: RampScan, history: Sequence[tuple[float, bool]]) -> float | None:
    """The ramp's miss that stands as a failure beside the steady probes: the lowest of `RampScan.miss_loads`
    above every steady probe that met (a steady probe that met at or above a miss overrules it); None when
    there is none."""
    met = max((value for value, passed in history if passed), default=None)
    return next((miss for miss in scan.miss_loads if met is None or miss > met), None)


def _ramp_bounds(scan: RampScan, history: Sequence[tuple[float, bool]]) -> tuple[float | None, float | None]:
    """`_bounds` of the steady probes, the ramp's standing miss (`_ramp_miss`) counted as a failure (never a
    slice as a pass)."""
    miss = _ramp_miss(scan, history)
    return _bounds([*history, *([(miss, False)] if miss is not None else [])])


def next_confirm(scan: RampScan, history: Sequence[tuple[float, bool]], *, resolution: float = RESOLUTION,
                 max_probes: int = MAX_CONFIRMS) -> float | None:
    """The next steady probe of a ramp search after ``history`` ((load, passed) of the steady probes so far), or
    None when done: first the ramp's candidate; while none met, down to the next good slice's load below the
    lowest miss (else half of it); then bisection between the highest pass and the lowest failure, the ramp's
    standing miss counted as one, until within ``resolution`` (or adjacent); and where the bracket's top is
    then the ramp's miss, a steady probe at its load, which the search goes on above if it meets. At most
    ``max_probes`` in all."""
    if not history:
        return scan.candidate
    if len(history) >= max_probes:
        return None
    lo, hi = _ramp_bounds(scan, history)
    if hi is None:  # the ramp never missed (or every miss was overruled) and a steady probe met: nothing above
        return None
    if lo is None:
        gap = 1.0 if scan.kind == "concurrency" else hi * resolution
        lower = [v.probe.value for v in scan.good if v.probe.value <= hi - gap]
        return max(lower) if lower else _shrink(scan.kind, hi)
    between = _between(scan.kind, lo, hi, resolution)
    if between is None and (hi, False) not in history:  # the top is the ramp's miss: confirm it steadily
        return hi
    return between


@dataclass(frozen=True)
class FindMax:
    """A find-max run's answer and its probes."""

    kind: Kind
    objectives: tuple[Objective, ...]
    probes: tuple[Probe, ...]
    best: float | None
    """The highest load that met every objective below the lowest that did not; None if none did."""
    failed_at: float | None
    """The lowest load that missed; None if every probe passed (the search ran out of probes first)."""
    converged: bool
    """The search ended by its own rule (not cut short, nor out of probes while growing)."""
    search: Search = "bisect"
    scan: RampScan | None = None
    """``--search ramp``: the ramp phase; None for a bisection."""
    ceiling: float | None = None
    """The most concurrency a probe could reach (``-n`` plus ``--warmup``, `concurrency_ceiling`); None: no such
    bound."""

    @property
    def unit(self) -> str:
        return "req/s" if self.kind == "rate" else "concurrent requests"

    def answer(self) -> str:
        """One sentence: the answer, the bracket the limit lies in, and how sure the verdicts were."""
        goals = ", ".join(o.describe() for o in self.objectives)
        if self.best is None:
            lowest = f" {self.failed_at:g} {self.unit}" if self.failed_at is not None else ""
            return f"no load met {goals}: even the lowest probed,{lowest}, missed" + self._doubts() + self._ramp()
        text = f"highest load meeting {goals}: {self.best:g} {self.unit}"
        if self.failed_at is None and self.ceiling is not None and self.best >= self.ceiling:
            return (text + f" (every probe passed up to {self.ceiling:g}, the most its requests can hold in flight: "
                    "raise -n or give --duration to search higher)" + self._doubts() + self._ramp())
        if self.failed_at is None:
            return (text + " (every probe passed: the search stopped before finding a limit)" + self._doubts()
                    + self._ramp())
        if any(p.unreached and p.value == self.failed_at for p in self.probes):
            return (text + f" ({self.failed_at:g} was never reached: its requests did not hold that many in flight; "
                    "raise -n or give --duration)" + self._doubts() + self._ramp())
        between = f"the limit lies between {self.best:g} and {self.failed_at:g}"
        missed = f"{self.failed_at:g} missed"
        if self.scan is not None and not any(not p.passed and p.value == self.failed_at for p in self.probes):
            missed += " in the ramp, not confirmed by a steady probe"
        if not self.converged:
            return text + f" (search cut short; {missed}: {between})" + self._doubts() + self._ramp()
        return text + f" ({missed}: {between})" + self._doubts() + self._ramp()

    def _ramp(self) -> str:
        return "" if self.scan is None else f"; {self.scan.describe()}"

    @property
    def requests_needed(self) -> int | None:
        """About how many requests per probe would settle every uncertain verdict (None: none uncertain)."""
        return max((p.requests_needed for p in self.probes if p.requests_needed is not None), default=None)

    def _doubts(self) -> str:
        doubtful = [p for p in self.probes if p.uncertain]
        if not doubtful:
            return ""
        loads = ", ".join(f"{p.value:g}" for p in doubtful)
        return (f"; uncertain: {len(doubtful)} of {len(self.probes)} verdicts ({loads}) rest on a percentile whose "
                f"95% interval holds the limit; about {self.requests_needed} requests per probe would settle "
                f"them (-n {self.requests_needed})")

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "best": self.best, "failed_at": self.failed_at, "converged": self.converged,
                "objectives": {o.name: o.limit for o in self.objectives}, "answer": self.answer(),
                "requests_needed": self.requests_needed,
                "probes": [{"step": p.step, "load": p.value, "passed": p.passed, "misses": list(p.misses),
                            "saturated": p.saturated, "observed": dict(p.observed), "uncertain": list(p.uncertain),
                            "requests_needed": p.requests_needed, "overload": p.overload,
                            "unreached": p.unreached} for p in self.probes],
                "search": self.search, "ramp": self.scan.to_json() if self.scan is not None else None,
                "ceiling": self.ceiling}


def concurrency_ceiling(saved: Mapping[str, Any]) -> float | None:
    """The most requests a probe of a saved spec (its JSON) can have in flight: ``requests`` plus ``warmup``
    when no ``duration_s`` lets it run on; None where nothing bounds it (or a value is not a count)."""
    requests, warmup = saved.get("requests"), saved.get("warmup") or 0
    if saved.get("duration_s") is not None or not isinstance(requests, int) or not isinstance(warmup, int) \
            or isinstance(requests, bool) or requests < 1:
        return None
    return float(requests + max(warmup, 0))


def start_value(saved: Mapping[str, Any]) -> float:
    """Where the search starts: the first ``--rate``/``--concurrency`` value of the spec (as saved: a
    `StoredSpec` or its JSON), else 1."""
    spec = StoredSpec.of(saved)
    values = spec.rate if spec.find_max == "rate" else spec.concurrency
    return values[0] if values else 1.0


def outcome(saved: Mapping[str, Any], steps: Iterable[tuple[int, LoadStep | None, StepSummary | None]],
            ) -> FindMax | None:
    """The answer of a find-max run from its spec (as saved: a `StoredSpec` or its JSON; ``find_max``, ``slo``,
    ``search``) and its finished steps ((index, load, summary) in order); None for a run that is not one."""
    spec = StoredSpec.of(saved)
    kind, slo = spec.find_max, spec.slo
    if kind is None or slo is None:
        return None
    objectives = parse_objectives(slo)
    probes, scan = [], None
    for index, load, summary in steps:
        if load is None or summary is None or load_value(load, kind) is None:
            continue
        if spec.search == "ramp" and scan is None and load.ramp is not None:
            scan = scan_ramp(summary, load, objectives, index, kind)
            continue
        probes.append(judge(summary, load, objectives, index, kind))
    history = [(p.value, p.passed) for p in probes]
    if spec.search == "ramp":
        best, failed_at = _ramp_bounds(scan, history) if scan is not None else (None, None)
        done = scan is not None and bool(history) and failed_at is not None and best is not None and \
            next_confirm(scan, history, max_probes=10**9) is None
        return FindMax(kind=kind, objectives=tuple(objectives), probes=tuple(probes), best=best,
                       failed_at=failed_at, converged=done, search="ramp", scan=scan)
    best, failed_at = _bounds(history)
    ceiling = concurrency_ceiling(spec) if kind == "concurrency" else None
    converged = bool(history) and failed_at is not None and \
        next_probe(kind, history, start_value(spec), max_probes=10**9, ceiling=ceiling) is None
    return FindMax(kind=kind, objectives=tuple(objectives), probes=tuple(probes), best=best, failed_at=failed_at,
                   converged=converged, ceiling=ceiling)


def run_outcome(run: StoredRun) -> FindMax | None:
    """The answer of a ``--find-max`` run (None for a sweep), worked out from its steps as saved (`outcome`): the
    same for the run live, from the store and from a ``bench --json`` file."""
    return outcome(run.spec, [(s.index, s.load, s.summary) for s in run.steps])
