"""The Pareto front of per-request speed against total throughput, and two fronts compared. Pure.

Each load of a run is one point (its trials pooled, as the knee pools them: `tokometer.metrics.pooling`):

- x, ``throughput``: output tokens per second of all requests together, divided by the run's GPU count when
  the run states it (``bench --gpus``) or the engine saved with it names it (`tokometer.gpu_count`) and
  every run on the chart knows its own (`points`; otherwise all points use the total, and the note says which
  run's count is unknown);
- y, ``speed``: per-request decode speed p50 (tokens per second of one request).

Both are better higher. A point **dominates** another when it is at least as good on both axes and better on
one; a point is **on the front** when no other point dominates it (`standings`). Two equal points do not
dominate each other: both are on the front, or both dominated. A point missing either number (None, NaN,
infinite or negative: nothing completed, no token after the first) is no point (`point` gives None).

Two fronts A and B are compared as the best per-request speed each offers at a throughput of at least x,
``S(x) = max{speed of a front point with throughput >= x}``, over every throughput either front reaches
(beyond a front's largest throughput it offers nothing). B's front **dominates** A's when ``S_B >= S_A``
everywhere and somewhere ``>``: then every point of A's front is matched or beaten on both axes by one of B's.
The fronts **cross** where the one ahead changes; ``crossings`` are those throughputs. The comparison is of
the point values (p50s and throughputs as measured); it has no interval (``compare``'s metric table has).
Definition also in docs/reference/metrics.md ("The Pareto front").
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["FrontComparison", "Point", "RunLoads", "Segment", "Standing", "basis_note", "best_speed",
           "compare_fronts", "dominates", "front", "point", "points", "standings"]

Ahead = Literal["a", "b", "tie"]
Verdict = Literal["a dominates", "b dominates", "same", "cross", "empty"]


@dataclass(frozen=True, slots=True)
class Point:
    """One load of one run on the speed-against-throughput plane."""

    run: int
    """The run's id."""
    run_name: str
    load: str
    """The load's short form: ``c=4``, ``10/s``."""
    throughput: float
    """Output tok/s of all requests: in all, or per GPU (the front's basis)."""
    speed: float
    """Decode tok/s of one request, p50."""
    gpus: int | None = None
    """The GPUs ``throughput`` was divided by; None: the total."""

    @property
    def name(self) -> str:
        return f"{self.run_name} {self.load}"

    def to_json(self) -> dict[str, Any]:
        return {"run": self.run, "run_name": self.run_name, "load": self.load, "throughput_tok_s": self.throughput,
                "decode_speed_p50": self.speed, "gpus": self.gpus}


def _usable(value: Any) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
            and value >= 0)


def point(run: int, run_name: str, load: str, throughput: float | None, speed: float | None,
          gpus: int | None = None) -> Point | None:
    """The point of a load (``throughput`` in all; divided by ``gpus`` when given); None without both numbers."""
    if not _usable(throughput) or not _usable(speed):
        return None
    assert throughput is not None and speed is not None
    return Point(run, run_name, load, float(throughput) / gpus if gpus else float(throughput), float(speed), gpus)


def dominates(a: Point, b: Point) -> bool:
    """``a`` is at least as good as ``b`` on both axes and better on one."""
    return a.throughput >= b.throughput and a.speed >= b.speed and (a.throughput > b.throughput or a.speed > b.speed)


@dataclass(frozen=True, slots=True)
class Standing:
    """Where one point stands: on the front, or dominated by a front point (its position in the points)."""

    on_front: bool
    dominated_by: int | None = None


def _order(pts: Sequence[Point], indices: Iterable[int]) -> list[int]:
    """Throughput ascending, then speed descending, then as given: the front read left to right."""
    return sorted(indices, key=lambda i: (pts[i].throughput, -pts[i].speed, i))


