"""``tokometer compare BASE NEW``: a noise-aware regression gate between two saved runs.

Pure functions of two `StoredRun` s and their `RequestRecord` s; nothing here reads the store or prints.

Steps are matched by index. For each matched step and metric (`gate_metrics`: the percentiles each metric-registry
row names in its ``gate``, with their default thresholds, then the throughput, goodput and error rate of the
step; names, labels, units and directions are the registry's, `tokometer.metrics.registry`)
the comparison gives:

- ``base`` and ``new``: the metric over the step's measurement window (warm-up requests left out), computed
  as `tokometer.metrics.summarize` computes it (percentiles interpolate linearly, numpy's default);
- ``change``: NEW against BASE, relative (``new / base - 1``); for the error rate, the difference in
  points (``new - base``, as fractions of requests);
- ``ci_low``, ``ci_high``: a 95 % interval of that change by the percentile bootstrap: BASE's and NEW's
  requests are each resampled with replacement (`RESAMPLES` times, numpy's PCG64 seeded with `SEED`, so the
  same two runs always give the same interval) and the metric recomputed on each resample. A request is the
  unit resampled, also for ITL (its gaps travel together; a step of more than `ITL_CAP` gaps is resampled
  on every k-th gap, for time) and for throughput and goodput, which are
  written as ``achieved concurrency * sum(output tokens) / sum(E2E)`` (equal to ``sum(output tokens) /
  duration``) with the achieved concurrency held at the step's own;
- ``effect_size``: Cliff's delta of the per-request values the metric is built from (NEW larger: up to
  +1; the same: 0), which says how much the two samples overlap whatever the percentile;
- ``verdict`` by the rule of `verdict`: a regression is a change in the bad direction whose interval
  excludes zero and whose size exceeds the metric's threshold; an improvement likewise in the good
  direction; "within threshold" when the interval excludes zero but lies within ± the threshold (a real move,
  smaller than the threshold: never called "no change"); "no change" when the whole interval lies within ±
  the threshold and holds zero; otherwise "cannot tell" (the noise is too large to decide either way). A
  percentile with fewer than `MIN_TAIL` values beyond it in either run (p99 of fewer than 500 requests) is
  always "cannot tell".

Trials (``bench --repeat N``): steps are matched by load, not by index, and a load's trials are pooled (their
requests together; for throughput and goodput their durations added). The bootstrap over pooled requests sees
the noise within steps only, so the trials give the other part: ``noise`` is the relative sample standard
deviation of the metric's per-trial values (for the error rate, in points), the larger of the two runs'. When
it exceeds the threshold the gate cannot decide: the verdict is "cannot tell", whatever the interval says.

Steady state (``compare --window steady``): each step's requests are those of its steady state instead
(`tokometer.metrics.window.steady_requests`: the measured requests sent after the load reached its target
and finished before the drain, chosen again from the saved records with the tolerance saved with the step's
steady state), and every metric is computed over them as above (throughput over their span). A run without a
steady state saved on any step (one saved before tokometer kept it, a trace, sessions) is refused; a load
whose steady state was not found in either run is not compared, and a note says why.

Pareto fronts: each run's loads (trials pooled) as points of per-request decode speed p50 against output
throughput (per GPU when both runs know their GPUs), NEW's front against BASE's
(`tokometer.metrics.pareto.compare_fronts`): which front points the other front dominates, and whether one
front dominates or they cross. It is reported beside the gate and does not change the exit status.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

import numpy as np
import numpy.typing as npt

from tokometer.compare.probes import probe_notes
from tokometer.gpu_count import gpu_count
from tokometer.metrics import pareto, registry
from tokometer.metrics import request as m
from tokometer.metrics.pooling import pool_trials
from tokometer.metrics.summary import SLO
from tokometer.metrics.window import steady_requests
from tokometer.records import RequestRecord
from tokometer.store.runs import StoredRun, StoredStep
from tokometer.util.errors import ConfigError
from tokometer.util.shown import quoted

__all__ = [
    "CACHE_POINTS",
    "DEFAULT_THRESHOLDS",
    "ITL_CAP",
    "METRICS",
    "MIN_TAIL",
    "RESAMPLES",
    "SEED",
    "Comparison",
    "Fronts",
    "MetricComparison",
    "MetricDef",
    "StepComparison",
    "StepSample",
    "Window",
    "cliffs_delta",
    "compare_fronts",
    "compare_runs",
    "compare_samples",
    "front_loads",
    "gate_metrics",
    "load_groups",
    "parse_thresholds",
    "run_gpus",
    "trial_noise",
    "unlike_fields",
    "verdict",
]

RESAMPLES = 2000
"""Bootstrap resamples per step."""
SEED = 20261130
"""The bootstrap's seed: one comparison always gives the same intervals."""
CONFIDENCE = 0.95
MIN_TAIL = 5
"""A percentile is judged only when each run has at least this many values beyond it (p99: 500 requests): the
bootstrap cannot see the noise of a tail that rests on one or two values."""
ITL_CAP = 20_000
"""The bootstrap of ITL uses at most about this many gaps of a step: every k-th one, in request order (the
point value uses them all)."""
CACHE_POINTS = 0.10
"""Prompt-cache hit rates further apart than this (10 points) make two runs unlike."""

