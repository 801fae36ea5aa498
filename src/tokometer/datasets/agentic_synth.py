"""Synthetic agent sessions from named parameters: ``bench --agents synthetic:turns=6,fan_out=3,tool_latency=300ms``.

Each session is an orchestrator (`MAIN_AGENT`) of ``turns`` turns. After every ``fan_every``-th orchestrator
turn (but the last) it branches: ``fan_out`` sub-agents of ``sub_turns`` turns each start together (their first
turns wait for that orchestrator turn, whose answer is their task) and run concurrently; the orchestrator's
next turn joins them (waits for each sub-agent's last turn and carries their answers). Every turn but a
session's first waits ``tool_latency`` after what it waits for (the tool's run) and adds ``growth`` tokens of
new input (the tool's result), so each conversation grows by ``growth`` + the answer per turn. Every
conversation opens with a ``prefix``-token system prompt, the same text for every session when ``shared`` is
on (a warm shared prefix) and its own per session when off. Sessions start ``rate`` a second (0: together).

The sessions are an ordinary agent trace (`tokometer.datasets.agentic.AgentSession`), the same for the same
parameters and seed; ``tool_latency`` and ``growth`` take `Sampled` forms (``200ms-1s``, ``exp:300``).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Final

from tokometer.datasets.agentic import (
    MAIN_AGENT,
    MAX_AGENT_SESSIONS,
    MAX_AGENT_TURNS,
    MAX_TOOL_MS,
    AgentSession,
    AgentTurn,
    Prefix,
)
from tokometer.datasets.sampled import Sampled
from tokometer.util.errors import ConfigError
from tokometer.util.limits import MAX_TOKENS, MAX_TURNS
from tokometer.util.shown import quoted

__all__ = ["SYNTHETIC", "AgentShape", "parse_shape", "synthetic_sessions"]

SYNTHETIC: Final = "synthetic"
"""The ``--agents`` value (alone or before ``:key=value,...``) that asks for synthetic sessions."""


@dataclass(frozen=True, slots=True)
class AgentShape:
    """The named parameters of synthetic agent sessions (their defaults are these fields')."""

    sessions: int = 4
    rate: float = 1.0
    turns: int = 4
    fan_out: int = 2
    fan_every: int = 2
    sub_turns: int = 2
    tool_latency: str = "200ms"
    growth: str = "200"
    prefix: int = 1000
    shared: bool = True
    output: int = 64

    def describe(self) -> str:
        """The parameters as given back on ``--agents``."""
        return ",".join(f"{f.name}={_text(getattr(self, f.name))}" for f in fields(self))


def _text(value: object) -> str:
    return ("yes" if value else "no") if isinstance(value, bool) else f"{value:g}" if isinstance(value, float) \
        else str(value)


_BOUNDS: Final = {"sessions": (1, MAX_AGENT_SESSIONS), "turns": (1, MAX_TURNS), "fan_out": (0, 64),
                  "fan_every": (1, MAX_TURNS), "sub_turns": (1, MAX_TURNS), "prefix": (0, MAX_TOKENS),
                  "output": (1, MAX_TOKENS)}


def parse_shape(text: str) -> AgentShape:
    """``synthetic`` or ``synthetic:key=value,...`` as an `AgentShape`; a `ConfigError` of one line otherwise."""
    head, _, rest = text.partition(":")
    if head.strip() != SYNTHETIC:
        raise ConfigError(f"--agents: {quoted(text)} is neither an agent trace file nor 'synthetic[:key=value,...]'")
    names = [f.name for f in fields(AgentShape)]
    values: dict[str, object] = {}
    for part in filter(None, (p.strip() for p in rest.split(","))):
        key, eq, value = (s.strip() for s in part.partition("="))
        if key not in names or not eq:
            raise ConfigError(f"--agents synthetic: {quoted(part)} is not key=value with a key of {', '.join(names)}")
        values[key] = _value(key, value)
    shape = AgentShape(**values)  # type: ignore[arg-type]
    if shape.sessions * (shape.turns + shape.turns // shape.fan_every * shape.fan_out * shape.sub_turns) \
            > MAX_AGENT_TURNS:
        raise ConfigError(f"--agents synthetic: {shape.describe()} makes over {MAX_AGENT_TURNS:,} turns: "
                          "ask for fewer sessions, turns or sub-agents")
    return shape


def _value(key: str, value: str) -> object:
    """One parameter's value, checked against its bounds."""
    where = f"--agents synthetic: {key}"
    if key in ("tool_latency", "growth"):
        sampled = Sampled.parse(value, where, whole=key == "growth")
        if key == "growth":
            sampled.check_at_least(1, where)
        return value
    if key == "shared":
        if value not in ("yes", "no", "true", "false", "1", "0"):
            raise ConfigError(f"{where} must be yes or no")
        return value in ("yes", "true", "1")
    if key == "rate":
        try:
            rate = float(value)
        except ValueError:
            rate = -1.0
        if not 0 <= rate <= 1e6:
            raise ConfigError(f"{where} must be a number of sessions a second from 0 to 1e6 (0: all at once)")
        return rate
    low, high = _BOUNDS[key]
    if not value.isdigit() or not low <= int(value) <= high:
        raise ConfigError(f"{where} must be a whole number from {low} to {high}")
    return int(value)


def synthetic_sessions(shape: AgentShape, seed: int = 0) -> list[AgentSession]:
    """The sessions ``shape`` describes; the same for the same ``seed``."""
    latency = Sampled.parse(shape.tool_latency, "tool_latency")
    growth = Sampled.parse(shape.growth, "growth", whole=True)
    out = []
    for i in range(shape.sessions):
        rng = random.Random(f"{seed}:agents:{i}")
        prefix = Prefix("shared" if shape.shared else f"session-{i}", shape.prefix) if shape.prefix else None
        start = i / shape.rate * 1e3 if shape.rate else 0.0
        out.append(AgentSession(f"agent-{i}", start, _session_turns(shape, rng, latency, growth), prefix))
    return out


def _session_turns(shape: AgentShape, rng: random.Random, latency: Sampled,
                   growth: Sampled) -> tuple[AgentTurn, ...]:
    """One session's turns in an order where each comes after what it waits for."""
    turns: list[AgentTurn] = []
    joined: tuple[int, ...] = ()

    def add(turn_id: str, agent: str, after: tuple[int, ...]) -> int:
        tool_ms = min(MAX_TOOL_MS, latency.draw(rng) * 1e3) if turns else 0.0
        turns.append(AgentTurn(turn_id, agent, after, tool_ms, max(1, int(growth.draw(rng))), None, shape.output))
        return len(turns) - 1

    previous: int | None = None
    for k in range(shape.turns):
        previous = add(f"main-{k}", MAIN_AGENT, ((previous,) if previous is not None else ()) + joined)
        joined = ()
        if shape.fan_out and (k + 1) % shape.fan_every == 0 and k + 1 < shape.turns:
            joined = tuple(_branch(add, k, previous, shape))
    return tuple(turns)


def _branch(add: Callable[[str, str, tuple[int, ...]], int], k: int, parent: int, shape: AgentShape) -> list[int]:
    """``fan_out`` sub-agents started by orchestrator turn ``k``; the index of each one's last turn."""
    ends = []
    for j in range(shape.fan_out):
        agent = f"sub-{k}.{j}"
        last = parent
        for m in range(shape.sub_turns):
            last = add(f"{agent}-{m}", agent, (last,))
        ends.append(last)
    return ends
