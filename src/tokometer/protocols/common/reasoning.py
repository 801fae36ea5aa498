"""Reasoning text inside a stream: the ``<think>`` tags, both directions.

Reasoning models send their reasoning either in a field of its own (OpenAI-style ``reasoning_content``
or ``reasoning`` deltas, Ollama's ``thinking``; read by each protocol's parser) or inline in the answer
text between ``<think>`` and ``</think>`` (a server without a reasoning parser: llama.cpp
``--reasoning-format none``, the legacy completions endpoints, TGI). This module owns the inline form:
`split_inline` finds the sections in a finished stream's event texts, wherever the tags were cut
across events, and `inline` writes them (the simulator's streams). A stream that closes a section it
never opened (``</think>`` first: DeepSeek-R1's template puts ``<think>`` in the prompt) reasoned
from its first character.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

__all__ = ["THINK_CLOSE", "THINK_OPEN", "EventSplit", "inline", "split_inline"]

THINK_OPEN: Final = "<think>"
THINK_CLOSE: Final = "</think>"

_ANSWER, _REASONING, _TAG = 0, 1, 2


@dataclass(frozen=True, slots=True)
class EventSplit:
    """What one event's text held: reasoning, answer, and whether a tag (or part of one) was in it."""

    reasoning: str
    answer: str
    tagged: bool = False


def _segments(joined: str) -> list[tuple[int, int, int]]:
    """``(start, end, kind)`` spans of the whole text, in order."""
    first_open, first_close = joined.find(THINK_OPEN), joined.find(THINK_CLOSE)
    thinking = first_close >= 0 and (first_open < 0 or first_close < first_open)
    spans: list[tuple[int, int, int]] = []
    pos = 0
    while pos < len(joined):
        tag = THINK_CLOSE if thinking else THINK_OPEN
        at = joined.find(tag, pos)
        kind = _REASONING if thinking else _ANSWER
        if at < 0:
            spans.append((pos, len(joined), kind))
            break
        if at > pos:
            spans.append((pos, at, kind))
        spans.append((at, at + len(tag), _TAG))
        pos = at + len(tag)
        thinking = not thinking
    return spans


def split_inline(texts: Sequence[str]) -> list[EventSplit] | None:
    """Each event's text split into reasoning and answer by its ``<think>`` sections (tags dropped);
    ``None`` when no tag occurs at all (the text is all answer)."""
    joined = "".join(texts)
    if THINK_OPEN not in joined and THINK_CLOSE not in joined:
        return None
    spans = _segments(joined)
    out: list[EventSplit] = []
    start, s = 0, 0
    for text in texts:
        end = start + len(text)
        parts: dict[int, list[str]] = {_ANSWER: [], _REASONING: [], _TAG: []}
        while s < len(spans) and spans[s][1] <= start:
            s += 1
        k = s
        while k < len(spans) and spans[k][0] < end:
            lo, hi, kind = spans[k]
            parts[kind].append(joined[max(lo, start):min(hi, end)])
            k += 1
        out.append(EventSplit("".join(parts[_REASONING]), "".join(parts[_ANSWER]), bool(parts[_TAG])))
        start = end
    return out


def inline(words: Sequence[str], first: int, reasoning_tokens: int) -> str:
    """Server side: the text of an event whose tokens are ``words`` (each with its leading space),
    the answer's tokens ``first``, ``first + 1``, ...; the first ``reasoning_tokens`` tokens of the
    answer are reasoning, so ``<think>`` opens on token 0 and ``</think>`` closes on the last of them.
    The tags ride on those tokens' text and take no tokens of their own."""
    out = []
    for i, word in enumerate(words):
        index = first + i
        if index == 0 and reasoning_tokens > 0:
            word = word[:len(word) - len(word.lstrip())] + THINK_OPEN + word.lstrip()
        if index == reasoning_tokens - 1:
            word += THINK_CLOSE
        out.append(word)
    return "".join(out)
