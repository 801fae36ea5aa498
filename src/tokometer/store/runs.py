"""A run's data as typed values: `StoredRun` with its `StoredStep` s, the one class of a run for a run measured
now (`tokometer.benchmark.results.BenchResult.run`), saved and loaded (`ResultStore.run`), imported, or read from
a ``bench --json`` file; every renderer, ``compare`` and ``--find-max`` read it.

The store keeps a run's row and its steps' rows as JSON-able values (`ResultStore.get_run` returns them as
such, for ``tokometer runs --json``); code that reasons about a run reads it through these types instead:
a step's load as the `LoadStep` it was run with, its summary as the `StepSummary` it was written from, the
client's health as the `ClientHealth` it was judged with, the saved spec as a `StoredSpec`, the prompt source
and warnings as fields, the store's own columns as `SavedBy`, and the engine's identity with the facts read
elsewhere typed: JSON only at the edge (``from_json``/``to_json``; ``bench --json`` files by
``from_bench_json``). ``StoredRun.from_json(d).to_json()``
gives ``d`` back for any run this version saved (a hand-written partial health reads as None).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tokometer.load.profiles import LoadStep, load_entry
from tokometer.load.ramp import Ramp
from tokometer.load.selfcheck import ClientHealth
from tokometer.metrics.summary import StepSummary
from tokometer.runs.stored_spec import StoredSpec

__all__ = ["BENCH_SCHEMA", "EngineIdentity", "SavedBy", "StoredRun", "StoredStep", "load_of", "stored_health"]

BENCH_SCHEMA = "tokometer.bench/2"
"""The schema of ``bench --json``'s file (docs/reference/json.md): its steps are `StoredStep.to_json`'s."""

_BENCH_V1 = "tokometer.bench/1"
"""The schema before: a step's ``step`` was ``index``, its ``health`` was ``client``, and it had no ``started_at``."""
_BENCH_V1_STEP_KEYS = {"index": "step", "client": "health"}


def load_of(data: Mapping[str, Any] | None) -> LoadStep | None:
    """The `LoadStep` whose ``label()`` a step's ``load`` column holds; None for anything else."""
    if not data:
        return None
    ramp = Ramp.from_label(data.get("ramp"))
    if data.get("arrival") == "trace":  # a replayed trace: its schedule is not kept, its label is
        return LoadStep("trace", trace=str(data.get("trace", "")), max_concurrency=data.get("max_concurrency"),
                        sessions=bool(data.get("sessions")))
    if data.get("rate") is not None:
        return LoadStep("rate", rate=float(data["rate"]), arrival=data.get("arrival", "poisson"),
                        burstiness=float(data.get("burstiness", 1.0)),
                        max_concurrency=data.get("max_concurrency"), ramp=ramp)
    if data.get("concurrency") is not None:
        if data.get("synchronous"):
            return LoadStep("synchronous", concurrency=int(data["concurrency"]))
        return LoadStep("concurrency", concurrency=int(data["concurrency"]), ramp=ramp)
    return None


_HEALTH_FIELDS = {f.name: f for f in dataclasses.fields(ClientHealth)}
_HEALTH_REQUIRED = {name for name, f in _HEALTH_FIELDS.items()
                    if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}


def stored_health(data: Mapping[str, Any] | None) -> ClientHealth | None:
    """The `ClientHealth` a step's ``health`` column holds (``ClientHealth.to_json``); None when it holds no
    whole one (absent, or written by hand without the measured fields). Fields it no longer has are dropped."""
    if not data or not _HEALTH_REQUIRED.issubset(data):
        return None
    values = {k: v for k, v in data.items() if k in _HEALTH_FIELDS}
    values["problems"] = list(values.get("problems") or [])
    return ClientHealth(**values)


