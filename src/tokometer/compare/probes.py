"""The probes of two runs side by side (``compare``): each load's probe TTFT in BASE and in NEW, in words.

Probes (``bench --probe-rate``) are kept apart from a step's requests and their records are not saved,
so the gate cannot bootstrap them: ``compare`` reports their percentiles as a note, not a verdict.
Loads are matched as the gate matches them (in the order each first ran; a load's trials' probe
blocks pooled by taking the mean of each percentile over its trials).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tokometer.store.runs import StoredStep

Groups = Sequence[tuple[dict[str, Any] | None, Sequence[StoredStep]]]
"""A run's steps by load, as `tokometer.compare.gate.load_groups` gives them."""

__all__ = ["probe_notes"]

_STATS = ("p50", "p99")


def _mean_stat(steps: Sequence[StoredStep], stat: str) -> float | None:
    values = [v for st in steps if st.summary is not None and st.summary.probe is not None
              and (v := st.summary.probe.ttft_ms.stat(stat)) is not None]
    return sum(values) / len(values) if values else None


def _change(base: float, new: float) -> str:
    return f" ({100 * (new - base) / base:+.0f}%)" if base > 0 else ""


def probe_notes(base: Groups, new: Groups) -> list[str]:
    """One note per load where either run sent probes: probe TTFT p50 and p99, BASE -> NEW (each run's steps by
    load, matched in order)."""
    notes = []
    for (_, b_steps), (_, n_steps) in zip(base, new, strict=False):
        parts = []
        for stat in _STATS:
            b, n = _mean_stat(b_steps, stat), _mean_stat(n_steps, stat)
            if b is None and n is None:
                continue
            shown = [("-" if v is None else f"{v:,.1f}") for v in (b, n)]
            parts.append(f"{stat} {shown[0]} -> {shown[1]} ms" + (_change(b, n) if b is not None and n is not None
                                                                   else ""))
        if parts:
            label = b_steps[0].load.short() if b_steps[0].load else "unknown"
            notes.append(f"{label} probe TTFT (beside the load; not gated: probes are not saved per request): "
                         + ", ".join(parts))
    return notes
