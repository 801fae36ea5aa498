"""The estimate at maximum load beside published serving figures (`tokometer.perf.published`).

    python bench/published_serving.py            # markdown table, as in docs/commands/estimate.md

Pure arithmetic: no GPU, no server; the figures and their sources are in
src/tokometer/perf/data/published-serving.csv.
"""

from __future__ import annotations

import statistics

from tokometer.perf.published import compare_published


def main() -> None:
    checked = compare_published()
    print("| model | hardware | TP | in → out | published tok/s | expected tok/s | batch | bound | error |")
    print("| --- | --- | ---: | --- | ---: | ---: | ---: | --- | ---: |")
    for c in checked:
        f = c.figure
        print(f"| {f.model} | {f.hardware} | {f.tp} | {f.input_tokens} → {f.output_tokens} | {f.output_tok_s:,.0f} "
              f"| {c.expected_tok_s:,.0f} | {c.batch:,} | {c.bound} | {100 * c.error:+.0f} % |")
    errors = [abs(c.error) for c in checked]
    print(f"\n{len(checked)} figures: median |error| {100 * statistics.median(errors):.0f} %, "
          f"largest {100 * max(errors):.0f} %; within ±15 %: {sum(e <= 0.15 for e in errors)}, "
          f"within ±30 %: {sum(e <= 0.30 for e in errors)}")


if __name__ == "__main__":
    main()
