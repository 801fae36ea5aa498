"""What a tune is and what it gave: `Variant` (one engine setting to try), `VariantOutcome` (what trying it gave)
and `TuneRecord` (the whole tune, as saved and resumed).

A variant is the baseline's settings with some of them changed; index 0 is the baseline itself. Settings are
named as the engine's own flags without their dashes (``parallel``, ``ctx-size``, ``max-num-seqs``), plus three
that change the weights rather than a flag: ``model`` (a model file or checkpoint), ``quantization`` (the
quantisation of the model file, e.g. ``Q8_0``) and ``dtype``. Values are kept as the text the user gave, so that
the record says exactly what was asked.

Every tune runs the baseline twice: first, and again after the last variant (``baseline_again``: A, B, C, A).
`TuneRecord.to_json` is the saved shape (``tokometer.tune/1``): the store keeps it as one document per tune, and
``tune --json`` writes it with the judgement of each variant against the baseline beside it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["BASELINE_AGAIN", "TUNE_SCHEMA", "WEIGHT_SETTINGS", "Startup", "TuneRecord", "Variant", "VariantOutcome",
           "VariantStatus"]

TUNE_SCHEMA = "tokometer.tune/1"
BASELINE_AGAIN = "baseline again"
"""The name of the baseline's second run, after every variant."""
WEIGHT_SETTINGS = ("model", "quantization", "dtype")
"""Settings that change the weights the engine serves: a variant changing one gets `quality` against the baseline."""

VariantStatus = Literal["finished", "failed to start", "run failed", "interrupted"]


@dataclass(frozen=True)
class Variant:
    """One engine setting to try: the baseline's settings with ``changed`` ones replaced."""

    index: int
    """Its place in the tune's order; 0 is the baseline."""
    name: str
    """``baseline``, ``parallel=2`` (one change), ``parallel=2,ctx-size=8192`` (a grid point) or a name from a
    variants file."""
    settings: Mapping[str, str]
    """Every setting the engine starts with (the baseline's merged with the change), name → value as given."""
    changed: tuple[str, ...] = ()
    """The names of the settings that differ from the baseline (none for the baseline)."""

    @property
    def is_baseline(self) -> bool:
        return self.index == 0

    @property
    def changes_weights(self) -> bool:
        """True when it serves other weights than the baseline (another model file, quantisation or dtype)."""
        return any(name in WEIGHT_SETTINGS for name in self.changed)

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "name": self.name, "settings": dict(self.settings), "changed": list(self.changed)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Variant:
        return cls(index=int(data["index"]), name=str(data["name"]),
                   settings={str(k): str(v) for k, v in dict(data["settings"]).items()},
                   changed=tuple(str(c) for c in data.get("changed") or ()))


@dataclass(frozen=True)
class Startup:
    """How long the engine took from process start to its first answer."""

    first_s: float
    """The first start of this variant in the tune (as cold as the host's caches allow: the page cache is not
    dropped)."""
    second_s: float | None = None
    """A second start right after the first (warm caches: page cache, compile caches); None when not measured."""

    def to_json(self) -> dict[str, Any]:
        return {"first_s": self.first_s, "second_s": self.second_s}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Startup:
        second = data.get("second_s")
        return cls(first_s=float(data["first_s"]), second_s=float(second) if second is not None else None)


