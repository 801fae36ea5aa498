"""A tune's answer shown: the rows every output shares, the console (rich), and ``tune --json``'s document.

The rows (`variant_rows`, `beside_rows`, `best_rows`, `front_rows`, `failed_lines`, `note_lines`) are text,
computed once here from a `TuneAnswer`: the console prints them as rich tables, ``report --tune`` as markdown
or HTML tables (`tokometer.report.tune`). `answer_json` is the ``tokometer.tune/1`` record
(`TuneRecord.to_json`) with the judgement beside each variant and the best per objective and the front at the
top (docs/reference/tune-json.md).
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from tokometer.compare.gate import METRICS
from tokometer.tune.answer import MetricVerdict, TuneAnswer, VariantAnswer
from tokometer.tune.noise import MEMORY_TIE, floor_of, memory_tie
from tokometer.tune.outcome import TuneRecord
from tokometer.util.units import GIB

__all__ = ["BESIDE_COLUMNS", "BEST_COLUMNS", "FLOOR_COLUMNS", "FLOOR_RULE", "FRONT_COLUMNS", "answer_json",
           "beside_rows", "best_rows", "failed_lines", "floor_rows", "front_rows", "headline_metrics", "note_lines",
           "render_answer", "variant_columns", "variant_rows", "verdict_text"]

_STYLE = {"better": "green", "worse": "bold red", "no change": "", "cannot decide": "yellow"}
BEST_COLUMNS = ("objective", "best", "value", "why")
FRONT_COLUMNS = ("#", "variant", "load", "output tok/s", "decode tok/s/req p50", "standing")


def headline_metrics(answer: TuneAnswer) -> tuple[str, ...]:
    """The metrics shown in the table: throughput (goodput where the runs have an SLO), TPOT p50, TTFT p99."""
    return answer.throughput_metric, "tpot_p50", "ttft_p99"


def _number(value: float | None) -> str:
    """A figure for a table: thousands separated, more digits for small numbers, ``-`` for none."""
    if value is None:
        return "-"
    return f"{value:,.{3 if abs(value) < 10 else 2 if abs(value) < 100 else 1}f}"


def _change(x: MetricVerdict, value: float | None) -> str:
    return "-" if value is None else f"{100 * value:+.1f}{'%' if x.relative else ' pt'}"


def verdict_text(x: MetricVerdict) -> str:
    """``412.3: better +98.1% [+90.2%, +105.0%]``: the value, the word, the change and its 95 % interval; where
    the noise floor turned ``compare``'s better or worse into ``cannot decide``, the floor too
    (``..., within noise ±61.0%``)."""
    interval = f" [{_change(x, x.interval[0])}, {_change(x, x.interval[1])}]" if x.interval else ""
    floored = ""
    if x.compare_word in ("better", "worse") and x.word == "cannot decide":
        floored = f", within noise ±{_change(x, x.floor).lstrip('+')}" if x.floor is not None else ", no noise floor"
    return f"{_number(x.new)}: {x.word} {_change(x, x.change)}{interval}{floored}"


def _baseline_values(answer: TuneAnswer) -> dict[str, float | None]:
    """The baseline's value of each metric at its headline, as the comparisons of the ranked variants saw it."""
    out: dict[str, float | None] = {}
    for v in answer.variants:
        for key, x in v.verdicts.items() if v.ranked else ():
            out.setdefault(key, x.base)
    return out


def _memory(value: float | None) -> str:
    return "-" if value is None else f"{value / GIB:.2f} GiB"


def _seconds(value: float) -> str:
    return f"{value:.1f} s" if abs(value) < 1e5 else f"{value:.3g} s"


def _startup(v: VariantAnswer) -> str:
    startup = v.outcome.startup if v.outcome is not None else None
    if startup is None:
        return "-"
    warm = f" / {_seconds(startup.second_s)} warm" if startup.second_s is not None else ""
    return f"{_seconds(startup.first_s)}{warm}"


def _changed(v: VariantAnswer) -> str:
    if v.variant.is_baseline:
        return "(baseline)"
    return ", ".join(f"{name}={v.variant.settings.get(name, '')}" for name in v.variant.changed) or "-"