Verdict = Literal["regression", "improvement", "within threshold", "no change", "cannot tell"]
Window = Literal["step", "steady"]
"""Which part of each step is compared: the whole step, or its steady state."""
Kind = Literal["percentile", "gaps", "throughput", "goodput", "error_rate"]
FArray = npt.NDArray[np.float64]
IArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class MetricDef:
    """One metric the gate judges."""

    key: str
    """The name ``--threshold`` takes: ``ttft_p50``."""
    label: str
    unit: str
    kind: Kind
    higher_is_better: bool
    default_threshold: float
    """Relative (0.05 = 5 %); for the error rate, in points of requests (0.01 = 1 point)."""
    quantile: float = 50.0
    source: str = ""
    """For a percentile or gaps: the registry row of its per-request values (``ttft_ms``, ``itl_ms``)."""


def _gate(key: str, kind: Kind, threshold: float) -> MetricDef:
    """The gate's row for ``key``, a registry name (``ttft_p50``): label, unit and direction from the registry; a
    share is shown in % (its change in points)."""
    found = registry.objective(key)
    if found is None:
        raise KeyError(f"{key} is not a metric of the registry")
    metric, stat = found
    label = f"{metric.label} {stat}" if stat else metric.label
    per_request = kind in ("percentile", "gaps")
    return MetricDef(key, label, "%" if metric.unit == "share" else metric.unit, kind, metric.better == "higher",
                     threshold, float(stat[1:]) if stat else 50.0, metric.name if per_request else "")


_STEP_GATES: tuple[tuple[str, Kind, float], ...] = (
    ("output_throughput", "throughput", 0.05), ("goodput", "goodput", 0.05), ("error_rate", "error_rate", 0.01))
"""The gate's metrics of a step as a whole, each bootstrapped by its own formula (see the module docstring),
and their default thresholds (the error rate's in points)."""


def gate_metrics() -> tuple[MetricDef, ...]:
    """What the gate judges: each percentile a registry row names in its ``gate``
    (`tokometer.metrics.registry.gate_rows`), then `_STEP_GATES`; of the registry in use when called."""
    rows = tuple(_gate(f"{row.short}_{stat}", "gaps" if row.aggregate == "gaps" else "percentile", threshold)
                 for row, stat, threshold in registry.gate_rows())
    return rows + tuple(_gate(key, kind, threshold) for key, kind, threshold in _STEP_GATES)


def _by_key() -> dict[str, MetricDef]:
    return {d.key: d for d in gate_metrics()}


METRICS: tuple[MetricDef, ...] = gate_metrics()
"""The gate's metrics (`gate_metrics`) of the registry's own rows."""
DEFAULT_THRESHOLDS: dict[str, float] = {d.key: d.default_threshold for d in METRICS}


def parse_thresholds(text: str | None) -> dict[str, float]:
    """``"ttft_p50=5%,tpot_p50=3%"`` over `DEFAULT_THRESHOLDS`; a bare number is a percentage too
    (``5`` = 5 %). For ``error_rate`` the value is in points (``1%`` = one request in a hundred)."""
    by_key = _by_key()
    out = {key: d.default_threshold for key, d in by_key.items()}
    if not text:
        return out
    for part in text.split(","):
        if not part.strip():
            continue
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or key not in by_key:
            raise ConfigError(f"--threshold: {part.strip()!r} is not NAME=PERCENT with NAME one of "
                              f"{', '.join(by_key)} (write e.g. ttft_p50=5%,tpot_p50=5%)")
        match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*%?\s*", value)
        if match is None:
            raise ConfigError(f"--threshold: {value.strip()!r} for {key} is not a percentage (write e.g. {key}=5%)")
        out[key] = float(match.group(1)) / 100.0
    return out


# -- the statistics ---------------------------------------------------------------------------------------


def cliffs_delta(base: Sequence[float] | FArray, new: Sequence[float] | FArray) -> float | None:
    """P(new > base) - P(new < base) over all pairs: +1 when every NEW value is above every BASE value, 0 when
    the samples overlap evenly. None when either is empty."""
    b = np.sort(np.asarray(base, dtype=np.float64))
    n = np.asarray(new, dtype=np.float64)
    if not len(b) or not len(n):
        return None
    below = np.searchsorted(b, n, side="left")  # base values < each new one
    above = len(b) - np.searchsorted(b, n, side="right")  # base values > each new one
    return float((below.sum() - above.sum()) / (len(b) * len(n)))


