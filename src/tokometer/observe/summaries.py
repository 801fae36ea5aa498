"""A step's server and GPU summaries as the report and the store keep them (JSON-ready), with findings."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tokometer.observe.gpu_window import summarize_gpu
from tokometer.observe.server_window import server_window
from tokometer.observe.snapshot import GpuSample, Snapshot

__all__ = ["gpu_summary", "server_summary"]


def server_summary(snapshots: Sequence[Snapshot], gaps: int) -> dict[str, Any]:
    """`observe.server_window.server_window` of the step's snapshots, as JSON."""
    return server_window(snapshots, gaps).to_json()


def gpu_summary(samples: Sequence[GpuSample], gaps: int, output_tokens: int | None, start_ns: int,
                end_ns: int) -> tuple[dict[str, Any] | None, list[str]]:
    """One GPU's `observe.gpu_window` summary over ``[start_ns, end_ns]`` as JSON, and its findings."""
    window = summarize_gpu(samples, output_tokens, start_ns, end_ns)
    if window is None:
        return None, []
    return {**window.to_json(), "gaps": gaps}, window.findings()
