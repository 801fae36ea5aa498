"""What a benchmark run produces: `StepResult` per load step and `BenchResult` for the whole run.

Plain data, apart from `run_benchmark` (`tokometer.benchmark.run`) that fills it, so that the plan
(`tokometer.benchmark.plan`), the recorder and the reports can read a step without importing the run.
`BenchResult.stored` is the run as a saved one reads (`tokometer.store.runs.StoredRun`): what the JSON, CSV and
HTML renderers take, for a live run and a saved one alike.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tokometer import __version__
from tokometer.benchmark import findmax
from tokometer.benchmark.findmax import FindMax
from tokometer.benchmark.spec import BenchSpec
from tokometer.load.profiles import LoadStep, load_entry
from tokometer.load.selfcheck import ClientHealth
from tokometer.metrics import StepSummary
from tokometer.records import RequestRecord
from tokometer.runs.stored_spec import StoredSpec
from tokometer.store.runs import EngineIdentity, StoredRun, StoredStep

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
    started_at: str = ""
    """When the step started (`tokometer.store.store.now_iso`), as the store saves it."""

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
                               [(s.index, s.step, s.summary) for s in self.steps])

    @property
    def all_warnings(self) -> list[str]:
        """The run's own warnings, then each step's: what the store keeps and ``bench --json`` writes."""
        return self.warnings + [w for s in self.steps for w in s.warnings]

    def stored(self) -> StoredRun:
        """The run as `ResultStore.run` reads it once saved. Its ``id`` is 0 for a run that was not saved."""
        steps = tuple(StoredStep(s.index, s.step, s.started_at, s.summary, s.health, s.interrupted, s.server,
                                 tuple(s.gpu or ()), s.trial) for s in self.steps)
        return StoredRun(id=self.run_id or 0, status=self.status, started_at=self.started_at,
                         finished_at=self.finished_at, target=self.spec.url, api=self.spec.api, model=self.model,
                         label=self.spec.label, spec=StoredSpec(self.spec.model_dump(mode="json")),
                         engine=EngineIdentity.from_json(self.engine) if self.engine else None, host=self.host,
                         steps=steps, tokometer_version=__version__, prompt_source=self.prompt_source,
                         warnings=tuple(self.all_warnings))