@dataclass(frozen=True)
class VariantOutcome:
    """What trying one variant gave: its run in the store, or why there is none."""

    variant: Variant
    status: VariantStatus
    run_id: int | None = None
    """The bench run of this variant in the store (None when the engine did not start)."""
    startup: Startup | None = None
    command_line: tuple[str, ...] = ()
    """The exact engine command line it was started with (also saved with its run's engine identity)."""
    engine_last_words: str | None = None
    """The end of the engine's own log when it failed to start or died."""
    error: str | None = None
    """One line: what went wrong (None when it finished)."""
    quality: Mapping[str, Any] | None = field(default=None)
    """For a variant that changes the weights: `quality` against the baseline (`tokometer.tune.quality`)."""
    peak_memory_bytes: int | None = None
    """The most resident memory the engine's process group used, read as its run ended
    (`tokometer.engines.peak_memory`); None when not read."""
    peak_memory_note: str | None = None
    """Where ``peak_memory_bytes`` comes from, or why there is none."""

    def to_json(self) -> dict[str, Any]:
        return {**self.variant.to_json(), "status": self.status, "run_id": self.run_id,
                "startup_s": self.startup.first_s if self.startup else None,
                "warm_startup_s": self.startup.second_s if self.startup else None,
                "command_line": list(self.command_line), "engine_last_words": self.engine_last_words,
                "error": self.error, "quality": dict(self.quality) if self.quality is not None else None,
                "peak_memory_bytes": self.peak_memory_bytes, "peak_memory_note": self.peak_memory_note}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> VariantOutcome:
        first = data.get("startup_s")
        startup = Startup(float(first), data.get("warm_startup_s")) if first is not None else None
        run_id = data.get("run_id")
        return cls(variant=Variant.from_json(data), status=data["status"],
                   run_id=int(run_id) if run_id is not None else None, startup=startup,
                   command_line=tuple(str(a) for a in data.get("command_line") or ()),
                   engine_last_words=data.get("engine_last_words"), error=data.get("error"),
                   quality=data.get("quality"), peak_memory_bytes=_int_or_none(data.get("peak_memory_bytes")),
                   peak_memory_note=data.get("peak_memory_note"))


def _int_or_none(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class TuneRecord:
    """A whole tune: what it planned, with what workload, and the outcomes so far (in the variants' order)."""

    name: str
    """The tune's name in the store (``--name``; given or made from the engine and the time)."""
    engine: str
    """``llamacpp`` or ``vllm``."""
    fingerprint: str
    """A hash of the engine, the variants and the workload: ``--resume`` carries on only the same tune."""
    seed: int
    """The workload's seed, the same for every variant (the same prompts in the same order)."""
    workload: Mapping[str, Any]
    """The bench options of every variant's run, as `BenchSpec` fields (JSON)."""
    variants: tuple[Variant, ...]
    outcomes: tuple[VariantOutcome, ...] = ()
    baseline_again: VariantOutcome | None = None
    """The baseline run once more after every variant (`again`): how far it moved from its first run is the
    tune's noise floor (`tokometer.tune.noise`). None until it has run (and in a tune saved before it existed)."""
    started_at: str = ""
    finished_at: str | None = None

    @property
    def baseline(self) -> Variant:
        return self.variants[0]

    def again(self) -> Variant:
        """The baseline's second run, last in the tune: the same settings, named ``baseline again``."""
        return Variant(index=0, name=BASELINE_AGAIN, settings=self.baseline.settings)

    def outcome_of(self, variant: Variant) -> VariantOutcome | None:
        return next((o for o in self.outcomes if o.variant.index == variant.index), None)

    def to_json(self) -> dict[str, Any]:
        """``tokometer.tune/1``: the variants in order, each with its outcome's fields (null until tried)."""
        rows = []
        for variant in self.variants:
            outcome = self.outcome_of(variant)
            rows.append(outcome.to_json() if outcome else {**variant.to_json(), "status": "not run"})
        return {"schema": TUNE_SCHEMA, "name": self.name, "engine": self.engine, "fingerprint": self.fingerprint,
                "seed": self.seed, "started_at": self.started_at, "finished_at": self.finished_at,
                "workload": dict(self.workload), "variants": rows,
                "baseline_again": self.baseline_again.to_json() if self.baseline_again is not None else None}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TuneRecord:
        if data.get("schema") != TUNE_SCHEMA:
            raise ValueError(f"not a {TUNE_SCHEMA} document")
        rows = list(data["variants"])
        return cls(name=str(data["name"]), engine=str(data["engine"]), fingerprint=str(data["fingerprint"]),
                   seed=int(data["seed"]), workload=dict(data["workload"]),
                   variants=tuple(Variant.from_json(r) for r in rows),
                   outcomes=tuple(VariantOutcome.from_json(r) for r in rows if r.get("status") != "not run"),
                   baseline_again=VariantOutcome.from_json(again) if isinstance(again := data.get("baseline_again"),
                                                                                 Mapping) else None,
                   started_at=str(data.get("started_at") or ""), finished_at=data.get("finished_at"))
