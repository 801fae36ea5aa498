"""Confidence intervals for accuracy on a small eval set: Wilson for one endpoint, McNemar-based for the difference.

Both endpoints answer the *same* items, so their accuracies are paired: what matters for the
difference is only the items they disagree on (``b``: A right and B wrong, ``c``: A wrong and B right).

- `wilson_interval(k, n)`: the Wilson score interval of one proportion (good at small n and near 0 or 1,
  where the Wald interval fails).
- `paired_difference(a, b)`: accuracy(B) − accuracy(A) with the Wald interval for paired proportions
  built from McNemar's discordant counts, ``d = (c − b)/n``, ``se = sqrt(b + c − (c − b)²/n) / n``,
  ``d ± z·se`` (clipped to [−1, 1]), and McNemar's exact two-sided p-value (a binomial test of
  ``min(b, c)`` out of ``b + c`` at one half) with its mid-p version (the exact p less the
  probability of the observed count: the exact test is conservative, e.g. 5 to 0 discordant items
  give p = 0.0625, the smallest it can reach with 5; Fagerland et al., BMC Med Res Methodol 2013,
  recommend the mid-p). With no discordant items the interval is [0, 0] and p = 1: the two
  endpoints got exactly the same items right.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Z95", "PairedDifference", "mcnemar_exact_p", "mcnemar_mid_p", "paired_difference", "wilson_interval"]

Z95 = 1.959963984540054
"""The standard normal quantile of a two-sided 95 % interval."""


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of ``successes`` out of ``n`` (0 ≤ low ≤ high ≤ 1); (0, 1) when n is 0."""
    if n <= 0:
        return 0.0, 1.0
    if not 0 <= successes <= n:
        raise ValueError(f"successes must be within 0..{n} (got {successes})")
    p = successes / n
    z2 = z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z / (1 + z2 / n) * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def mcnemar_exact_p(b: int, c: int) -> float:
    """McNemar's exact two-sided p-value for ``b`` and ``c`` discordant pairs (1.0 when there are none)."""
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1)) / 2.0 ** n
    return min(1.0, 2.0 * tail)


def mcnemar_mid_p(b: int, c: int) -> float:
    """McNemar's mid-p value: the exact two-sided p less the probability of the observed split (1.0 for none)."""
    n = b + c
    if n == 0:
        return 1.0
    return min(1.0, mcnemar_exact_p(b, c) - math.comb(n, min(b, c)) / 2.0 ** n)


@dataclass(frozen=True)
class PairedDifference:
    """accuracy(B) − accuracy(A) on the same items, with its interval; fractions, not points."""

    n: int
    a_only: int
    """Items A got right and B wrong (McNemar's b)."""
    b_only: int
    """Items B got right and A wrong (McNemar's c)."""
    difference: float
    low: float
    high: float
    p_value: float
    """McNemar's exact two-sided p."""
    mid_p: float
    """McNemar's mid-p."""

    @property
    def half_width(self) -> float:
        """Half the interval's width (the "± x points" of a verdict, ×100)."""
        return (self.high - self.low) / 2


def paired_difference(a_correct: Sequence[bool], b_correct: Sequence[bool], z: float = Z95) -> PairedDifference:
    """The paired difference of two graded answer lists (same items, same order)."""
    if len(a_correct) != len(b_correct):
        raise ValueError(f"paired answers must be the same length ({len(a_correct)} != {len(b_correct)})")
    n = len(a_correct)
    b = sum(1 for x, y in zip(a_correct, b_correct, strict=True) if x and not y)
    c = sum(1 for x, y in zip(a_correct, b_correct, strict=True) if y and not x)
    if n == 0:
        return PairedDifference(0, 0, 0, 0.0, -1.0, 1.0, 1.0, 1.0)
    difference = (c - b) / n
    se = math.sqrt(max(0.0, b + c - (c - b) ** 2 / n)) / n
    return PairedDifference(n, b, c, difference, max(-1.0, difference - z * se), min(1.0, difference + z * se),
                            mcnemar_exact_p(b, c), mcnemar_mid_p(b, c))
