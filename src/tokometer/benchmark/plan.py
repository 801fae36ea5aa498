"""Which step a run takes next: the sweep as given (``--repeat N`` runs it N times over), or a search.

`run_benchmark` asks its plan for the next step after each one finishes, so a plan may decide from what the
steps measured (`FindMaxPlan`) or not at all (`SweepPlan`).

Trials: with ``--repeat N`` the whole sweep runs N times in turn (every load once, then every load again),
not each load N times back to back, so that the spread between trials holds what drifts between runs (a
warming machine, a filling cache, a neighbour's load) and not only the noise within minutes. Each step is
saved with its trial number (``trial``, from 1); `tokometer.compare.gate` pools a load's trials and reports how
much they differ.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from tokometer.benchmark import findmax, ramp_search
from tokometer.benchmark.spec import BenchSpec
from tokometer.load.profiles import LoadStep
from tokometer.load.ramp import Ramp
from tokometer.load.runner import StepLimits

if TYPE_CHECKING:
    from tokometer.benchmark.results import StepResult

__all__ = ["FindMaxPlan", "PlannedStep", "RampSearchPlan", "StepPlan", "SweepPlan", "plan_for", "sweep_steps"]


@dataclass(frozen=True, slots=True)
class PlannedStep:
    load: LoadStep
    trial: int | None = None
    """1..N with ``--repeat N`` (N > 1); None otherwise."""
    limits: StepLimits | None = None
    """When this step ends, where it differs from the run's (a ramp search's ramp: at the ramp's end)."""
    time_slice_s: float | None = None
    """Slice this step so wide, whatever ``--time-slice`` says (a ramp search's ramp)."""


class StepPlan(Protocol):
    expected_steps: int
    """How many steps the run will probably take (for preparing prompts ahead)."""

    def next_step(self, done: Sequence[StepResult]) -> PlannedStep | None:
        """The step to run after ``done`` (the finished steps in order); None when the run is complete."""
        ...


def sweep_steps(spec: BenchSpec) -> list[LoadStep]:
    """The load steps a sweep asks for, in order: with ``--trace``, one step on the trace's own schedule."""
    if spec.trace is not None:
        from tokometer.datasets.trace import read_trace, trace_offsets

        name = "example" if str(spec.trace) == "example" else spec.trace.name
        return [LoadStep("trace", offsets=trace_offsets(read_trace(spec.trace), spec.time_scale), trace=name,
                         max_concurrency=spec.max_concurrency)]
    if spec.mix is not None and spec.mix.traced:
        from tokometer.benchmark.mixtrace import mix_step

        return [mix_step(spec)]
    if spec.agents is not None:
        from tokometer.load.agentic import agent_step

        return [agent_step(spec.agents, spec.seed_value, spec.output_tokens)]
    sessions = spec.sessions is not None
    if spec.rate:
        return [LoadStep("rate", rate=r, arrival=spec.arrival, burstiness=spec.burstiness,
                         max_concurrency=spec.max_concurrency, sessions=sessions, ramp=_ramp(spec, r))
                for r in spec.rate]
    if spec.synchronous or not spec.concurrency:
        return [LoadStep("synchronous", sessions=sessions)]
    return [LoadStep("concurrency", concurrency=c, sessions=sessions, ramp=_ramp(spec, c)) for c in spec.concurrency]


def _ramp(spec: BenchSpec, level: float) -> Ramp | None:
    """The ramp of a step whose load is ``level``, when ``spec`` asks for ramps."""
    if spec.ramp is None or spec.ramp_from is None or spec.ramp_time_s is None:
        return None
    return Ramp(spec.ramp, spec.ramp_from, float(level), spec.ramp_time_s)


class SweepPlan:
    """The sweep's loads in order, ``repeat`` times over."""

    def __init__(self, loads: Sequence[LoadStep], repeat: int = 1) -> None:
        self.loads = list(loads)
        self.repeat = repeat
        self.expected_steps = len(self.loads) * repeat

    def next_step(self, done: Sequence[StepResult]) -> PlannedStep | None:
        k = len(done)
        if k >= self.expected_steps:
            return None
        return PlannedStep(self.loads[k % len(self.loads)], k // len(self.loads) + 1 if self.repeat > 1 else None)


class FindMaxPlan:
    """Probe loads chosen by `findmax.next_probe` from how the earlier probes were judged."""

    def __init__(self, spec: BenchSpec) -> None:
        if spec.find_max is None or spec.slo is None:
            raise ValueError("FindMaxPlan needs a spec with find_max and slo")
        self.spec = spec
        self.kind: findmax.Kind = spec.find_max
        self.objectives = findmax.parse_objectives(spec.slo)
        self.start = findmax.start_value(spec.model_dump(mode="json"))
        self.expected_steps = 8

    def load(self, value: float) -> LoadStep:
        sessions = self.spec.sessions is not None
        if self.kind == "concurrency":
            return LoadStep("concurrency", concurrency=int(value), sessions=sessions)
        return LoadStep("rate", rate=round(value, 6), arrival=self.spec.arrival, burstiness=self.spec.burstiness,
                        max_concurrency=self.spec.max_concurrency, sessions=sessions)

    def next_step(self, done: Sequence[StepResult]) -> PlannedStep | None:
        history = [(p.value, p.passed) for p in (
            findmax.judge(r.summary, r.load, self.objectives, r.step.index, self.kind) for r in done)]
        ceiling = self.spec.concurrency_ceiling if self.kind == "concurrency" else None
        value = findmax.next_probe(self.kind, history, self.start, ceiling=ceiling)
        return None if value is None else PlannedStep(self.load(value))


class RampSearchPlan(FindMaxPlan):
    """``--search ramp``: one ramp step (from ``ramp_from`` to the ``rate``/``concurrency`` value over
    ``ramp_time_s``, ending at its end), judged slice by slice, then steady probes by `findmax.next_confirm`."""

    def __init__(self, spec: BenchSpec) -> None:
        super().__init__(spec)
        assert spec.ramp_from is not None and spec.ramp_time_s is not None
        self.ramp = Ramp(spec.ramp or "linear", spec.ramp_from, self.start, spec.ramp_time_s)
        self.expected_steps = 1 + ramp_search.MAX_CONFIRMS

    def next_step(self, done: Sequence[StepResult]) -> PlannedStep | None:
        if not done:
            load = dataclasses.replace(self.load(self.start), ramp=self.ramp)
            return PlannedStep(load, limits=StepLimits(None, self.ramp.duration_s, self.spec.warmup),
                               time_slice_s=ramp_search.slice_width(self.ramp.duration_s, self.spec.time_slice_s))
        scan = findmax.scan_ramp(done[0].summary, done[0].load, self.objectives, done[0].step.index, self.kind)
        history = [(p.value, p.passed) for p in (
            findmax.judge(r.summary, r.load, self.objectives, r.step.index, self.kind) for r in done[1:])]
        value = findmax.next_confirm(scan, history)
        return None if value is None else PlannedStep(self.load(value))


def plan_for(spec: BenchSpec) -> StepPlan:
    """The plan ``spec`` asks for."""
    if spec.find_max is not None and spec.search == "ramp":
        return RampSearchPlan(spec)
    if spec.find_max is not None:
        return FindMaxPlan(spec)
    return SweepPlan(sweep_steps(spec), spec.repeat)
