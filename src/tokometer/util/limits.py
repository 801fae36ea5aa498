"""Limits that more than one package checks a number against, each defined once here (a module with no
imports, so that ``bench``'s spec reads them without loading the metrics).

- `MAX_GPUS`: the most GPUs a run is taken to have: ``bench --gpus``, the spec's saved ``gpus``, the product
  of an engine's parallel sizes (`tokometer.gpu_count.gpu_count`);
- `MIN_SLICE_S`, `MAX_SLICE_S`: the shortest and the longest time slice (``bench --time-slice``, a ramp
  search's tenths of its ramp, a width read back from a store: `tokometer.metrics.window`).
"""

from __future__ import annotations

from typing import Final

__all__ = ["MAX_GPUS", "MAX_SLICE_S", "MIN_SLICE_S"]

MAX_GPUS: Final = 65536
MIN_SLICE_S: Final = 0.001
"""1 ms: a slice of 0.1 ns was 0 ns wide once rounded and divided by zero."""
MAX_SLICE_S: Final = 1_000_000.0
"""1,000,000 s (11.6 days), longer than any step is expected to run."""
