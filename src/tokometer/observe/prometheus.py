"""One scrape of ``/metrics`` -> a `Snapshot`: parsed by prometheus_client's exposition parser, normalised.

`parse` reads the text exposition format with ``prometheus_client.parser`` (no regular
expressions), keeps every sample in ``Snapshot.raw``, recognises the engine family from the names
present (`tokometer.observe.vocabulary.detect`) and fills the normalised gauges, counters and
histograms: values of one name are summed over its label sets (per model, per engine index, per
upstream), but for a family's ratio gauges (``averaged``: their mean over the label sets), and
histograms are merged bucket by bucket. A counter kept per label value (``per_label``: vLLM's accepted
tokens per draft position) becomes one normalised counter per value.

Bad input: text that is not the exposition format (an HTML page, a JSON body, a truncated line)
raises ValueError saying so, so a scraper can record the scrape as a gap; well-formed text whose
names no known engine uses gives a Snapshot with source ``unknown`` and only ``raw`` filled.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable

from prometheus_client.parser import text_string_to_metric_families

from tokometer.observe.snapshot import Histogram, Snapshot
from tokometer.observe.vocabulary import SIM_AT_REQUEST_END, SIM_INFO, Family, Pick, detect, family

__all__ = ["merge_buckets", "parse", "reading"]

_Sample = tuple[str, dict[str, str], float]
_EMPTY = Histogram(buckets=((math.inf, 0.0),), count=0.0, sum=0.0)


def reading(value: float) -> bool:
    """Whether a sample's value is one tokometer reads: finite and not negative. No engine's gauge, counter or
    histogram series that tokometer reads, nor any DCGM field, is negative or infinite (NaN is no reading)."""
    return math.isfinite(value) and value >= 0


def _read(text: str) -> tuple[list[_Sample], dict[str, str]]:
    """Every sample, and every declared family's type (by family name: a counter's without ``_total``)."""
    try:
        families = list(text_string_to_metric_families(text))
    except (ValueError, TypeError, IndexError, KeyError) as exc:
        raise ValueError(f"not Prometheus text exposition format: {exc}") from None
    samples = [(s.name, dict(s.labels), float(s.value)) for fam in families for s in fam.samples]
    return samples, {fam.name: fam.type for fam in families}


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _key(name: str, labels: dict[str, str]) -> str:
    if not labels:
        return name
    body = ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(labels.items()))
    return f"{name}{{{body}}}"


def _bound(le: str) -> float | None:
    try:
        return float(le)
    except ValueError:
        return None


def _cumulative_at(buckets: list[tuple[float, float]], bound: float) -> float:
    """A cumulative histogram's count at ``bound``: that of its largest ``le`` <= bound (a lower bound)."""
    count = 0.0
    for le, value in buckets:
        if le > bound:
            break
        count = value
    return count


def merge_buckets(series: Iterable[Iterable[tuple[float, float]]]) -> tuple[tuple[float, float], ...]:
    """Cumulative ``(le, count)`` series summed over the union of their bounds.

    Series with the same bounds add exactly. Where one lacks a bound, its count there is taken at
    its next lower bound, so the sum stays cumulative (monotonic) and never over-counts."""
    ordered = [sorted(s) for s in series]
    bounds = sorted({le for s in ordered for le, _ in s})
    return tuple((b, sum(_cumulative_at(s, b) for s in ordered)) for b in bounds)


def _histograms(samples: list[_Sample]) -> dict[str, Histogram | None]:
    """Every ``X_bucket{le=...}`` family with its ``X_count``/``X_sum``, merged over label sets. One with a value
    that is no `reading`, or a bound that is not a number of at least 0, is None (present, and not read): every
    histogram tokometer reads is of durations or token counts, and one such value would make its percentiles or
    mean."""
    buckets: dict[str, dict[str, list[tuple[float, float]]]] = defaultdict(lambda: defaultdict(list))
    counts: dict[str, float] = defaultdict(float)
    sums: dict[str, float] = defaultdict(float)
    broken: set[str] = set()
    for name, labels, value in samples:
        if name.endswith("_bucket") and "le" in labels:
            base, le = name[: -len("_bucket")], _bound(labels["le"])
            if le is None or not le >= 0 or not reading(value):
                broken.add(base)
                continue
            rest = _key("", {k: v for k, v in labels.items() if k != "le"})
            buckets[base][rest].append((le, value))
        elif name.endswith(("_count", "_sum")):
            base, part = name.rsplit("_", 1)
            if not reading(value):
                broken.add(base)
            else:
                (counts if part == "count" else sums)[base] += value
    out: dict[str, Histogram | None] = dict.fromkeys(broken)
    for base, per_labels in buckets.items():
        merged = merge_buckets(per_labels.values())
        if base in broken or not merged or merged[-1][0] != math.inf:
            continue  # no +Inf bucket: not a well-formed histogram
        out[base] = Histogram(buckets=merged, count=counts.get(base, merged[-1][1]), sum=sums.get(base, 0.0))
    return out


