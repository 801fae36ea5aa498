"""The report's sentences for what ran beside a step's own requests: probes (``--probe-rate``) and the
server's speculative decoding (its ``speculative`` block), one sentence per step that has them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tokometer.metrics.probes import ProbeSummary
from tokometer.report.speculative import spec_line

__all__ = ["beside_lines"]


def beside_lines(done: Sequence[tuple[Mapping[str, Any], Mapping[str, Any]]]) -> list[str]:
    """For each (step, summary JSON) of the report's data: its probes' line and its speculative-decoding line."""
    lines = []
    for step, summary in done:
        if summary.get("probe"):
            lines.append(f"At {step['label']}, {ProbeSummary.from_json(summary['probe']).line()}.")
        spec = spec_line((step.get("server") or {}).get("speculative"))
        if spec is not None:
            lines.append(f"At {step['label']}, {spec}.")
    return lines