@dataclass(frozen=True)
class EngineIdentity:
    """The engine identity saved with a run (`tokometer.engines.identity`): what is read of it typed, every
    fact in ``facts``."""

    engine: str | None
    """``llama.cpp`` for the embedded engine."""
    model_file: str | None
    argv: tuple[str, ...]
    facts: Mapping[str, Any] = field(compare=False, repr=False)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> EngineIdentity:
        engine, model_file = data.get("engine"), data.get("model_file")
        return cls(engine=str(engine) if engine is not None else None,
                   model_file=str(model_file) if model_file is not None else None,
                   argv=tuple(str(a) for a in data.get("argv") or ()), facts=dict(data))

    @property
    def is_llamacpp(self) -> bool:
        return self.engine == "llama.cpp"

    def to_json(self) -> dict[str, Any]:
        return dict(self.facts)


@dataclass(frozen=True)
class StoredStep:
    """One saved step: its load, its summary (None until it finished), the client's health and whether it was
    cut short. `to_json` is the one way a step is written: in the store, in ``bench --json``
    (``tokometer.bench/2``) and in the report's data (``tokometer.report/2``)."""

    index: int
    load: LoadStep | None
    started_at: str
    summary: StepSummary | None = None
    health: ClientHealth | None = None
    interrupted: bool = False
    server: Mapping[str, Any] | None = None
    """What the server did during the step (`tokometer.observe.server_window`'s summary), if it was scraped."""
    gpu: tuple[Mapping[str, Any], ...] = ()
    """Per GPU, what it did during the step (`tokometer.observe.gpu_window`), if it was read."""
    trial: int | None = None
    """Which pass of the sweep (1..N) with ``bench --repeat N``; None for a step of a run without."""
    saved_load: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)
    """The ``load`` entry as read (`load_entry`'s), written back as it was: ``load`` keeps only what a
    `LoadStep` can be rebuilt from (a trace's file and a session step's mark are not); None: written from
    ``load`` and ``trial``."""

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> StoredStep:
        """A step as `to_json` wrote it; a summary of an earlier version reads by `StepSummary.from_json`'s rules."""
        load = data.get("load")
        trial = load.get("trial") if isinstance(load, Mapping) else None
        summary = data.get("summary")
        return cls(index=int(data["step"]), load=load_of(load), started_at=str(data["started_at"]),
                   summary=StepSummary.from_json(summary) if summary else None,
                   health=stored_health(data.get("health")), interrupted=bool(data.get("interrupted")),
                   server=data.get("server"), gpu=tuple(data.get("gpu") or ()),
                   trial=int(trial) if trial is not None else None,
                   saved_load=dict(load) if isinstance(load, Mapping) else None)

    def to_json(self) -> dict[str, Any]:
        """``step``, ``load``, ``started_at``, ``summary`` (`StepSummary.to_json`), ``health``
        (`ClientHealth.to_json`), ``interrupted``, ``server`` and ``gpu`` (null when not read)."""
        if self.saved_load is not None:
            load: dict[str, Any] | None = dict(self.saved_load)
        else:
            load = load_entry(self.load, self.trial) if self.load else None
        return {"step": self.index, "load": load, "started_at": self.started_at,
                "summary": self.summary.to_json() if self.summary is not None else None,
                "health": self.health.to_json() if self.health else None, "interrupted": self.interrupted,
                "server": self.server, "gpu": list(self.gpu) if self.gpu else None}