def _weighted_percentile(sorted_values: FArray, weights: IArray, q: float) -> FArray:
    """Per row of ``weights`` (counts of each of ``sorted_values``), ``np.percentile`` (linear) of the sample
    that holds each value as many times as its count; NaN for an empty row."""
    cum = np.cumsum(weights, axis=1)
    total = cum[:, -1] if cum.shape[1] else np.zeros(len(weights), dtype=np.int64)
    pos = q / 100.0 * (total - 1)
    lo = np.floor(pos)
    hi = np.minimum(np.ceil(pos), np.maximum(total - 1, 0))
    j_lo = np.minimum((cum <= lo[:, None]).sum(axis=1), len(sorted_values) - 1)
    j_hi = np.minimum((cum <= hi[:, None]).sum(axis=1), len(sorted_values) - 1)
    value = sorted_values[j_lo] + (pos - lo) * (sorted_values[j_hi] - sorted_values[j_lo])
    return np.where(total > 0, value, np.nan)


def _chunks(rows: int, width: int) -> list[slice]:
    step = max(1, 4_000_000 // max(width, 1))
    return [slice(i, min(i + step, rows)) for i in range(0, rows, step)]


def _per_request(row: registry.Metric, window: Sequence[RequestRecord]) -> FArray:
    """A per-request row's value (in its unit) of each request of ``window``; NaN where it has none (a failed
    request, for a row of the completed ones)."""
    def value(r: RequestRecord) -> float:
        if row.per_request is None or (row.population == "completed" and not r.ok):
            return float("nan")
        v = row.per_request(r)
        return float("nan") if v is None else v * row.scale

    return np.array([value(r) for r in window], dtype=np.float64)


def _gaps(row: registry.Metric, window: Sequence[RequestRecord]) -> tuple[FArray, IArray]:
    """A gaps row's values (in its unit) over ``window``, and the request each belongs to."""
    values: list[float] = []
    owner: list[int] = []
    for i, r in enumerate(window):
        if row.per_gap is None or (row.population == "completed" and not r.ok):
            continue
        gaps = row.per_gap(r)
        values.extend(g * row.scale for g in gaps)
        owner.extend([i] * len(gaps))
    return np.array(values, dtype=np.float64), np.array(owner, dtype=np.int64)


@dataclass(frozen=True)
class StepSample:
    """One step's measurement window as per-request arrays (NaN where a metric is undefined)."""

    values: dict[str, FArray]
    """Each per-request row the gate judges, by registry name: one value per request (NaN where undefined)."""
    gaps: dict[str, tuple[FArray, IArray]]
    """Each gaps row the gate judges (``itl_ms``), by registry name: the values, and the request each belongs to."""
    e2e: FArray
    """Of completed requests; NaN for failed ones."""
    e2e_all: FArray
    """end - sent of every request, failed ones too (as the achieved concurrency counts them)."""
    output_tokens: FArray
    """Of completed requests; 0 for failed ones."""
    failed: FArray
    met_slo: FArray | None
    duration_s: float

    @classmethod
    def of(cls, records: Sequence[RequestRecord], slo: SLO | None = None) -> StepSample:
        window = [r for r in records if not r.warmup and r.sent_ns]
        judged = {row.name: row for row, _, _ in registry.gate_rows()}
        duration_ns = (max(r.end_ns for r in window) - min(r.sent_ns for r in window)) if window else 0
        use_slo = slo is not None and not slo.empty
        return cls(
            values={name: _per_request(row, window) for name, row in judged.items() if row.aggregate != "gaps"},
            gaps={name: _gaps(row, window) for name, row in judged.items() if row.aggregate == "gaps"},
            e2e=np.array([float("nan") if (v := m.e2e_ns(r)) is None else v * 1e-6 for r in window],
                         dtype=np.float64),
            e2e_all=np.array([(r.end_ns - r.sent_ns) * 1e-9 for r in window], dtype=np.float64),
            output_tokens=np.array([float(r.output_tokens or 0) if r.ok else 0.0 for r in window], dtype=np.float64),
            failed=np.array([0.0 if r.ok else 1.0 for r in window], dtype=np.float64),
            met_slo=(np.array([1.0 if r.ok and slo.met(r) else 0.0 for r in window], dtype=np.float64)
                     if use_slo and slo is not None else None),
            duration_s=duration_ns / 1e9)

    @classmethod
    def pooled(cls, samples: Sequence[StepSample]) -> StepSample:
        """Several trials of one load as one sample: requests together, durations added."""
        if len(samples) == 1:
            return samples[0]
        offsets = np.cumsum([0] + [s.n for s in samples[:-1]])

        def cat(name: str) -> FArray:
            return np.concatenate([getattr(s, name) for s in samples]) if samples else np.zeros(0)

        slo = [s.met_slo for s in samples]
        return cls(values={k: np.concatenate([s.values[k] for s in samples]) for k in samples[0].values},
                   gaps={k: (np.concatenate([s.gaps[k][0] for s in samples]),
                             np.concatenate([s.gaps[k][1] + off for s, off in zip(samples, offsets, strict=True)]))
                         for k in samples[0].gaps},
                   e2e=cat("e2e"), e2e_all=cat("e2e_all"), output_tokens=cat("output_tokens"), failed=cat("failed"),
                   met_slo=None if any(x is None for x in slo) else np.concatenate([x for x in slo if x is not None]),
                   duration_s=sum(s.duration_s for s in samples))

    @property
    def n(self) -> int:
        return len(self.e2e_all)

    def point(self, d: MetricDef) -> float | None:
        """The metric over the whole step."""
        if d.kind in ("percentile", "gaps"):
            values = self.gaps[d.source][0] if d.kind == "gaps" else self.values[d.source]
            values = values[~np.isnan(values)]
            return float(np.percentile(values, d.quantile)) if len(values) else None
        if d.kind == "error_rate":
            return float(self.failed.mean()) if self.n else None
        numerator = self.output_tokens if d.kind == "throughput" else self.met_slo
        if numerator is None or self.duration_s <= 0:
            return None
        return float(numerator.sum() / self.duration_s)

    def per_request(self, d: MetricDef) -> FArray:
        """The per-request values the metric is built from (for the effect size)."""
        if d.kind == "gaps":
            return self.gaps[d.source][0]
        if d.kind == "percentile":
            values: FArray = self.values[d.source]
            return values[~np.isnan(values)]
        if d.kind == "error_rate":
            return self.failed
        if d.kind == "goodput":
            return self.met_slo if self.met_slo is not None else np.zeros(0)
        ok = ~np.isnan(self.e2e)
        return self.output_tokens[ok] / (self.e2e[ok] * 1e-3)

    def resampled(self, d: MetricDef, counts: IArray) -> FArray:
        """The metric over each resample; ``counts[b, i]``: how often request i is drawn in resample b."""
        if d.kind == "percentile":
            values: FArray = self.values[d.source]
            keep = ~np.isnan(values)
            order = np.argsort(values[keep], kind="stable")
            sorted_values, columns = values[keep][order], np.flatnonzero(keep)[order]
            if not len(sorted_values):
                return np.full(len(counts), np.nan)
            return np.concatenate([_weighted_percentile(sorted_values, counts[rows][:, columns], d.quantile)
                                   for rows in _chunks(len(counts), len(columns))])
        if d.kind == "gaps":
            gaps, owners_of = self.gaps[d.source]
            if not len(gaps):
                return np.full(len(counts), np.nan)
            stride = math.ceil(len(gaps) / ITL_CAP)  # every stride-th gap, in request order
            itl, owner = gaps[::stride], owners_of[::stride]
            order = np.argsort(itl, kind="stable")
            sorted_values, owners = itl[order], owner[order]
            return np.concatenate([_weighted_percentile(sorted_values, counts[rows][:, owners], d.quantile)
                                   for rows in _chunks(len(counts), len(owners))])
        if d.kind == "error_rate":
            return np.asarray(counts @ self.failed / max(self.n, 1), dtype=np.float64)
        numerator = self.output_tokens if d.kind == "throughput" else self.met_slo
        if numerator is None or self.duration_s <= 0:
            return np.full(len(counts), np.nan)
        concurrency = self.e2e_all.sum() / self.duration_s
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.asarray(concurrency * (counts @ numerator) / (counts @ self.e2e_all), dtype=np.float64)


def _resample_counts(n: int, resamples: int, rng: np.random.Generator) -> IArray:
    """``counts[b, i]``: how many times request i is drawn in resample b (n draws with replacement)."""
    out = np.zeros((resamples, n), dtype=np.int64)
    if n == 0:
        return out
    for rows in _chunks(resamples, n):
        size = rows.stop - rows.start
        draws = rng.integers(0, n, size=(size, n)) + n * np.arange(size)[:, None]
        out[rows] = np.bincount(draws.ravel(), minlength=size * n).reshape(size, n)
    return out


def verdict(change: float | None, ci: tuple[float, float] | None, threshold: float,
            higher_is_better: bool) -> Verdict:
    """The gate's rule. ``change`` and the interval are NEW against BASE (relative, or in points).

    - regression: the change is in the bad direction, its interval excludes zero, and its size exceeds the
      threshold;
    - improvement: the same in the good direction;
    - within threshold: the interval excludes zero and lies within ± the threshold (the move is real but
      smaller than the threshold);
    - no change: the whole interval lies within ± the threshold and holds zero;
    - cannot tell: anything else (the interval is too wide to say).
    """
    if change is None or ci is None or not all(math.isfinite(x) for x in (change, *ci)):
        return "cannot tell"
    low, high = ci
    worse = -change if higher_is_better else change  # > 0: in the bad direction
    excludes_zero = low > 0 or high < 0
    if excludes_zero and abs(change) > threshold:
        return "regression" if worse > 0 else "improvement"
    if -threshold <= low and high <= threshold:
        return "within threshold" if excludes_zero else "no change"
    return "cannot tell"


@dataclass(frozen=True)
class MetricComparison:
    key: str
    label: str
    unit: str
    higher_is_better: bool
    base: float | None
    new: float | None
    change: float | None
    """Relative (0.1 = +10 %); for the error rate, in points (0.01 = +1 point)."""
    ci_low: float | None
    ci_high: float | None
    effect_size: float | None
    """Cliff's delta of the per-request values, NEW against BASE."""
    threshold: float
    verdict: Verdict
    reason: str | None = None
    """Why the verdict is "cannot tell" when not because of the interval."""
    noise: float | None = None
    """Run-to-run noise between trials (`trial_noise`, the larger run's); None without trials."""

    @property
    def relative(self) -> bool:
        found = _by_key().get(self.key)
        return found is None or found.kind != "error_rate"

    def to_json(self) -> dict[str, Any]:
        return {"metric": self.key, "label": self.label, "unit": self.unit, "higher_is_better": self.higher_is_better,
                "base": self.base, "new": self.new, "change": self.change,
                "change_kind": "relative" if self.relative else "points",
                "ci95": [self.ci_low, self.ci_high] if self.ci_low is not None else None,
                "effect_size_cliffs_delta": self.effect_size, "threshold": self.threshold, "verdict": self.verdict,
                "reason": self.reason, "trial_noise": self.noise}


def trial_noise(trials: Sequence[StepSample], d: MetricDef) -> float | None:
    """How much the metric differs between trials of one load: the sample standard deviation of its
    per-trial values, relative to their mean (for the error rate, in points); None under two trials."""
    values = [v for v in (t.point(d) for t in trials) if v is not None]
    if len(values) < 2:
        return None
    spread = float(np.std(values, ddof=1))
    if d.kind == "error_rate":
        return spread
    mean = float(np.mean(values))
    return spread / mean if mean > 0 else None


def compare_samples(base: StepSample, new: StepSample, thresholds: Mapping[str, float] | None = None, *,
                    metrics: Sequence[MetricDef] | None = None, resamples: int = RESAMPLES,
                    seed: int = SEED, base_trials: Sequence[StepSample] = (),
                    new_trials: Sequence[StepSample] = ()) -> list[MetricComparison]:
    """Each metric of ``metrics`` NEW against BASE (see the module docstring). Goodput is left out unless both
    samples have it (``metrics``: `gate_metrics` unless given). ``base_trials``/``new_trials``: the trials pooled
    into each sample, for the noise."""
    metrics = gate_metrics() if metrics is None else metrics
    limits = {**{d.key: d.default_threshold for d in metrics}, **(thresholds or {})}
    rng = np.random.default_rng(seed)
    base_counts = _resample_counts(base.n, resamples, rng)
    new_counts = _resample_counts(new.n, resamples, rng)
    out = []
    for d in metrics:
        if d.kind == "goodput" and (base.met_slo is None or new.met_slo is None):
            continue
        b, n = base.point(d), new.point(d)
        change: float | None = None
        ci: tuple[float, float] | None = None
        if b is not None and n is not None:
            b_star, n_star = base.resampled(d, base_counts), new.resampled(d, new_counts)
            with np.errstate(divide="ignore", invalid="ignore"):
                if d.kind == "error_rate":
                    change, diffs = n - b, n_star - b_star
                elif b > 0:
                    change, diffs = n / b - 1.0, n_star / b_star - 1.0
                elif n == b:  # both zero
                    change, diffs = 0.0, np.zeros(1)
                else:
                    diffs = np.zeros(0)
            diffs = diffs[np.isfinite(diffs)]
            if change is not None and len(diffs):
                tail = (1 - CONFIDENCE) / 2 * 100
                ci = (float(np.percentile(diffs, tail)), float(np.percentile(diffs, 100 - tail)))
        judged = verdict(change, ci, limits[d.key], d.higher_is_better)
        reason = None
        if d.kind in ("percentile", "gaps"):
            fewest = min(len(base.per_request(d)), len(new.per_request(d)))
            beyond = fewest * (1 - d.quantile / 100)
            if beyond < MIN_TAIL:
                judged = "cannot tell"
                needed = math.ceil(MIN_TAIL / (1 - d.quantile / 100) - 1e-9)
                reason = (f"{fewest} values in a run; a {d.label.split()[-1]} is judged from {needed} "
                          f"(at least {MIN_TAIL} beyond it)")
        noises = [x for x in (trial_noise(base_trials, d), trial_noise(new_trials, d)) if x is not None]
        noise = max(noises) if noises else None
        if noise is not None and noise > limits[d.key] and reason is None:
            judged = "cannot tell"
            unit = "points" if d.kind == "error_rate" else "%"
            reason = (f"run-to-run noise {100 * noise:.1f}{unit} exceeds the threshold {100 * limits[d.key]:g}{unit}: "
                      "the gate cannot decide (more requests per step, more trials or a quieter machine)")
        out.append(MetricComparison(
            key=d.key, label=d.label, unit=d.unit, higher_is_better=d.higher_is_better, base=b, new=n,
            change=change, ci_low=ci[0] if ci else None, ci_high=ci[1] if ci else None,
            effect_size=cliffs_delta(base.per_request(d), new.per_request(d)), threshold=limits[d.key],
            verdict=judged, reason=reason, noise=noise))
    return out


# -- two runs ----------------------------------------------------------------------------------------------


def _slo(run: StoredRun) -> SLO:
    return run.spec.slo_limits


def _load(step: StoredStep) -> dict[str, Any] | None:
    return step.load.label() if step.load else None


def _short(step: StoredStep) -> str:
    return step.load.short() if step.load else "unknown"


def _cache_rate(steps: Sequence[StoredStep], name: str) -> float | None:
    """The mean of a load's trials' cache-hit rates (``prompt_cache_hit_rate`` from the answers, or the
    server's ``prefix_cache_hit_rate``); None when no trial has one."""
    def rate(st: StoredStep) -> Any:
        if name == "prompt_cache_hit_rate":
            return st.summary.prompt_cache_hit_rate if st.summary is not None else None
        return (st.server or {}).get(name)

    values = [float(v) for st in steps if (v := rate(st)) is not None]
    return sum(values) / len(values) if values else None


def load_groups(run: StoredRun) -> list[tuple[dict[str, Any] | None, list[StoredStep]]]:
    """A run's steps grouped by load, in the order each load first ran: one step each for a sweep, the trials
    of each load for ``bench --repeat``."""
    groups: list[tuple[dict[str, Any] | None, list[StoredStep]]] = []
    for step in run.steps:
        load = _load(step)
        for key, members in groups:
            if key == load:
                members.append(step)
                break
        else:
            groups.append((load, [step]))
    return groups


def unlike_fields(base: StoredRun, new: StoredRun) -> list[str]:
    """What makes two runs not comparable, one phrase each (empty: they are alike): the model, the API, the
    prompts' lengths, the steps' loads, and prompt-cache hit rates more than `CACHE_POINTS` apart."""
    out = []
    for name, b, n in (("model", base.model, new.model), ("api", base.api, new.api)):
        if b != n:
            out.append(f"{name} ({quoted(b)} vs {quoted(n)})")
    b_prompts, n_prompts = base.spec.prompt_shape, new.spec.prompt_shape
    for key in b_prompts:
        b_value, n_value = b_prompts[key], n_prompts[key]
        if b_value != n_value:
            out.append(f"spec.{key} ({b_value!r} vs {n_value!r})")
    b_groups, n_groups = load_groups(base), load_groups(new)
    if len(b_groups) != len(n_groups):
        out.append(f"number of loads ({len(b_groups)} vs {len(n_groups)})")
    for number, ((b_load, b_steps), (n_load, n_steps)) in enumerate(zip(b_groups, n_groups, strict=False), 1):
        if b_load != n_load:
            out.append(f"load {number} ({_short(b_steps[0])} vs {_short(n_steps[0])})")
        for name, label in (("prompt_cache_hit_rate", "prompt_cache_hit_rate"),
                            ("prefix_cache_hit_rate", "server prefix_cache_hit_rate")):
            b_rate, n_rate = _cache_rate(b_steps, name), _cache_rate(n_steps, name)
            if b_rate is not None and n_rate is not None and abs(b_rate - n_rate) > CACHE_POINTS:
                out.append(f"{_short(b_steps[0])} {label} ({100 * b_rate:.0f}% vs {100 * n_rate:.0f}%: a "
                           "cache-warmed run is not comparable)")
    return out


def run_gpus(run: StoredRun) -> tuple[int | None, str]:
    """How many GPUs served ``run`` and how that is known (`tokometer.gpu_count.gpu_count`): its spec's
    ``gpus`` (``bench --gpus``) first, then the engine saved with it."""
    return gpu_count(run.engine.to_json() if run.engine else None, run.spec.gpus)


def front_loads(run: StoredRun, records: Sequence[RequestRecord], name: str | None = None) -> pareto.RunLoads:
    """``run``'s loads as the Pareto front takes them: each load's trials pooled (`tokometer.metrics.pooling`,
    as the report's knee pools them), with the run's GPUs."""
    by_step: dict[int, list[RequestRecord]] = {}
    for r in records:
        by_step.setdefault(r.step, []).append(r)
    loads = []
    for _, steps in load_groups(run):
        trials = [r for s in steps for r in by_step.get(s.index, [])]
        pooled = pool_trials([s.summary for s in steps if s.summary is not None], trials)
        loads.append((_short(steps[0]), pooled.throughput, pooled.decode_p50))
    gpus, source = run_gpus(run)
    return pareto.RunLoads(run.id, name or f"run {run.id}", tuple(loads), gpus, source)


@dataclass(frozen=True)
class Fronts:
    """NEW's Pareto front against BASE's: the comparison (``a``: BASE, ``b``: NEW), its basis and a sentence."""

    comparison: pareto.FrontComparison
    basis: str
    """``total`` or ``per GPU``."""
    note: str
    """How each run's GPUs are known (`tokometer.metrics.pareto.basis_note`)."""
    base_name: str
    new_name: str

    @property
    def verdict_text(self) -> str:
        return self.comparison.sentence(self.base_name, self.new_name)

    def to_json(self) -> dict[str, Any]:
        return {"basis": self.basis, "note": self.note, "x": self.comparison.unit,
                "y": "decode tok/s per request (p50)", **self.comparison.to_json("base", "new"),
                "text": self.verdict_text}


def compare_fronts(base: StoredRun, new: StoredRun, base_records: Sequence[RequestRecord],
                   new_records: Sequence[RequestRecord]) -> Fronts:
    """NEW's Pareto front against BASE's (see the module docstring)."""
    loads = [front_loads(base, base_records), front_loads(new, new_records)]
    basis, (base_points, new_points) = pareto.points(loads)
    unit = "output tok/s per GPU" if basis == "per GPU" else "output tok/s"
    found = pareto.compare_fronts([p for p in base_points if p is not None], [p for p in new_points if p is not None],
                                  unit)
    return Fronts(found, basis, pareto.basis_note(basis, loads), loads[0].name, loads[1].name)


@dataclass(frozen=True)
class StepComparison:
    index: int
    """The first step of the load in BASE."""
    load: dict[str, Any] | None
    base_requests: int
    new_requests: int
    metrics: list[MetricComparison]
    base_trials: int = 1
    new_trials: int = 1
    tenant: str | None = None
    """The tenant of a mix (``bench --mix``) whose requests alone this compares; None: the whole load."""

    def to_json(self) -> dict[str, Any]:
        return {"step": self.index, "load": self.load, "tenant": self.tenant, "base_requests": self.base_requests,
                "new_requests": self.new_requests, "base_trials": self.base_trials, "new_trials": self.new_trials,
                "metrics": [x.to_json() for x in self.metrics]}


@dataclass(frozen=True)
class Comparison:
    """Two runs compared load by load; `regressions` decides the exit status."""

    base_id: int
    new_id: int
    steps: list[StepComparison]
    unlike: list[str] = field(default_factory=list)
    """Why the runs are not comparable (compared anyway: ``--force``)."""
    notes: list[str] = field(default_factory=list)
    resamples: int = RESAMPLES
    seed: int = SEED
    fronts: Fronts | None = None
    """NEW's Pareto front against BASE's (not part of the verdict)."""
    window: Window = "step"
    """The part of each step compared: ``step`` (all of it) or ``steady`` (its steady state)."""

    def with_verdict(self, wanted: Verdict) -> list[tuple[StepComparison, MetricComparison]]:
        return [(s, x) for s in self.steps for x in s.metrics if x.verdict == wanted]

    @property
    def regressions(self) -> list[tuple[StepComparison, MetricComparison]]:
        return self.with_verdict("regression")

    @property
    def verdict(self) -> Literal["regression", "pass"]:
        return "regression" if self.regressions else "pass"

    def to_json(self) -> dict[str, Any]:
        counts = {v: len(self.with_verdict(v)) for v in get_args(Verdict)}
        return {"base": self.base_id, "new": self.new_id, "verdict": self.verdict, "counts": counts,
                "window": self.window, "unlike": self.unlike, "notes": self.notes,
                "method": {"bootstrap_resamples": self.resamples, "seed": self.seed, "confidence": CONFIDENCE,
                           "effect_size": "cliffs_delta", "trial_noise": "relative sample standard deviation of "
                           "per-trial values; above the threshold: cannot tell"},
                "steps": [s.to_json() for s in self.steps],
                "pareto": self.fronts.to_json() if self.fronts is not None else None}


def _steady_of(step: StoredStep, records: list[RequestRecord]) -> list[RequestRecord] | str:
    """The requests of ``step``'s steady state, as `tokometer.metrics.window.steady_state` chose them when the
    step was summarised (the tolerance saved with it); else why there are none."""
    summary = step.summary
    state = summary.steady_state if summary is not None else None
    if not state:
        return "no steady state saved"
    if not state.get("found"):
        return f"no steady state ({state.get('reason', 'not found')})"
    if step.load is None:
        return "its load is unknown"
    tolerance = state.get("tolerance")
    if not isinstance(tolerance, (int, float)) or isinstance(tolerance, bool) or not 0 < tolerance < 1:
        return f"a steady state saved without its tolerance ({tolerance!r})"
    return steady_requests(records, step.load, float(tolerance))


def _has_steady_state(run: StoredRun) -> bool:
    return any((summary := s.summary) is not None and summary.steady_state for s in run.steps)


def _trials(records: Sequence[RequestRecord], steps: Sequence[StoredStep], slo: SLO | None, window: Window,
            missing: list[str]) -> list[StepSample]:
    """The samples of a load's trials (``steps``) over ``window``; why a trial has none is added to ``missing``."""
    by_step: dict[int, list[RequestRecord]] = {}
    for r in records:
        by_step.setdefault(r.step, []).append(r)
    out = []
    for st in steps:
        chosen: list[RequestRecord] | str = by_step.get(st.index, [])
        if window == "steady" and isinstance(chosen, list):
            chosen = _steady_of(st, chosen)
        if isinstance(chosen, str):
            missing.append(chosen)
        elif (sample := StepSample.of(chosen, slo)).n:
            out.append(sample)
    return out


def _tenant_steps(base: StoredRun, new: StoredRun, steps: tuple[Sequence[StoredStep], Sequence[StoredStep]],
                  records: tuple[Sequence[RequestRecord], Sequence[RequestRecord]],
                  thresholds: Mapping[str, float] | None, *, resamples: int, seed: int,
                  window: Window) -> list[StepComparison]:
    """A load's comparison per tenant of a mix (``bench --mix``) that both runs have, matched by name, each
    over that tenant's requests: its latencies and error rate, not its throughput or goodput, which follow how
    many requests the mix's draw gave it (another seed, another count), not the server
    (`tokometer.metrics.tenants`); none without a mix on both sides."""
    from tokometer.metrics.tenants import mix_slos

    base_slos, new_slos = mix_slos(base.spec.get("mix")), mix_slos(new.spec.get("mix"))
    per_request = {d.key for d in gate_metrics() if d.kind not in ("throughput", "goodput")}
    out = []
    for name in (n for n in base_slos if n in new_slos):
        b_trials = _trials([r for r in records[0] if r.tenant == name], steps[0], None, window, [])
        n_trials = _trials([r for r in records[1] if r.tenant == name], steps[1], None, window, [])
        if not b_trials or not n_trials:
            continue
        b_sample, n_sample = StepSample.pooled(b_trials), StepSample.pooled(n_trials)
        first = steps[0][0]
        out.append(StepComparison(index=first.index, load=_load(first), base_requests=b_sample.n,
                                  new_requests=n_sample.n, base_trials=len(b_trials), new_trials=len(n_trials),
                                  tenant=name,
                                  metrics=[x for x in compare_samples(b_sample, n_sample, thresholds,
                                                                      resamples=resamples, seed=seed + first.index,
                                                                      base_trials=b_trials, new_trials=n_trials)
                                           if x.key in per_request]))
    return out


def _refuse(base: StoredRun, new: StoredRun, unlike: Sequence[str], force: bool, window: Window) -> None:
    """`ConfigError` for unlike runs (unless ``force``), and for a run without a steady state, for ``steady``."""
    if unlike and not force:
        raise ConfigError(f"runs {base.id} and {new.id} are not alike: {'; '.join(unlike)} "
                          "(--force compares them anyway)")
    if window == "steady":
        for run in (base, new):
            if not _has_steady_state(run):
                raise ConfigError(f"run {run.id} has no steady state saved (a run saved before tokometer kept "
                                  "one, or a trace or sessions run): compare whole steps (--window step)")


def compare_runs(base: StoredRun, new: StoredRun, base_records: Sequence[RequestRecord],
                 new_records: Sequence[RequestRecord], thresholds: Mapping[str, float] | None = None, *,
                 force: bool = False, resamples: int = RESAMPLES, seed: int = SEED,
                 window: Window = "step") -> Comparison:
    """Compare two saved runs load by load (matched in the order the loads first ran; the trials of a load
    pooled), over whole steps or (``window="steady"``) their steady states. Unlike runs (`unlike_fields`) raise
    `ConfigError` naming what differs, unless ``force``; so does a run without a steady state saved, for
    ``steady``."""
    unlike = unlike_fields(base, new)
    _refuse(base, new, unlike, force, window)
    base_slo, new_slo = _slo(base), _slo(new)
    slo_alike = base_slo == new_slo
    notes = []
    if not slo_alike and not (base_slo.empty and new_slo.empty):
        notes.append("goodput not compared: the runs' objectives (--slo-*) differ")
    if window == "steady":
        notes.append("each load over its steady state (--window steady); the Pareto fronts are of whole steps")
    notes += probe_notes(load_groups(base), load_groups(new))
    steps = []
    for (b_load, b_steps), (_, n_steps) in zip(load_groups(base), load_groups(new), strict=False):
        first = b_steps[0]
        b_missing: list[str] = []
        n_missing: list[str] = []
        b_trials = _trials(base_records, b_steps, base_slo if slo_alike else None, window, b_missing)
        n_trials = _trials(new_records, n_steps, new_slo if slo_alike else None, window, n_missing)
        if not b_trials or not n_trials:
            side, why = ("BASE", b_missing) if not b_trials else ("NEW", n_missing)
            notes.append(f"{_short(first)} not compared: " + (f"{side} has {why[0]}" if why else
                                                               f"no requests measured in {side}"))
            continue
        b_sample, n_sample = StepSample.pooled(b_trials), StepSample.pooled(n_trials)
        steps.append(StepComparison(index=first.index, load=b_load, base_requests=b_sample.n,
                                    new_requests=n_sample.n, base_trials=len(b_trials), new_trials=len(n_trials),
                                    metrics=compare_samples(b_sample, n_sample, thresholds, resamples=resamples,
                                                            seed=seed + first.index, base_trials=b_trials,
                                                            new_trials=n_trials)))
        steps.extend(_tenant_steps(base, new, (b_steps, n_steps), (base_records, new_records), thresholds,
                                   resamples=resamples, seed=seed, window=window))
    if not steps:
        part = "a steady state" if window == "steady" else "measured requests"
        raise ConfigError(f"runs {base.id} and {new.id} have no load with {part} in both"
                          + (f" ({notes[-1]})" if window == "steady" and notes else ""))
    return Comparison(base_id=base.id, new_id=new.id, steps=steps, unlike=unlike, notes=notes,
                      resamples=resamples, seed=seed, fronts=compare_fronts(base, new, base_records, new_records),
                      window=window)
