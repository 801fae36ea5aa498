"""What a benchmark run produces: `StepResult` per load step and `BenchResult` for the whole run.

Plain data, apart from `run_benchmark` (`tokometer.benchmark.run`) that fills it, so that the plan
(`tokometer.benchmark.plan`), the recorder and the reports can read a step without importing the run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tokometer.benchmark import findmax
from tokometer.benchmark.findmax import FindMax
from tokometer.benchmark.spec import BenchSpec
from tokometer.load.profiles import LoadStep, load_entry
from tokometer.load.selfcheck import ClientHealth
from tokometer.metrics import StepSummary
from tokometer.records import RequestRecord

__all__ = ["BenchResult", "StepResult"]


@dataclass(slots=True)
class StepResult:
    """One finished (or interrupted) load step."""

    index: int
    step: LoadStep
    summary: StepSummary
    health: ClientHealth
    interrupted: bool
    records: list[RequestRecord]
    warnings: list[str] = field(default_factory=list)
    server: dict[str, Any] | None = None
    """What the server did meanwhile (its /metrics, `tokometer.benchmark.observation`), if it was read."""
    gpu: list[dict[str, Any]] | None = None
    """Per GPU, what it did meanwhile, if it was read."""
    trial: int | None = None
    """Which pass of the sweep this was (1..N) with ``--repeat N``; None without."""

    @property
    def load_label(self) -> dict[str, Any]:
        return load_entry(self.step, self.trial)


@dataclass(slots=True)
class BenchResult:
    """A whole run, as saved and as reported."""

    spec: BenchSpec
    run_id: int | None
    status: str
    started_at: str
    finished_at: str
    steps: list[StepResult]
    model: str
    prompt_source: str
    engine: dict[str, Any] | None
    host: dict[str, Any]
    warnings: list[str]

    @property
    def failed_requests(self) -> int:
        return sum(s.summary.requests_failed for s in self.steps)

    def find_max(self) -> FindMax | None:
        """The answer of a ``--find-max`` run (None for a sweep), as `findmax.outcome` reads it from a saved run."""
        return findmax.outcome(self.spec.model_dump(mode="json"),
                               [(s.index, s.step, s.summary.to_json()) for s in self.steps])