def _family_name(sample_name: str) -> str:
    for suffix in ("_total", "_sum", "_count"):
        if sample_name.endswith(suffix):
            return sample_name[: -len(suffix)]
    return sample_name


def _pick(samples: list[_Sample], pick: Pick, declared: dict[str, str] | None = None) -> float | None:
    """The sum of ``pick``'s matching samples. A declared counter or histogram with no matching sample
    yet (a labelled metric before its first observation) counts 0; otherwise None: not exported."""
    total: float | None = None
    if declared is not None and declared.get(_family_name(pick.name)) in ("counter", "histogram"):
        total = 0.0
    for name, labels, value in samples:
        if name != pick.name or not reading(value):  # a server's numbers are data
            continue
        if all(labels.get(k) == v for k, v in pick.labels):
            total = (total or 0.0) + value
    return total if total is None or math.isfinite(total) else None


def _first(samples: list[_Sample], picks: tuple[Pick, ...], declared: dict[str, str] | None = None) -> float | None:
    for pick in picks:
        value = _pick(samples, pick, declared)
        if value is not None:
            return value
    return None


def _mean(samples: list[_Sample], picks: tuple[Pick, ...]) -> float | None:
    """The mean over label sets of the first of ``picks`` exported (a ratio per rank is averaged, not summed)."""
    for pick in picks:
        values = [v for name, labels, v in samples if name == pick.name and reading(v)
                  and all(labels.get(k) == want for k, want in pick.labels)]
        if values:
            return sum(values) / len(values)
    return None


def _per_label(samples: list[_Sample], fam: Family) -> dict[str, float]:
    """``per_label`` counters: prefix + label value -> the sum over the other labels (short label values only)."""
    out: dict[str, float] = {}
    for prefix, (sample, label) in fam.per_label.items():
        for name, labels, value in samples:
            key = labels.get(label, "")
            if name == sample and key.isdigit() and len(key) <= 3 and reading(value):
                out[prefix + key] = out.get(prefix + key, 0.0) + value
    return out


def _family_of(samples: list[_Sample], names: set[str]) -> tuple[str, Family | None]:
    """(source, mapping): the simulator says which engine's names it speaks; others are detected."""
    if SIM_INFO in names:
        spoken = next((labels.get("metrics_names", "") for name, labels, _ in samples if name == SIM_INFO), "")
        return "tokometer-sim", family(spoken) or detect(names - {SIM_INFO})
    fam = detect(names)
    return (fam.source if fam else "unknown"), fam


def parse(text: str, at_ns: int) -> Snapshot:
    """One ``/metrics`` answer as a `Snapshot` stamped ``at_ns``; ValueError if it is not the format."""
    samples, declared = _read(text)
    raw: dict[str, float] = {}
    for name, labels, value in samples:
        key = _key(name, labels)
        raw[key] = raw.get(key, 0.0) + value
    names = {name for name, _, _ in samples}
    source, fam = _family_of(samples, names)
    if fam is None:
        return Snapshot(at_ns=at_ns, source=source, raw=raw)
    gauges = {k: v for k, picks in fam.gauges.items()
              if (v := _mean(samples, picks) if k in fam.averaged else _first(samples, picks)) is not None}
    counters = {k: v for k, picks in fam.counters.items() if (v := _first(samples, picks, declared)) is not None}
    counters.update(_per_label(samples, fam))
    every = _histograms([s for s in samples if s[0].startswith(fam.prefixes)])
    histograms: dict[str, Histogram] = {}
    for norm, candidates in fam.histograms.items():
        present = [c for c in candidates if c in every]
        found = every[present[0]] if present else None  # None where present: not read in this scrape
        if not present and any(declared.get(c) == "histogram" for c in candidates):
            found = _EMPTY  # declared, nothing observed yet (a labelled histogram before its first request)
        if found is not None:
            histograms[norm] = found
    at_end = SIM_AT_REQUEST_END if source == "tokometer-sim" else fam.at_request_end
    return Snapshot(at_ns=at_ns, source=source, gauges=gauges, counters=counters, histograms=histograms, raw=raw,
                    at_request_end=tuple(c for c in at_end if c in counters))
