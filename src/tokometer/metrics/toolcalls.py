"""`ToolCallSummary`: a step's tool calls, for workloads with tool definitions (``bench --tools``).

Present only when some completed answer of the step called a tool. Tool-call deltas are output: TTFT
stays "first event carrying generated output", and a tool call's name or argument fragment is such an
event (docs/reference/metrics.md), as are TPOT and ITL. What is the tool calls' own:
`time_to_first_tool_call_ms` (the first event carrying a tool-call delta minus the time the request was
sent; equals TTFT when the answer began with its call), the calls per answer, and the output tokens that
were tool calls (`tokometer.client.toolsplit` says how they are counted).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tokometer.metrics import request as m
from tokometer.metrics.distribution import Distribution
from tokometer.records import RequestRecord

__all__ = ["ToolCallSummary", "summarize_tool_calls"]

_MS = 1e-6


@dataclass(slots=True)
class ToolCallSummary:
    """Tool calls over a step's completed requests."""

    requests: int
    """Completed answers that called a tool."""
    calls_total: int
    time_to_first_tool_call_ms: Distribution
    tool_call_tokens_total: int
    tool_call_tokens: Distribution
    """Per answer that called a tool."""
    tool_call_tokens_source: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"requests": self.requests, "calls": self.calls_total,
                "time_to_first_tool_call_ms": self.time_to_first_tool_call_ms.to_json(),
                "tool_call_tokens": {"total": self.tool_call_tokens_total, "source": self.tool_call_tokens_source,
                                     "per_request": self.tool_call_tokens.to_json()}}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ToolCallSummary:
        """The summary `to_json` wrote."""
        tokens = data.get("tool_call_tokens") or {}
        return cls(requests=int(data.get("requests") or 0), calls_total=int(data.get("calls") or 0),
                   time_to_first_tool_call_ms=Distribution.from_json(data.get("time_to_first_tool_call_ms")),
                   tool_call_tokens_total=int(tokens.get("total") or 0),
                   tool_call_tokens=Distribution.from_json(tokens.get("per_request")),
                   tool_call_tokens_source=dict(tokens.get("source") or {}))

    def line(self) -> str:
        """The summary in one sentence (the console's)."""
        ttftc = self.time_to_first_tool_call_ms
        sources = ", ".join(f"{k} {v}" for k, v in sorted(self.tool_call_tokens_source.items())) or "none"
        return (f"tool calls: {self.requests} answers made {self.calls_total} calls; time to first tool call p50 "
                f"{_f(ttftc.p50)} ms, p99 {_f(ttftc.p99)} ms; {_f(self.tool_call_tokens.mean)} tool-call tokens "
                f"per answer on average (counted by: {sources}; tool-call deltas are output: in TTFT, TPOT, ITL)")


def _f(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def summarize_tool_calls(ok: Sequence[RequestRecord]) -> ToolCallSummary | None:
    """The tool-call summary of a step's completed requests; ``None`` when none of them called a tool."""
    called = [r for r in ok if r.first_tool_call_ns]
    if not called:
        return None
    first = [v for v in (m.time_to_first_tool_call_ns(r) for r in called) if v is not None]
    tokens = [r.tool_call_tokens for r in called if r.tool_call_tokens is not None]
    return ToolCallSummary(
        requests=len(called),
        calls_total=sum(r.tool_calls or 0 for r in called),
        time_to_first_tool_call_ms=Distribution.of(first, _MS),
        tool_call_tokens_total=sum(tokens),
        tool_call_tokens=Distribution.of(float(n) for n in tokens),
        tool_call_tokens_source=dict(Counter(r.tool_call_tokens_source for r in called if r.tool_call_tokens_source)),
    )
