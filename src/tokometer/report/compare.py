"""Output of ``tokometer compare``: a table per step, the two runs' Pareto fronts and a verdict line on the
console, or a markdown summary for a pull-request comment. (JSON is `tokometer.compare.gate.Comparison.to_json`.)"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from tokometer.compare.gate import Comparison, Fronts, MetricComparison, StepComparison
from tokometer.metrics.pareto import Point

__all__ = ["front_rows", "render_compare", "render_markdown", "verdict_line"]

_STYLE = {"regression": "bold red", "improvement": "green", "within threshold": "", "no change": "",
          "cannot tell": "yellow"}


def _value(x: MetricComparison, value: float | None) -> str:
    if value is None:
        return "-"
    if x.key == "error_rate":
        return f"{100 * value:.1f}%"
    digits = 3 if abs(value) < 10 else 2 if abs(value) < 100 else 1
    return f"{value:,.{digits}f}"


def _signed(x: MetricComparison, value: float | None) -> str:
    if value is None:
        return "-"
    return f"{100 * value:+.1f}{'%' if x.relative else ' pt'}"


def _interval(x: MetricComparison) -> str:
    if x.ci_low is None or x.ci_high is None:
        return "-"
    return f"[{_signed(x, x.ci_low)}, {_signed(x, x.ci_high)}]"


def _load(step: StepComparison) -> str:
    load = step.load or {}
    tenant = f", tenant {step.tenant}" if step.tenant is not None else ""
    if "concurrency" in load:
        return f"concurrency {load['concurrency']}{tenant}"
    if "rate" in load:
        return f"rate {load['rate']}/s{tenant}"
    return f"load unknown{tenant}"


def _title(step: StepComparison, comparison: Comparison) -> str:
    trials = (f" in {step.base_trials} vs {step.new_trials} trials"
              if step.base_trials > 1 or step.new_trials > 1 else "")
    steady = ", steady state" if comparison.window == "steady" else ""
    load = _load(step)
    return f"{load[:1].upper() + load[1:]}{steady} ({step.base_requests} vs {step.new_requests} requests{trials})"


def _noise(x: MetricComparison) -> str:
    return "-" if x.noise is None else f"±{100 * x.noise:.1f}{'%' if x.relative else ' pt'}"


def _has_trials(step: StepComparison) -> bool:
    return step.base_trials > 1 or step.new_trials > 1


def _verdict(x: MetricComparison) -> str:
    """The verdict as printed: a real move under the threshold names its size ("within threshold (+2.95%)")."""
    if x.verdict == "within threshold" and x.change is not None:
        return f"within threshold ({100 * x.change:+.2f}{'%' if x.relative else ' pt'})"
    return x.verdict


def _effect(value: float | None) -> str:
    return "-" if value is None else f"{value:+.2f}"


def verdict_line(comparison: Comparison) -> str:
    """One line: FAIL with the regressions, or PASS with what else was found."""
    c = comparison
    regressions = c.regressions
    if regressions:
        named = ", ".join(f"{_load(s)} {x.label} {_signed(x, x.change)}" for s, x in regressions)
        return f"FAIL: run {c.new_id} regressed against run {c.base_id}: {named}"
    improved = len(c.with_verdict("improvement"))
    unsure = len(c.with_verdict("cannot tell"))
    within = len(c.with_verdict("within threshold"))
    same = len(c.with_verdict("no change"))
    text = f"PASS: no regression of run {c.new_id} against run {c.base_id} ({improved} improved"
    text += f", {within} within threshold" if within else ""
    text += f", {same} no change"
    text += f", {unsure} cannot tell: too noisy or too few requests to decide)" if unsure else ")"
    return text


def _notes(comparison: Comparison) -> list[str]:
    out = [f"warning: compared with --force although unlike: {u}" for u in comparison.unlike]
    return out + list(comparison.notes)


_FRONT_COLUMNS = ("front of", "load", "output tok/s", "decode tok/s/req p50", "dominated by the other front")


def _number(value: float) -> str:
    return f"{value:,.1f}"


def front_rows(fronts: Fronts) -> list[list[str]]:
    """A row per point of BASE's front, then of NEW's: its throughput (on the basis), speed, and the other
    front's point that dominates it (``no``: none does)."""
    c = fronts.comparison

    def rows(points: tuple[Point, ...], by: tuple[Point | None, ...], other: str) -> list[list[str]]:
        return [[p.run_name, p.load, _number(p.throughput), _number(p.speed),
                 f"yes: {other} {d.load} ({_number(d.throughput)}, {_number(d.speed)})" if d is not None else "no"]
                for p, d in zip(points, by, strict=True)]

    return rows(c.a, c.a_dominated_by, fronts.new_name) + rows(c.b, c.b_dominated_by, fronts.base_name)


