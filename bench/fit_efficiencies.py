"""Choose the typical efficiencies (`tokometer.perf.roofline.Efficiency`) on the fit split of the published figures.

    python bench/fit_efficiencies.py            # the grid below: a few minutes on one core
    python bench/fit_efficiencies.py --top 10

Every combination of the grid is set beside the fit split only (`published_figures("fit")`: the held-out split is
never read here); they are ranked by how many fit figures land within ±15 %, then by the median |error|. The top
one is what `Efficiency`'s defaults and `tokometer.perf.groupedgemm.EXPERT_TILE_ROWS` hold.
"""

from __future__ import annotations

import argparse
import itertools
import statistics

import tokometer.perf.groupedgemm as grouped
from tokometer.perf.published import HELD_OUT_AIM, compare_published, published_figures
from tokometer.perf.roofline import Efficiency

GRID: dict[str, list[float]] = {
    "decode_bandwidth": [0.775, 0.8, 0.825, 0.85],
    "prefill_compute": [0.55, 0.575, 0.6, 0.625, 0.65],
    "decode_compute": [0.35, 0.4, 0.45, 0.5],
    "layer_overhead_s": [40e-6, 50e-6, 60e-6, 70e-6, 80e-6],
    "expert_half_width": [1280, 2048, 2560, 3072, 4096, 6144],
}
TILES = [32, 64, 128]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=5)
    args = parser.parse_args()
    fit = published_figures("fit")
    ranked = []
    for tile in TILES:
        grouped.EXPERT_TILE_ROWS = tile  # the kernel's tile is a module constant; set it for this pass
        for values in itertools.product(*GRID.values()):
            efficiency = Efficiency(**dict(zip(GRID, values, strict=True)))
            errors = [abs(c.error) for c in compare_published(efficiency, fit)]
            ranked.append((-sum(e <= HELD_OUT_AIM for e in errors), statistics.median(errors), tile, values))
    ranked.sort()
    print(f"{len(ranked)} combinations on {len(fit)} fit figures; the best first")
    for within, median, tile, values in ranked[:args.top]:
        named = ", ".join(f"{k}={v:g}" for k, v in zip(GRID, values, strict=True))
        print(f"{-within}/{len(fit)} within ±15 %, median |error| {100 * median:.1f} %: {named}, tile {tile}")


if __name__ == "__main__":
    main()
