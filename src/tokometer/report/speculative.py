"""Speculative decoding in words: the line the console, `top` and the report show for a step's server block."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["spec_line"]


def spec_line(block: Mapping[str, Any] | None) -> str | None:
    """``speculative decoding: acceptance 61% of 3,120 drafted tokens, 2.23 tokens per step (...)``, from a
    server window's ``speculative`` block (`tokometer.observe.speculative.SpecWindow`); None without one."""
    if not block:
        return None
    parts: list[str] = []
    rate, length, drafted = block.get("acceptance_rate"), block.get("acceptance_length"), block.get("draft_tokens")
    if rate is not None:
        parts.append(f"acceptance {100 * rate:.0f}%" + (f" of {drafted:,.0f} drafted tokens" if drafted else ""))
    if length is not None:
        parts.append(f"{length:.2f} tokens per step")
    positions = block.get("per_position") or []
    if positions:
        parts.append("by draft position " + " ".join(f"{100 * p:.0f}%" for p in positions))
    if block.get("rejected"):
        parts.append(f"not believed: {block['rejected']}")
    if not parts:
        return None
    source = {"counters": "the server's draft counters", "responses": f"{block.get('requests', 0)} answers' own "
              "counts"}.get(str(block.get("source")), "the server's own gauges")
    return "speculative decoding: " + ", ".join(parts) + f" ({source})"
