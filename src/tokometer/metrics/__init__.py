"""Metrics: pure functions of `RequestRecord`s, distributions, step summaries.

``DEFINITIONS`` is written into every JSON result so a reader never has to
guess what a name means; it is read from the metric registry
(`tokometer.metrics.registry`), where each metric's name, unit, direction and
definition live once.
"""

from __future__ import annotations

from typing import Final

from tokometer.metrics.distribution import PERCENTILES, Distribution
from tokometer.metrics.registry import definitions
from tokometer.metrics.summary import SLO, StepSummary, summarize

__all__ = ["DEFINITIONS", "PERCENTILES", "SLO", "Distribution", "StepSummary", "summarize"]

DEFINITIONS: Final[dict[str, str]] = definitions()
"""Each metric's one-line definition by name (`tokometer.metrics.registry`, the one home of a metric's name)."""
