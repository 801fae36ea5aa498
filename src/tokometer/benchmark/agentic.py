"""What ``bench --agents`` (agent sessions, `tokometer.load.agentic`) cannot be given with: checked once, in
the spec, before any work starts."""

from __future__ import annotations

from typing import Any

from tokometer.protocols.registry import PROTOCOLS
from tokometer.util.specproblem import FieldProblem

__all__ = ["check_agents"]


def check_agents(spec: Any) -> None:
    """Raise a `FieldProblem` when ``spec`` (a `BenchSpec` with ``agents``) asks for what agent sessions do
    not take: their own schedule, prompts and turns come from the sessions."""
    if spec.concurrency or spec.rate or spec.synchronous or spec.find_max is not None or spec.search == "ramp":
        raise FieldProblem("{agents} starts each session at its own time (the trace's start_ms, or the synthetic "
                           "rate=): leave out {concurrency}, {rate}, {synchronous} and {find_max}")
    if not PROTOCOLS[spec.api].streams:
        raise FieldProblem("{api} {name} sends batches of texts, not conversations: leave out {agents}",
                           name=spec.api)
    if spec.sessions is not None or spec.trace is not None:
        raise FieldProblem("give {agents}, {sessions} or {trace}, one of them")
    if spec.dataset is not None or spec.prompt is not None or spec.prefix_tokens or spec.images:
        raise FieldProblem("{agents} makes its own prompts (each turn's input and the agents' histories): leave "
                           "out {dataset}, {prompt}, {prefix_tokens} and {images}")
    if spec.requests is not None or spec.warmup or spec.duration_s is not None:
        raise FieldProblem("{agents} runs every session of its trace once a step: leave out {requests}, "
                           "{warmup} and {duration_s}")

