"""`ProbeSummary`: the step summary's ``probe`` block: the one-token probes sent beside the load (``--probe-rate``).

Probes (`tokometer.load.probes`) are not the step's requests: they are kept out of every other metric
of the step and summarised here alone. Their TTFT (the metric registry's TTFT, `tokometer.metrics.request`)
is how long a newcomer waits behind the running load; failed probes count by error category, as the
step's own failures do.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tokometer.metrics import request as m
from tokometer.metrics.distribution import Distribution
from tokometer.records import RequestRecord

__all__ = ["ProbeSummary", "summarize_probes"]

_MS = 1e-6


@dataclass(slots=True)
class ProbeSummary:
    """The probes of one step."""

    rate_per_s: float
    """The rate they were sent at (``--probe-rate``)."""
    sent: int
    completed: int
    ttft_ms: Distribution
    """Of the completed probes."""
    errors: dict[str, int] = field(default_factory=dict)
    skipped: int = 0
    """Probes due but not sent: the cap on probes in flight or per step was reached (`tokometer.load.probes`)."""

    @property
    def failed(self) -> int:
        return sum(self.errors.values())

    def to_json(self) -> dict[str, Any]:
        return {"rate_per_s": self.rate_per_s, "sent": self.sent, "completed": self.completed,
                "failed": self.failed, "errors": dict(self.errors), "skipped": self.skipped,
                "ttft_ms": self.ttft_ms.to_json()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ProbeSummary:
        """The block `to_json` wrote."""
        return cls(rate_per_s=float(data.get("rate_per_s") or 0.0), sent=int(data.get("sent") or 0),
                   completed=int(data.get("completed") or 0), ttft_ms=Distribution.from_json(data.get("ttft_ms")),
                   errors={str(k): int(v) for k, v in (data.get("errors") or {}).items()},
                   skipped=int(data.get("skipped") or 0))

    def line(self) -> str:
        """The block in one sentence (the console's)."""
        t = self.ttft_ms

        def ms(value: float | None) -> str:
            return "-" if value is None else f"{value:,.1f}"

        errors = ", ".join(f"{k} {v}" for k, v in sorted(self.errors.items()))
        return (f"probes ({self.rate_per_s:g}/s beside the load, not in its metrics): {self.completed} of "
                f"{self.sent} answered" + (f", {self.failed} failed ({errors})" if self.failed else "")
                + (f", {self.skipped} not sent (too many in flight)" if self.skipped else "")
                + f"; TTFT p50 {ms(t.p50)} / p90 {ms(t.p90)} / p99 {ms(t.p99)} / max {ms(t.max)} ms")


def summarize_probes(records: Sequence[RequestRecord], rate: float, skipped: int = 0) -> ProbeSummary:
    """The probes' block from their records (any order); errors by category; ``skipped``: due, not sent."""
    ok = [r for r in records if r.ok]
    ttft = [v for v in (m.ttft_ns(r) for r in ok) if v is not None]
    errors = Counter(r.error or "unknown" for r in records if not r.ok)
    return ProbeSummary(rate_per_s=rate, sent=len(records), completed=len(ok), ttft_ms=Distribution.of(ttft, _MS),
                        errors=dict(sorted(errors.items())), skipped=skipped)
