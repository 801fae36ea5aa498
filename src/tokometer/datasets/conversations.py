"""Multi-turn chat sessions: what a simulated user says, turn after turn, and how long they think in between.

A `SessionScript` holds a session's user messages only. The assistant's side is never scripted: the load
generator (`tokometer.load.sessions`) appends the model's real answer to the history after each turn, so
each turn's prompt is the whole conversation so far, as a chat client sends it.

Two sources:

- `SyntheticSessions`: each user message is a synthetic prompt of exactly ``--input-tokens`` tokens (the
  `SyntheticSource` of the run, so every message of every session differs), ``--turns`` turns per
  session, ``--think-time`` before each turn after the first (both `Sampled`: fixed, a range or an
  exponential mean, drawn from the run's seed);
- `ShareGPTSessions`: the human turns of ShareGPT conversations, in order; with a tokenizer, each
  recorded answer's length becomes that turn's ``max_tokens`` (the answer itself is not sent: the model's
  own is). ``--turns`` caps the turns taken from a conversation.
"""

from __future__ import annotations

import itertools
import random
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tokometer.datasets.files import sharegpt_entries, sharegpt_messages
from tokometer.datasets.sampled import Sampled
from tokometer.datasets.synthetic import SyntheticSource
from tokometer.prompt import Message
from tokometer.tokens.base import Tokenizer
from tokometer.util.errors import DatasetError

if TYPE_CHECKING:
    from tokometer.datasets.mix import Tenant

__all__ = ["SessionScript", "SessionSource", "ShareGPTSessions", "SyntheticSessions", "Turn"]


@dataclass(frozen=True, slots=True)
class Turn:
    """One user turn: the message, its length when known, the answer's length, and the think time before it."""

    user: str
    input_tokens: int | None = None
    """Tokens of the user message alone (exact with a tokenizer); the prompt holds the history too."""
    max_tokens: int | None = None
    """The answer's ``max_tokens`` (None: the run's ``--output-tokens``)."""
    think_s: float = 0.0
    """How long the user thinks after the previous answer ended before sending this (0 for the first turn)."""


@dataclass(frozen=True, slots=True)
class SessionScript:
    """A user's side of one chat session."""

    turns: tuple[Turn, ...]
    system: tuple[Message, ...] = ()
    """Messages that open the conversation before the first user turn (a system prompt)."""
    tenant: Tenant | None = None
    """The tenant of a mix whose session it is (``--mix`` with ``--sessions``): each turn carries its marks."""


class SyntheticSessions:
    """Endless sessions of synthetic user messages; the same sequence for the same seed."""

    def __init__(self, prompts: SyntheticSource, turns: Sampled, think: Sampled, seed: int = 0) -> None:
        self.source = prompts
        self.turns = turns
        self.think = think
        self.seed = seed
        self.name = (f"sessions of {turns.describe()} turns, think time {think.describe()}; "
                     f"each user message {prompts.name}")
        self._cache: list[SessionScript] = []
        self._messages = prompts.prompts()
        self._lock = threading.Lock()

    def _make(self, index: int) -> SessionScript:
        rng = random.Random(f"{self.seed}:session:{index}")
        n = max(1, int(self.turns.draw(rng)))
        out = []
        for k in range(n):
            prompt = next(self._messages)
            out.append(Turn(prompt.text, prompt.input_tokens, None, self.think.draw(rng) if k else 0.0))
        return SessionScript(tuple(out))

    def prepare(self, n: int, stop: threading.Event | None = None) -> None:
        """Make the first ``n`` sessions now, before any timing starts (their messages need the tokenizer)."""
        with self._lock:
            while len(self._cache) < n and not (stop is not None and stop.is_set()):
                self._cache.append(self._make(len(self._cache)))

    def scripts(self) -> Iterator[SessionScript]:
        """The sessions in order, made on demand past those prepared."""
        for index in itertools.count():
            if index == len(self._cache):
                self._cache.append(self._make(index))
            yield self._cache[index]

    def script_list(self, offset: int, n: int) -> list[SessionScript]:
        """Sessions ``offset`` .. ``offset + n`` (for worker processes)."""
        self.prepare(offset + n)
        return self._cache[offset:offset + n]


class ShareGPTSessions:
    """The human turns of ShareGPT conversations, cycled; the model's answers replace the recorded ones."""

    def __init__(self, path: str | Path, tokenizer: Tokenizer | None, think: Sampled, *,
                 max_turns: int | None = None, seed: int = 0) -> None:
        p = Path(path)
        rng = random.Random(f"{seed}:think")
        self.name = f"sharegpt sessions:{p.name}" + (f" (at most {max_turns} turns)" if max_turns else "")
        self.items: list[SessionScript] = []
        for where, obj in sharegpt_entries(p):
            script = _script(sharegpt_messages(obj, where), tokenizer, think, rng, max_turns)
            if script is not None:
                self.items.append(script)
        if not self.items:
            raise DatasetError(f"dataset {p} holds no conversation with a human turn")

    def prepare(self, n: int, stop: threading.Event | None = None) -> None:
        """Nothing to make: the file was read when the source was opened."""

    def scripts(self) -> Iterator[SessionScript]:
        while True:
            yield from self.items

    def script_list(self, offset: int, n: int) -> list[SessionScript]:
        return [self.items[(offset + i) % len(self.items)] for i in range(n)]


def _script(messages: list[Message], tokenizer: Tokenizer | None, think: Sampled, rng: random.Random,
            max_turns: int | None) -> SessionScript | None:
    system = tuple(itertools.takewhile(lambda m: m.role == "system", messages))
    turns: list[Turn] = []
    rest = messages[len(system):]
    for i, message in enumerate(rest):
        if message.role != "user":
            continue
        answer = rest[i + 1] if i + 1 < len(rest) and rest[i + 1].role == "assistant" else None
        max_tokens = max(1, tokenizer.count(answer.content)) if answer is not None and tokenizer else None
        input_tokens = tokenizer.count(message.content) if tokenizer else None
        turns.append(Turn(message.content, input_tokens, max_tokens, think.draw(rng) if turns else 0.0))
        if max_turns is not None and len(turns) >= max_turns:
            break
    return SessionScript(tuple(turns), system) if turns else None


SessionSource = SyntheticSessions | ShareGPTSessions