@dataclass(frozen=True)
class SavedBy:
    """Which schema and which process saved a run: the store's own columns, kept for the record (`tokometer.store
    .orphans` reads the process's). None each where the store has no such column (one made before it)."""

    schema_version: int | None = None
    pid: int | None = None
    hostname: str | None = None
    process_started: float | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SavedBy | None:
        """The columns of a run as `ResultStore.get_run` returns it; None for a run not read from a store."""
        if "schema_version" not in data:
            return None
        return cls(**{f.name: data.get(f.name) for f in dataclasses.fields(cls)})

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class StoredRun:
    """One saved run: what was benchmarked, by which engine on which host, and its steps in order."""

    id: int
    status: str
    started_at: str
    finished_at: str | None
    target: str
    api: str
    model: str
    label: str | None
    spec: StoredSpec
    """The `BenchSpec` as saved (secret headers redacted), its fields read typed (a plain mapping given here is
    read as one)."""
    engine: EngineIdentity | None
    host: Mapping[str, Any] | None
    steps: tuple[StoredStep, ...] = ()
    tokometer_version: str | None = None
    prompt_source: str | None = None
    """What the prompts came from (``synthetic``, a file, a trace); None for a run saved before it was kept."""
    warnings: tuple[str, ...] = ()
    """The run's own warnings, then its steps'; none for a run saved before they were kept."""
    saved_by: SavedBy | None = field(default=None, compare=False, repr=False)
    """The store's own columns (schema version, the process that ran it); None for a run read from a file."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "spec", StoredSpec.of(self.spec))

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> StoredRun:
        """A run as `ResultStore.get_run` returns it."""
        engine = data.get("engine")
        return cls(id=int(data["id"]), status=str(data["status"]), started_at=str(data["started_at"]),
                   finished_at=data.get("finished_at"), target=str(data["target"]), api=str(data["api"]),
                   model=str(data["model"]), label=data.get("label"), spec=StoredSpec(data.get("spec")),
                   engine=EngineIdentity.from_json(engine) if engine else None, host=data.get("host"),
                   steps=tuple(StoredStep.from_json(s) for s in data.get("steps") or ()),
                   tokometer_version=data.get("tokometer_version"), prompt_source=data.get("prompt_source"),
                   warnings=tuple(str(w) for w in data.get("warnings") or ()), saved_by=SavedBy.from_json(data))

    @classmethod
    def from_bench_json(cls, data: Mapping[str, Any]) -> StoredRun:
        """A run as ``bench --json`` wrote it (``tokometer.bench/2``, or ``/1`` of earlier versions). Its
        ``run_id`` is the id (0 for a run that was not saved, ``--no-store``). Raises ValueError for anything else."""
        schema = data.get("schema") if isinstance(data, Mapping) else None
        if schema not in (BENCH_SCHEMA, _BENCH_V1):
            raise ValueError(f"not a {BENCH_SCHEMA} result (bench --json writes one)")
        target = data.get("target") or {}
        try:
            steps = [{_BENCH_V1_STEP_KEYS.get(k, k): v for k, v in step.items()} if schema == _BENCH_V1 else step
                     for step in data.get("steps") or ()]
            run = {"id": data.get("run_id") or 0, "status": data["status"], "started_at": data["started_at"],
                   "finished_at": data.get("finished_at"), "target": target["url"], "api": target["api"],
                   "model": target.get("model") or "", "label": (data.get("spec") or {}).get("label"),
                   "spec": data.get("spec"), "engine": data.get("engine"), "host": data.get("host"),
                   "tokometer_version": data.get("tokometer_version"),
                   "prompt_source": data.get("prompt_source"), "warnings": list(data.get("warnings") or ()),
                   "steps": [{**s, "started_at": s.get("started_at") or data["started_at"]} for s in steps]}
            return cls.from_json(run)
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            raise ValueError(f"a malformed {schema} result ({type(exc).__name__}: {exc})") from None

    def to_json(self) -> dict[str, Any]:
        """The run as `ResultStore.get_run` returns it."""
        head = {"id": self.id, "started_at": self.started_at, "finished_at": self.finished_at, "status": self.status,
                "target": self.target, "api": self.api, "model": self.model, "label": self.label,
                "spec": dict(self.spec), "engine": self.engine.to_json() if self.engine else None,
                "host": self.host, "tokometer_version": self.tokometer_version,
                "prompt_source": self.prompt_source, "warnings": list(self.warnings) if self.warnings else None}
        if self.saved_by is not None:
            head |= self.saved_by.to_json()
        return {**head, "steps": [{"run_id": self.id, **s.to_json()} for s in self.steps]}
