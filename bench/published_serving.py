"""The estimate at maximum load beside published serving figures (`tokometer.perf.published`).

    python bench/published_serving.py            # markdown tables, as in docs/commands/estimate.md

Pure arithmetic: no GPU, no server; the figures, their sources and their split (``fit`` or ``held-out``)
are in src/tokometer/perf/data/published-serving.csv. The fit set is printed row by row; the held-out set
row by row and then one line per deployment (its shapes' errors), with the reason for a known miss.
"""

from __future__ import annotations

import statistics
from collections import defaultdict

from tokometer.perf.published import (
    HELD_OUT_AIM,
    Checked,
    compare_published,
    figure_kind,
    known_miss,
    published_figures,
    summary,
)


def _rows(checked: list[Checked]) -> None:
    print("| model | hardware | layout | format | in → out | published tok/s | expected tok/s | batch (a copy) | bound "
          "| error |")
    print("| --- | --- | --- | --- | --- | ---: | ---: | ---: | --- | ---: |")
    for c in checked:
        f = c.figure
        users = f" at c={f.concurrency}" if f.concurrency else ""
        print(f"| {f.model} | {f.hardware} | {f.layout} | {f.weight_dtype} | {f.input_tokens} → {f.output_tokens}"
              f"{users} | {f.output_tok_s:,.0f} | {c.expected_tok_s:,.0f} | {c.batch:,} | {c.bound} "
              f"| {100 * c.error:+.0f} % |")


def _by_deployment(checked: list[Checked]) -> None:
    groups: dict[str, list[Checked]] = defaultdict(list)
    for c in checked:
        groups[c.figure.group].append(c)
    print("| deployment | source | figures | within ±15 % | median error | range | known miss: likely reason |")
    print("| --- | --- | ---: | ---: | ---: | --- | --- |")
    for group, rows in groups.items():
        errors = [c.error for c in rows]
        within = sum(abs(e) <= HELD_OUT_AIM for e in errors)
        source = rows[0].figure.source.split(" (")[0]
        print(f"| {group} | {source} | {len(rows)} | {within} | {100 * statistics.median(errors):+.0f} % "
              f"| {100 * min(errors):+.0f} … {100 * max(errors):+.0f} % | {known_miss(rows[0].figure) or ''} |")


def _by_kind(checked: list[Checked]) -> None:
    groups: dict[str, list[float]] = defaultdict(list)
    for c in checked:
        groups[figure_kind(c.figure)].append(c.error)
    print("| kind | figures | within ±15 % | median |error| | median error |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for kind, errors in sorted(groups.items()):
        within = sum(abs(e) <= HELD_OUT_AIM for e in errors)
        print(f"| {kind} | {len(errors)} | {within} | {100 * statistics.median(abs(e) for e in errors):.0f} % "
              f"| {100 * statistics.median(errors):+.0f} % |")


def main() -> None:
    fit = compare_published(figures=published_figures("fit"))
    held_out = compare_published(figures=published_figures("held-out"))
    print("## Fit set\n")
    _rows(fit)
    print(f"\n{summary('fit', fit)}\n")
    print("## Held-out set, by kind\n")
    _by_kind(held_out)
    print("\n## Held-out set, by deployment\n")
    _by_deployment(held_out)
    print(f"\n{summary('held-out', held_out)}\n")
    print("## Held-out set, every figure\n")
    _rows(held_out)


if __name__ == "__main__":
    main()