def _front_title(fronts: Fronts) -> str:
    return f"Pareto front: decode tok/s per request (p50) against {fronts.comparison.unit}, each run's loads"


def _render_fronts(console: Console, fronts: Fronts) -> None:
    table = Table(title=_front_title(fronts), title_justify="left", show_edge=False)
    for name in _FRONT_COLUMNS:
        table.add_column(name, justify="right" if "tok/s" in name else "left")
    for row in front_rows(fronts):
        table.add_row(*row)
    console.print(table)
    console.print(f"  {fronts.note}")
    console.print(f"Pareto: {fronts.verdict_text}", style="bold")


def render_compare(console: Console, comparison: Comparison) -> None:
    """A rich table per step (metric, base, new, change, 95 % CI, effect size, threshold, verdict), then the
    verdict line."""
    for note in _notes(comparison):
        console.print(note, style="yellow")
    for step in comparison.steps:
        table = Table(title=_title(step, comparison), title_justify="left", show_edge=False)
        columns = [("metric", "left"), ("base", "right"), ("new", "right"), ("change", "right"), ("95% CI", "right"),
                   ("effect", "right"), ("threshold", "right")]
        columns += [("trial noise", "right")] if _has_trials(step) else []
        for name, justify in [*columns, ("verdict", "left")]:
            table.add_column(name, justify=justify)  # type: ignore[arg-type]
        for x in step.metrics:
            cells = [f"{x.label} ({x.unit})", _value(x, x.base), _value(x, x.new), _signed(x, x.change),
                     _interval(x), _effect(x.effect_size), _threshold(x)]
            cells += [_noise(x)] if _has_trials(step) else []
            table.add_row(*cells, _verdict(x), style=_STYLE[x.verdict])
        console.print(table)
        for x in step.metrics:
            if x.reason:
                console.print(f"  {x.label}: cannot tell: {x.reason}", style="yellow")
    console.print(f"  bootstrap: {comparison.resamples} resamples of requests per run, seed {comparison.seed}; "
                  "effect: Cliff's delta of the per-request values")
    if comparison.fronts is not None:
        _render_fronts(console, comparison.fronts)
    console.print(verdict_line(comparison), style="bold red" if comparison.regressions else "bold green")


def _threshold(x: MetricComparison) -> str:
    return f"±{100 * x.threshold:g}{'%' if x.relative else ' pt'}"


def render_markdown(comparison: Comparison) -> str:
    """A markdown summary for a pull-request comment: the verdict, then a table per step."""
    icon = {"regression": "❌ regression", "improvement": "✅ improvement", "no change": "no change",
            "cannot tell": "⚠️ cannot tell"}
    def shown(x: MetricComparison) -> str:
        return icon.get(x.verdict) or _verdict(x)

    lines: list[str] = [f"### tokometer compare: {verdict_line(comparison)}", ""]
    lines += [f"- {note}" for note in _notes(comparison)]
    if _notes(comparison):
        lines.append("")
    for step in comparison.steps:
        noise = _has_trials(step)
        lines += [f"**{_title(step, comparison)}**", "",
                  "| metric | base | new | change | 95% CI | effect | threshold |" + (" trial noise |" if noise else "")
                  + " verdict |",
                  "| --- | ---: | ---: | ---: | ---: | ---: | ---: |" + (" ---: |" if noise else "") + " --- |"]
        for x in step.metrics:
            cells: list[Any] = [f"{x.label} ({x.unit})", _value(x, x.base), _value(x, x.new), _signed(x, x.change),
                                _interval(x), _effect(x.effect_size), _threshold(x),
                                *([_noise(x)] if noise else []), shown(x)]
            lines.append("| " + " | ".join(str(c) for c in cells) + " |")
        lines.append("")
        reasons = [f"- {x.label}: cannot tell: {x.reason}" for x in step.metrics if x.reason]
        lines += [*reasons, ""] if reasons else []
    if comparison.fronts is not None:
        fronts = comparison.fronts
        lines += [f"**{_front_title(fronts)}**", "", "| " + " | ".join(_FRONT_COLUMNS) + " |",
                  "| --- | --- | ---: | ---: | --- |", *("| " + " | ".join(row) + " |" for row in front_rows(fronts)),
                  "", f"- {fronts.note}", f"- Pareto: {fronts.verdict_text}", ""]
    lines.append(f"<sub>95% intervals: bootstrap over requests, {comparison.resamples} resamples, seed "
                 f"{comparison.seed}; effect: Cliff's delta. A regression is a change in the bad direction whose "
                 "interval excludes zero and whose size exceeds the threshold.</sub>")
    return "\n".join(lines) + "\n"
