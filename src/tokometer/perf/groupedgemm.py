"""The routed experts' matmuls of a mixture of experts as the engines run them: one grouped GEMM whose rows are
each expert's tokens, padded to the kernel's tile.

A step over T tokens with top-k routing over E experts gives expert e m_e tokens, Σ m_e = T × k; each
m_e is taken as Binomial(T, k / E) (every token's k experts a uniform draw, as `ModelSpec.expected_experts`).
A grouped GEMM (vLLM's fused MoE, TensorRT-LLM's and SGLang's MoE kernels) cuts each expert's rows into
tiles of `EXPERT_TILE_ROWS` and runs whole tiles, so the rows it computes are

    padded rows = E × tile × E[⌈m / tile⌉]                    (expected over the binomial)

and the experts' FLOPs grow by padded rows / (T × k): at a large T with many tokens per expert the padding is
about half a tile per expert (a few per cent); at a small T the touched experts cost a whole tile each
(gpt-oss-120b at batch 8: 32 rows of tokens take 128 experts' tiles' worth, not 32). Where the expected
tokens per expert pass `EXACT_UP_TO`, E[⌈m / tile⌉] is taken as μ / tile + ½ (the last tile half full).
"""

from __future__ import annotations

import math
from functools import lru_cache

__all__ = ["EXACT_UP_TO", "EXPERT_TILE_ROWS", "EXPERT_TILE_SOURCE", "padded_expert_rows"]

EXPERT_TILE_ROWS = 64
"""Rows (tokens) of one expert a grouped GEMM's tile holds."""
EXPERT_TILE_SOURCE = ("the grouped GEMMs pad each expert's tokens to the tile's rows (vLLM's fused MoE: BLOCK_SIZE_M, "
                      "16 to 128 in its tuned configs, moe_align_block_size; CUTLASS grouped GEMM tiles of 64 or "
                      "128 rows); 64 chosen among 32, 64 and 128 on the fit split (128 until 2026-12-05, when the "
                      "fit split's mixtures of experts were read as run, with attention data parallel)")
EXACT_UP_TO = 200.0
"""Expected tokens per expert up to which E[⌈m / tile⌉] is summed exactly."""


@lru_cache(maxsize=4096)
def _tiles_per_expert(tokens: int, p: float, tile: int) -> float:
    """E[⌈m / tile⌉] for m ~ Binomial(tokens, p): Σ_{j ≥ 0} P(m > j × tile)."""
    mean = tokens * p
    if mean > EXACT_UP_TO:
        return mean / tile + 0.5
    limit = min(tokens, int(mean + 12 * math.sqrt(mean * (1 - p)) + tile + 1))
    pmf = (1.0 - p) ** tokens
    cdf, expected = 0.0, 0.0
    for m in range(limit + 1):
        cdf += pmf
        if m % tile == 0:
            expected += max(0.0, 1.0 - cdf)  # P(m > j × tile) at m = j × tile
        pmf *= (tokens - m) / (m + 1) * p / (1.0 - p) if m < tokens else 0.0
    return expected


def padded_expert_rows(tokens: float, experts: int, per_token: int, tile: int | None = None) -> float:
    """Expected rows a grouped GEMM computes for a step of ``tokens`` tokens, each routed to ``per_token`` of
    ``experts`` experts: E × tile × E[⌈m / tile⌉] (module docstring; ``tile``: `EXPERT_TILE_ROWS`); at least
    T × k."""
    tile = tile or EXPERT_TILE_ROWS
    t = max(0, round(tokens))
    if t == 0 or experts <= 0 or per_token <= 0:
        return 0.0
    p = min(1.0, per_token / experts)
    if p >= 1.0:
        return float(experts * tile * math.ceil(t / tile))
    return max(t * per_token, experts * tile * _tiles_per_expert(t, p, tile))
