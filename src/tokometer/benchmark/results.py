"""What a benchmark run produces: the run itself (`StoredRun`) and, beside it, what only a live run has.

A run's data has one class, `tokometer.store.runs.StoredRun` with its `StoredStep` s: the one bench
measures here, the one the store saves and loads, the one ``import`` creates and the one every renderer (console,
JSON, CSV, HTML, markdown), ``compare`` and ``--find-max`` read. A live run adds only what is never saved:

- `StepResult`: a step as it is saved (``step``, a `StoredStep`), the `RequestRecord` s it measured (with the text
  received, which the store does not keep) and its warnings on their own (the saved run keeps them flat);
- `BenchResult`: the run as it is saved (``run``), the `BenchSpec` it ran with (typed; ``run.spec`` is its JSON)
  and its steps as `StepResult` s (``run.steps`` is their ``step`` s, in order).

`run_benchmark` (`tokometer.benchmark.run`) fills them; the plan (`tokometer.benchmark.plan`), the recorder and
the reports read a step without importing the run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tokometer import __version__
from tokometer.benchmark import findmax
from tokometer.benchmark.findmax import FindMax
from tokometer.benchmark.spec import BenchSpec
from tokometer.load.profiles import LoadStep
from tokometer.load.selfcheck import ClientHealth
from tokometer.metrics import StepSummary
from tokometer.records import RequestRecord
from tokometer.runs.stored_spec import StoredSpec
from tokometer.store.runs import EngineIdentity, StoredRun, StoredStep

__all__ = ["BenchResult", "StepResult"]


@dataclass(frozen=True, slots=True)
class StepResult:
    """One finished (or interrupted) load step of a live run: the step as saved and its records."""

    step: StoredStep
    """The step as the store saves it and every renderer reads it (its summary always set)."""
    records: list[RequestRecord] = field(repr=False)
    """What each request of the step measured, warm-up included, with the text received (never saved)."""
    warnings: tuple[str, ...] = ()
    """The step's own warnings (the saved run keeps them after the run's, in ``StoredRun.warnings``)."""

    def __post_init__(self) -> None:
        if self.step.summary is None or self.step.load is None or self.step.health is None:
            raise ValueError("a live step has its load, its summary and the client's health")

    @property
    def summary(self) -> StepSummary:
        """The step's summary (`StoredStep.summary`: a live step always has one)."""
        assert self.step.summary is not None
        return self.step.summary

    @property
    def load(self) -> LoadStep:
        """The load the step ran (`StoredStep.load`: a live step always has one)."""
        assert self.step.load is not None
        return self.step.load

    @property
    def health(self) -> ClientHealth:
        """The load generator's health over the step (`StoredStep.health`: a live step always has one)."""
        assert self.step.health is not None
        return self.step.health

    @property
    def server(self) -> Mapping[str, Any] | None:
        """What the server did during the step (`StoredStep.server`), if it was read."""
        return self.step.server


@dataclass(frozen=True, slots=True)
class BenchResult:
    """A whole live run: the run as saved and reported (``run``), its spec and its steps' records."""

    run: StoredRun
    """The run's data: what the store saves, ``bench --json`` writes and every renderer reads. Its ``id`` is 0
    for a run that was not saved."""
    spec: BenchSpec
    """The spec the run ran with (``run.spec`` is it as saved: secrets redacted)."""
    steps: tuple[StepResult, ...]
    """The steps in order, each with its records: ``run.steps`` are their ``step`` s."""

    @classmethod
    def of(cls, spec: BenchSpec, run_id: int | None, status: str, started_at: str, finished_at: str,
           steps: Sequence[StepResult], *, model: str, prompt_source: str, engine: Mapping[str, Any] | None,
           host: Mapping[str, Any], warnings: Sequence[str]) -> BenchResult:
        """The result of a run that ran ``spec``: its run as saved, with the run's own ``warnings`` first and then
        each step's (as the store keeps them)."""
        run = StoredRun(id=run_id or 0, status=status, started_at=started_at, finished_at=finished_at,
                        target=spec.url, api=spec.api, model=model, label=spec.label,
                        spec=StoredSpec(spec.model_dump(mode="json")),
                        engine=EngineIdentity.from_json(engine) if engine else None, host=host,
                        steps=tuple(s.step for s in steps), tokometer_version=__version__,
                        prompt_source=prompt_source,
                        warnings=(*warnings, *(w for s in steps for w in s.warnings)))
        return cls(run=run, spec=spec, steps=tuple(steps))

    @property
    def run_id(self) -> int | None:
        """The run's id in the store; None for a run that was not saved."""
        return self.run.id or None

    @property
    def status(self) -> str:
        """``completed``, ``interrupted`` or ``failed``."""
        return self.run.status

    @property
    def warnings(self) -> tuple[str, ...]:
        """The run's own warnings, without its steps' (which come after them in ``run.warnings``)."""
        return self.run.warnings[:len(self.run.warnings) - sum(len(s.warnings) for s in self.steps)]

    @property
    def failed_requests(self) -> int:
        return sum(s.summary.requests_failed for s in self.steps)

    def find_max(self) -> FindMax | None:
        """The answer of a ``--find-max`` run (None for a sweep), as it reads once saved (`findmax.run_outcome`)."""
        return findmax.run_outcome(self.run)