def _estimate(v: VariantAnswer) -> str:
    """What the hardware allows, in a few words: the estimate's ``line``, or why it cannot say."""
    if v.estimate is None:
        return v.estimate_note or "-"
    return str(v.estimate.get("line") or "-")


def variant_columns(answer: TuneAnswer) -> list[str]:
    """The variants table's header: the headline metrics named as ``compare`` names them."""
    labels = {d.key: f"{d.label} ({d.unit})" for d in METRICS}
    metrics = [labels.get(key, key) for key in headline_metrics(answer)]
    return ["variant", "changed", "startup", "status", "load", *metrics]


def variant_rows(answer: TuneAnswer) -> list[list[str]]:
    """One row per variant, in the tune's order (see `variant_columns`)."""
    base = _baseline_values(answer)
    rows = []
    for v in answer.variants:
        cells = []
        for key in headline_metrics(answer):
            if v.variant.is_baseline:
                cells.append(_number(base.get(key)) if v.run is not None else "-")
            else:
                cells.append(verdict_text(v.verdicts[key]) if key in v.verdicts else "-")
        rows.append([v.name, _changed(v), _startup(v), v.status, v.headline or "-", *cells])
    return rows


FLOOR_COLUMNS = ("metric", "baseline", "baseline again", "drift [95% interval]", "noise floor")


def floor_rows(answer: TuneAnswer) -> list[list[str]]:
    """The noise floor: per headline metric and memory, the baseline's two runs, the drift between them and the
    floor every verdict was judged against (`tokometer.tune.noise`); one row saying why, where there is none."""
    floor = answer.floor
    if floor is None or not floor.measured:
        why = floor.note if floor is not None else "the baseline ran once"
        return [["(none)", "-", "-", "-", f"no floor: {why}; nothing is called better or worse"]]
    labels = {d.key: f"{d.label} ({d.unit})" for d in METRICS}
    rows = []
    for key in headline_metrics(answer):
        x = floor.headline.get(key)
        if x is None:
            continue
        interval = f" [{_change(x, x.interval[0])}, {_change(x, x.interval[1])}]" if x.interval else ""
        rows.append([labels.get(key, key), _number(x.base), _number(x.new), f"{_change(x, x.change)}{interval}",
                     f"±{_change(x, floor_of(x)).lstrip('+')}"])
    first, again = floor.memory
    if first is not None and again is not None:
        rows.append(["memory", _memory(first), _memory(again), f"{100 * (again - first) / first:+.1f}%",
                     f"±{100 * memory_tie(first, again):.1f}% (at least {100 * MEMORY_TIE:.0f}%)"])
    return rows


FLOOR_RULE = ("  a variant is better or worse only when compare says so and its whole 95% interval lies beyond the "
              "floor: how far the baseline moved between its two runs (first and last); otherwise 'cannot decide'")


BESIDE_COLUMNS = ("variant", "memory", "hardware allows", "quality")


def beside_rows(answer: TuneAnswer) -> list[list[str]]:
    """One row per variant that ran: its memory, what the hardware allows, and (weights changed) its quality."""
    return [[v.name, _memory(v.memory), _estimate(v), v.quality_text or ""] for v in answer.variants
            if v.run is not None]


def best_rows(answer: TuneAnswer) -> list[list[str]]:
    """One row per objective: the best variant (or ``cannot decide``), its value and why."""
    rows = []
    for best in answer.best:
        value = _memory(best.value) if best.objective == "memory" else (
            f"{_number(best.value)} {best.unit}".strip() if best.value is not None else "-")
        rows.append([best.label, best.winner or "cannot decide", value, best.text])
    return rows


def front_rows(answer: TuneAnswer) -> list[list[str]]:
    """One row per load of every finished variant: throughput, speed, and whether it is on the front."""
    points = answer.front.points
    rows = []
    for i, p in enumerate(points):
        by = p.dominated_by
        standing = ("on the front" if p.on_front else
                    f"dominated by #{by + 1} ({points[by].variant} {points[by].point.load})" if by is not None else "")
        rows.append([f"#{i + 1}", p.variant, p.point.load, _number(p.point.throughput), _number(p.point.speed),
                     standing])
    return rows


