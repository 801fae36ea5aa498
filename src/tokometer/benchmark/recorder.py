"""Where a run's records go as they happen: the results store (if there is one) and the live observer.

`Recorder` fans each event of a run out to a `RunSink` and a `BenchObserver`: a step started, a request
finished, a step finished, the run ended. `open_recorder` saves the run in the store (`SavedRun`) when
there is one, and otherwise keeps nothing (`Unsaved`), so that the run's loop need not ask which.
"""

from __future__ import annotations

import contextlib
from types import TracebackType
from typing import Any, Protocol

from tokometer.benchmark.prepare import Prepared
from tokometer.benchmark.results import StepResult
from tokometer.benchmark.spec import BenchSpec
from tokometer.load.profiles import LoadStep, load_entry
from tokometer.load.runner import StepLimits
from tokometer.records import RequestRecord
from tokometer.store.store import ResultStore
from tokometer.util.hostinfo import host_info

__all__ = ["BenchObserver", "NoObserver", "Recorder", "RunSink", "SavedRun", "Unsaved", "open_recorder"]


class BenchObserver(Protocol):
    """Hooks for a live display; all are called on the event loop and must be quick."""

    def step_started(self, index: int, step: LoadStep, limits: StepLimits) -> None: ...

    def request_done(self, record: RequestRecord) -> None: ...

    def step_finished(self, result: StepResult) -> None: ...


class NoObserver:
    """No live display."""

    def step_started(self, index: int, step: LoadStep, limits: StepLimits) -> None:
        pass

    def request_done(self, record: RequestRecord) -> None:
        pass

    def step_finished(self, result: StepResult) -> None:
        pass


class RunSink(Protocol):
    """Where a run is kept: its steps as they start and end, every finished request, its final status."""

    @property
    def run_id(self) -> int | None:
        """The run's id in the store; None for a run kept nowhere."""
        ...

    def start_step(self, index: int, load: dict[str, Any], started_at: str) -> None: ...

    def append(self, record: RequestRecord) -> None: ...

    def finish_step(self, result: StepResult) -> None: ...

    def finish_run(self, status: str, finished_at: str | None = None, warnings: list[str] | None = None) -> None:
        """The run ended with ``status`` at ``finished_at``, with ``warnings`` (the run's, then its steps')."""
        ...


class SavedRun:
    """One run in a `ResultStore`."""

    def __init__(self, store: ResultStore, run_id: int) -> None:
        self.store, self.id = store, run_id

    @property
    def run_id(self) -> int:
        return self.id

    def start_step(self, index: int, load: dict[str, Any], started_at: str) -> None:
        self.store.start_step(self.id, index, load, started_at=started_at)

    def append(self, record: RequestRecord) -> None:
        self.store.append(self.id, record)

    def finish_step(self, result: StepResult) -> None:
        step = result.step
        self.store.finish_step(self.id, step.index, result.summary.to_json(), result.health.to_json(),
                               step.interrupted, server=dict(step.server) if step.server is not None else None,
                               gpu=[dict(g) for g in step.gpu] if step.gpu else None)

    def finish_run(self, status: str, finished_at: str | None = None, warnings: list[str] | None = None) -> None:
        self.store.finish_run(self.id, status, warnings=warnings, finished_at=finished_at)


class Unsaved:
    """A run kept nowhere (no results store)."""

    @property
    def run_id(self) -> None:
        return None

    def start_step(self, index: int, load: dict[str, Any], started_at: str) -> None:
        pass

    def append(self, record: RequestRecord) -> None:
        pass

    def finish_step(self, result: StepResult) -> None:
        pass

    def finish_run(self, status: str, finished_at: str | None = None, warnings: list[str] | None = None) -> None:
        pass


class Recorder:
    """A run's events, to its sink and its observer. As a context manager: a run that ends by an exception
    (a bug; not Ctrl-C) is saved as ``failed``, never left ``running``."""

    def __init__(self, sink: RunSink, observer: BenchObserver) -> None:
        self.sink, self.observer = sink, observer

    @property
    def run_id(self) -> int | None:
        return self.sink.run_id

    def step_started(self, index: int, step: LoadStep, trial: int | None, limits: StepLimits, started_at: str) -> None:
        self.sink.start_step(index, load_entry(step, trial), started_at)
        self.observer.step_started(index, step, limits)

    def request_done(self, record: RequestRecord) -> None:
        self.sink.append(record)
        self.observer.request_done(record)

    def step_finished(self, result: StepResult) -> None:
        self.sink.finish_step(result)
        self.observer.step_finished(result)

    def run_finished(self, status: str, finished_at: str | None = None, warnings: list[str] | None = None) -> None:
        """The run ended: ``status`` at ``finished_at`` (now if not given) with ``warnings``, as the run has
        them (`StoredRun.warnings`), so the saved run is the one ``bench --json`` writes."""
        self.sink.finish_run(status, finished_at, warnings)

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if isinstance(exc, Exception):
            with contextlib.suppress(Exception):
                self.sink.finish_run("failed")


def open_recorder(spec: BenchSpec, prepared: Prepared, store: ResultStore | None, observer: BenchObserver | None,
                  engine: dict[str, Any] | None, *, started_at: str | None = None, host: dict[str, Any] | None = None,
                  prompt_source: str | None = None) -> Recorder:
    """A recorder for ``spec``'s run: saved in ``store`` (created there now) if one is given; ``started_at``,
    ``host`` (this host's, if not given) and ``prompt_source`` as the run's result has them."""
    sink: RunSink = Unsaved()
    if store is not None:
        sink = SavedRun(store, store.create_run(target=spec.url, api=spec.api, model=prepared.model,
                                                spec=spec.model_dump(mode="json"), engine=engine,
                                                host=host if host is not None else host_info(), label=spec.label,
                                                prompt_source=prompt_source, started_at=started_at))
    return Recorder(sink, observer or NoObserver())
