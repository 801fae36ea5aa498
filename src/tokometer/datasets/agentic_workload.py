"""The agent sessions of a run (``bench --agents``) and the texts they send, made before any timing starts.

``--agents`` names an agent trace file (`tokometer.datasets.agentic`; one in AIPerf's ``multi_turn`` or
``mooncake_trace`` format, `tokometer.datasets.agentic_aiperf`, is told by its first line or named
``aiperf:FILE``), ``example`` (the shipped one), or
``synthetic[:key=value,...]`` (`tokometer.datasets.agentic_synth`). `AgentWorkload` holds the sessions and
makes each text once: every turn's new input (exactly its ``input_tokens`` with a tokenizer, that many words
without one) and each prefix, one text per prefix ``id``, so that sessions naming the same id send the
same system prompt. The load generator (`tokometer.load.agentic`) assembles the conversations from these.
"""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path
from typing import Any

from tokometer.datasets.agentic import EXAMPLE_AGENT_TRACE, AgentSession, Prefix, agent_lines, sessions_from_lines
from tokometer.datasets.agentic_aiperf import AIPERF, looks_like_aiperf, read_aiperf_trace
from tokometer.datasets.agentic_synth import SYNTHETIC, parse_shape, synthetic_sessions
from tokometer.datasets.synthetic import make_exact_text
from tokometer.datasets.words import WORDS
from tokometer.tokens.base import Tokenizer
from tokometer.util.errors import DatasetError
from tokometer.util.limits import MAX_PROMPT_TOKENS_MADE

__all__ = ["AgentWorkload", "agent_sessions", "open_agents"]


def agent_sessions(value: str, seed: int = 0, output_tokens: int | None = None) -> tuple[list[AgentSession], str]:
    """The sessions ``--agents value`` names (a trace file, ``aiperf:FILE``, ``example``, or ``synthetic[:...]``)
    and a name for them; ``output_tokens``: the answer length of an AIPerf turn that gives none."""
    kind = value.split(":", 1)[0].strip()
    if kind == SYNTHETIC:
        shape = parse_shape(value)
        return synthetic_sessions(shape, seed), f"synthetic:{shape.describe()}"
    if kind == AIPERF:
        path = Path(value.split(":", 1)[1])
        return read_aiperf_trace(path, agent_lines(path), output_tokens), f"{AIPERF}:{path.name}"
    return read_agent_file(value, output_tokens), Path(value).name


def read_agent_file(value: str, output_tokens: int | None) -> list[AgentSession]:
    """An agent trace in tokometer's format or in one of AIPerf's, told apart by its first line."""
    path = EXAMPLE_AGENT_TRACE if value == "example" else Path(value)
    lines = agent_lines(path)
    ahead: list[tuple[int, bytes]] = []
    for number, raw in lines:
        ahead.append((number, raw))
        if raw.strip():
            break
    try:
        first = json.loads(ahead[-1][1]) if ahead else None
    except (ValueError, RecursionError):
        first = None  # the format's own reader says what is wrong with it
    rest = itertools.chain(ahead, lines)
    if looks_like_aiperf(first):
        return read_aiperf_trace(path, rest, output_tokens)
    return sessions_from_lines(path, rest)


def open_agents(value: str, tokenizer: Tokenizer | None, seed: int = 0,
                output_tokens: int | None = None) -> AgentWorkload:
    """The workload ``--agents value`` names, its texts still to make (`AgentWorkload.prepare`)."""
    sessions, name = agent_sessions(value, seed, output_tokens)
    return AgentWorkload(sessions, tokenizer, seed, name)


class AgentWorkload:
    """Agent sessions and their texts."""

    def __init__(self, sessions: list[AgentSession], tokenizer: Tokenizer | None, seed: int, name: str) -> None:
        self.sessions = sessions
        self.tokenizer = tokenizer
        self.seed = seed
        prefixes = {s.prefix.id: s.prefix.tokens for s in sessions if s.prefix is not None}
        made = sum(prefixes.values()) + sum(t.input_tokens or 0 for s in sessions for t in s.turns)
        if made > MAX_PROMPT_TOKENS_MADE:
            raise DatasetError(f"{name}: its inputs and prefixes hold {made:,} tokens to make; at most "
                               f"{MAX_PROMPT_TOKENS_MADE:,} are made before a run")
        turns = sum(len(s.turns) for s in sessions)
        self.name = (f"agent sessions {name}: {len(sessions)} sessions, {turns} turns, "
                     + (f"exact: {tokenizer.name}" if tokenizer else "words"))
        self._prefixes: dict[str, str] = {}
        self._inputs: dict[tuple[int, int], str] = {}

    def __getstate__(self) -> dict[str, Any]:
        """What a worker process gets: the sessions and every text made (`prepare` ran), not the tokenizer
        (it may not travel between processes; the texts need it no more)."""
        return {**self.__dict__, "tokenizer": None}

    def prepare(self, n: int = 0, stop: Any = None) -> None:
        """Make every text now (the tokenizer's work stays out of the timed run)."""
        for i, session in enumerate(self.sessions):
            if stop is not None and stop.is_set():
                return
            if session.prefix is not None:
                self.prefix_text(session.prefix)
            for k in range(len(session.turns)):
                self.input_text(i, k)

    def prefix_text(self, prefix: Prefix) -> str:
        """The system prompt of ``prefix``: one text per id."""
        if prefix.id not in self._prefixes:
            self._prefixes[prefix.id] = self._make(prefix.tokens, f"prefix:{prefix.id}")
        return self._prefixes[prefix.id]

    def input_text(self, session: int, turn: int) -> str:
        """The new input of turn ``turn`` of session ``session`` (the trace's own text where it gives one)."""
        key = (session, turn)
        if key not in self._inputs:
            t = self.sessions[session].turns[turn]
            self._inputs[key] = t.input_text if t.input_text is not None else self._make(
                t.input_tokens or 1, f"input:{session}:{turn}")
        return self._inputs[key]

    def _make(self, n: int, salt: str) -> str:
        rng = random.Random(f"{self.seed}:{salt}")
        if self.tokenizer is None:
            return " ".join(rng.choice(WORDS) for _ in range(n))
        return make_exact_text(self.tokenizer, n, rng)