def standings(pts: Sequence[Point]) -> list[Standing]:
    """Each point's standing. A dominated point names the front point of least throughput that dominates it
    (of those, the fastest per request: the nearest step of the front above and to its right)."""
    on = [not any(dominates(q, p) for q in pts) for p in pts]
    ordered = _order(pts, (i for i, flag in enumerate(on) if flag))
    return [Standing(True) if on[i] else Standing(False, next(j for j in ordered if dominates(pts[j], p)))
            for i, p in enumerate(pts)]


def front(pts: Sequence[Point]) -> list[int]:
    """The positions of the front's points, throughput ascending (speed then descends)."""
    return _order(pts, (i for i, s in enumerate(standings(pts)) if s.on_front))


def best_speed(front_points: Sequence[Point], throughput: float) -> float | None:
    """``S(x)``: the best per-request speed of a point of throughput at least ``throughput``; None past them all."""
    speeds = [p.speed for p in front_points if p.throughput >= throughput]
    return max(speeds) if speeds else None


@dataclass(frozen=True, slots=True)
class Segment:
    """A range of throughput, ``(low, high]``, over which one front offers more speed per request (or both the
    same: ``tie``)."""

    low: float
    high: float
    ahead: Ahead

    def to_json(self) -> dict[str, Any]:
        return {"from_tok_s": self.low, "to_tok_s": self.high, "ahead": self.ahead}


def _fmt(value: float) -> str:
    return f"{value:,.1f}" if abs(value) < 100 else f"{value:,.0f}"


@dataclass(frozen=True)
class FrontComparison:
    """Front A against front B: each front point's dominator in the other front, the segments, the verdict."""

    a: tuple[Point, ...]
    b: tuple[Point, ...]
    """Each front's points, throughput ascending."""
    a_dominated_by: tuple[Point | None, ...]
    """For each of A's front points, the point of B's front that dominates it (None: none does)."""
    b_dominated_by: tuple[Point | None, ...]
    segments: tuple[Segment, ...]
    verdict: Verdict
    crossings: tuple[float, ...]
    """The throughputs where the front ahead changes (``cross`` only)."""
    unit: str = "output tok/s"

    def sentence(self, a_name: str, b_name: str) -> str:
        """The verdict in one line, the fronts named."""
        if self.verdict == "empty":
            empty = a_name if not self.a else b_name
            return f"no front to compare: {empty} has no load with both throughput and decode speed"
        if self.verdict == "same":
            return f"the fronts are the same: {a_name} and {b_name} offer the same speed at every throughput"
        if self.verdict in ("a dominates", "b dominates"):
            win, lose = (a_name, b_name) if self.verdict == "a dominates" else (b_name, a_name)
            losers = self.b if self.verdict == "a dominates" else self.a
            beaten = self.b_dominated_by if self.verdict == "a dominates" else self.a_dominated_by
            strict = sum(d is not None for d in beaten)
            n = len(losers)
            each = f"{lose}'s one front point is" if n == 1 else f"each of {lose}'s {n} front points is"
            return f"{win}'s front dominates {lose}'s: {each} matched or beaten on both axes ({strict} beaten)"
        names = {"a": a_name, "b": b_name}
        parts = [f"{names[s.ahead]} up to {_fmt(s.high)}" if i == 0 else
                 f"{names[s.ahead]} from {_fmt(s.low)} to {_fmt(s.high)}" for i, s in enumerate(self._decided())]
        at = " and ".join(_fmt(x) for x in self.crossings)
        return f"the fronts cross at {at} {self.unit}: faster per request: {', '.join(parts)}"

    def _decided(self) -> list[Segment]:
        """The segments with a front ahead, runs of one front merged."""
        out: list[Segment] = []
        for s in self.segments:
            if s.ahead == "tie":
                continue
            if out and out[-1].ahead == s.ahead:
                out[-1] = Segment(out[-1].low, s.high, s.ahead)
            else:
                out.append(s)
        return out

    def to_json(self, a_key: str = "a", b_key: str = "b") -> dict[str, Any]:
        def side(pts: Sequence[Point], by: Sequence[Point | None]) -> list[dict[str, Any]]:
            return [{**p.to_json(), "dominated_by": d.to_json() if d is not None else None}
                    for p, d in zip(pts, by, strict=True)]

        renamed = {"a dominates": f"{a_key} dominates", "b dominates": f"{b_key} dominates"}
        return {f"{a_key}_front": side(self.a, self.a_dominated_by),
                f"{b_key}_front": side(self.b, self.b_dominated_by),
                "verdict": renamed.get(self.verdict, self.verdict), "crossings_tok_s": list(self.crossings),
                "segments": [{**s.to_json(), "ahead": {"a": a_key, "b": b_key}.get(s.ahead, s.ahead)}
                             for s in self.segments]}


