"""What one simulator process keeps between requests: counters, fault dice, vocabulary, trace, engine."""

from __future__ import annotations

import logging
import random
from typing import Protocol

from tokometer.sim.adapters import AdapterSlots
from tokometer.sim.config import SimConfig
from tokometer.sim.engine import Engine
from tokometer.sim.speculative import Draft, draft_for
from tokometer.sim.trace import SendTrace, TraceLog

__all__ = ["DropSimulatedResets", "SimMetricsLike", "SimState", "SimulatedReset"]

_SEEN_LIMIT = 10_000


class SimMetricsLike(Protocol):
    """What the streams need of `tokometer.sim.prometheus.SimMetrics` (kept apart to avoid an import cycle)."""

    def observe(self, trace: SendTrace) -> None: ...


class SimulatedReset(Exception):
    """Raised inside a started stream so the server drops the connection mid-answer."""


class DropSimulatedResets(logging.Filter):
    """Keeps uvicorn from logging a traceback for every simulated reset."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], SimulatedReset))


class SimState:
    """Configuration, request counter, fault dice, vocabulary and trace of one simulator process."""

    def __init__(self, config: SimConfig, engine: Engine | None = None) -> None:
        self.config = config
        self.engine = engine
        self.draft: Draft | None = engine.draft if engine is not None else draft_for(
            config.spec_tokens, config.spec_acceptance, config.spec_draft_cost, config.seed)
        """The draft model (speculative decoding), the engine's own in modelled mode; None without one."""
        self.metrics: SimMetricsLike | None = None
        self.trace = TraceLog(config.trace_size)
        self._rng = random.Random(config.seed)
        self._seq = 0
        self.in_flight = 0
        self.words: list[str] = []
        self._word_ids: dict[str, int] = {}
        self._seen_bodies: dict[str, None] = {}
        self.adapters = AdapterSlots(config.lora.max_loras) if config.lora is not None else None
        """The LoRA adapters loaded now, in scripted timing (the modelled engine keeps its own)."""

    def seen_before(self, digest: str) -> bool:
        """Whether a request body with this digest came before (the prefix cache's memory: the last 10,000)."""
        if digest in self._seen_bodies:
            return True
        self._seen_bodies[digest] = None
        if len(self._seen_bodies) > _SEEN_LIMIT:
            del self._seen_bodies[next(iter(self._seen_bodies))]
        return False

    def word_id(self, word: str) -> int:
        """The simulator's vocabulary grows as words are seen: one word, one id."""
        found = self._word_ids.get(word)
        if found is None:
            found = self._word_ids[word] = len(self.words)
            self.words.append(word)
        return found

    def next_request(self) -> tuple[int, str]:
        """The next request's number and the fault it gets (``none`` mostly)."""
        seq = self._seq
        self._seq += 1
        schedule = self.config.fault_schedule
        if schedule:
            return seq, schedule[seq % len(schedule)]
        roll = self._rng.random()
        for name, rate in self.config.faults.items():
            if roll < rate:
                return seq, name
            roll -= rate
        return seq, "none"