def failed_lines(answer: TuneAnswer) -> list[tuple[str, str]]:
    """Per variant that did not finish: a line (its status and what went wrong) and the engine's last words
    as it wrote them (several lines; empty when there are none)."""
    out = []
    for v in answer.variants:
        if v.outcome is None or v.outcome.status == "finished":
            continue
        out.append((f"{v.name}: {v.outcome.status}: {v.outcome.error or 'no reason given'}",
                    (v.outcome.engine_last_words or "").strip("\n")))
    return out


def note_lines(answer: TuneAnswer) -> list[str]:
    """What the comparisons noted of the variants that finished (what differs from the baseline, what could not
    be compared), one line each."""
    return [f"{v.name}: {note}" for v in answer.variants for note in v.notes
            if v.outcome is not None and v.outcome.status == "finished"]


def _table(title: str, header: Sequence[str], rows: list[list[str]]) -> Table:
    table = Table(title=Text(title), title_justify="left", show_edge=False)
    for name in header:
        table.add_column(name, justify="right" if "tok/s" in name or name == "#" else "left")
    for row in rows:
        word = next((w for w in ("worse", "better") if any(f": {w} " in cell for cell in row)), "")
        table.add_row(*(Text(cell) for cell in row), style=_STYLE.get(word, ""))  # names are not markup
    return table


def render_answer(console: Console, record: TuneRecord, answer: TuneAnswer) -> None:
    """The variants against the baseline, the best per objective, the front, the failed variants, the notes."""
    console.print(_table(f"tune {record.name}: each variant against the baseline ({record.engine}, seed "
                         f"{record.seed})", variant_columns(answer), variant_rows(answer)))
    console.print("  value: verdict change [95% interval], as 'tokometer compare' judges two runs")
    console.print(_table("Noise floor: the baseline run again after every variant", FLOOR_COLUMNS,
                         floor_rows(answer)))
    console.print(FLOOR_RULE, markup=False, highlight=False)
    console.print(_table("Beside each variant", BESIDE_COLUMNS, beside_rows(answer)))
    console.print(_table("Best per objective", BEST_COLUMNS, best_rows(answer)))
    console.print(_table("Pareto front: decode tok/s per request (p50) against output tok/s, every load of every "
                         "variant", FRONT_COLUMNS, front_rows(answer)))
    console.print(f"  {answer.front.note}", markup=False)
    for line, words in failed_lines(answer):
        console.print(line, style="red", markup=False)
        if words:
            console.print("  the engine's last words:", style="red")
            console.print(textwrap.indent(words, "    "), markup=False, highlight=False)
    for line in note_lines(answer):
        console.print(f"note: {line}", style="dim", markup=False)


def _verdicts(verdicts: Mapping[str, MetricVerdict]) -> dict[str, Any]:
    return {key: x.to_json() for key, x in verdicts.items()}


def _variant_json(v: VariantAnswer) -> dict[str, Any]:
    """The judgement added to a variant's row of ``tokometer.tune/1``."""
    return {"verdicts": _verdicts(v.verdicts), "headline_load": v.headline, "ranked": v.ranked,
            "loads": [{"load": load, "verdicts": _verdicts(verdicts)} for load, verdicts in v.loads],
            "estimate": {"allowed": dict(v.estimate) if v.estimate is not None else None,
                         "reason": v.estimate_note or None},
            "memory_bytes": v.memory, "memory_source": v.memory_note if v.run is not None else None,
            "quality_summary": v.quality_text, "notes": list(v.notes)}


def answer_json(record: TuneRecord, answer: TuneAnswer) -> dict[str, Any]:
    """``tune --json``: the record (`TuneRecord.to_json`) with each variant's judgement, and ``best``,
    ``pareto`` and ``throughput_metric`` at the top."""
    data = record.to_json()
    for row, v in zip(data["variants"], answer.variants, strict=True):
        row.update(_variant_json(v))
    data["throughput_metric"] = answer.throughput_metric
    data["noise_floor"] = answer.floor.to_json() if answer.floor is not None else None
    data["best"] = [b.to_json() for b in answer.best]
    data["pareto"] = answer.front.to_json()
    return data