def compare_fronts(a_points: Sequence[Point], b_points: Sequence[Point], unit: str = "output tok/s") -> FrontComparison:
    """Front of ``a_points`` against the front of ``b_points`` (each given all its points; the front is taken).
    A front point's dominator in the other front is, as in `standings`, the one of least throughput."""
    a = tuple(a_points[i] for i in front(a_points))
    b = tuple(b_points[i] for i in front(b_points))

    def dominator(p: Point, other: Sequence[Point]) -> Point | None:
        return next((q for q in other if dominates(q, p)), None)

    a_by = tuple(dominator(p, b) for p in a)
    b_by = tuple(dominator(p, a) for p in b)
    if not a or not b:
        return FrontComparison(a, b, a_by, b_by, (), "empty", (), unit)
    edges = sorted({p.throughput for p in (*a, *b)})
    segments: list[Segment] = []
    low = 0.0
    for high in edges:
        sa, sb = best_speed(a, high), best_speed(b, high)
        ahead: Ahead = "tie" if sa == sb else "a" if sb is None or (sa is not None and sa > sb) else "b"
        if segments and segments[-1].ahead == ahead:
            segments[-1] = Segment(segments[-1].low, high, ahead)
        else:
            segments.append(Segment(low, high, ahead))
        low = high
    decided = [s for s in segments if s.ahead != "tie"]
    sides = {s.ahead for s in decided}
    crossings: list[float] = []
    for before, after in itertools.pairwise(decided):
        if before.ahead != after.ahead:
            crossings.append(before.high)
    verdict: Verdict = ("same" if not sides else "a dominates" if sides == {"a"} else "b dominates"
                        if sides == {"b"} else "cross")
    return FrontComparison(a, b, a_by, b_by, tuple(segments), verdict, tuple(crossings), unit)


# -- which throughput: per GPU where the run knows its GPUs -------------------------------------------------

@dataclass(frozen=True)
class RunLoads:
    """One run's loads (short form, pooled throughput in all, pooled decode p50) and its GPUs
    (`tokometer.gpu_count`)."""

    run: int
    name: str
    loads: tuple[tuple[str, float | None, float | None], ...]
    gpus: int | None
    gpus_source: str


def points(runs: Sequence[RunLoads]) -> tuple[str, list[list[Point | None]]]:
    """The basis (``per GPU`` when every run knows its GPUs, else ``total``) and each run's points on that
    basis, one per load in order (None for a load without both numbers)."""
    per_gpu = bool(runs) and all(r.gpus for r in runs)
    out = [[point(r.run, r.name, load, x, y, r.gpus if per_gpu else None) for load, x, y in r.loads] for r in runs]
    return ("per GPU" if per_gpu else "total"), out


def basis_note(basis: str, runs: Sequence[RunLoads]) -> str:
    """One sentence: which throughput the points use and how each run's GPUs are (or are not) known."""
    def said(chosen: Sequence[RunLoads]) -> str:
        by_reason: dict[str, list[str]] = {}
        for r in chosen:
            by_reason.setdefault(r.gpus_source, []).append(r.name)
        return "; ".join(f"{', '.join(names)}: {reason}" for reason, names in by_reason.items())

    if basis == "per GPU":
        return f"Throughput per GPU: {said(runs)}."
    return f"Throughput of all requests (per GPU unknown: {said([r for r in runs if not r.gpus])})."
