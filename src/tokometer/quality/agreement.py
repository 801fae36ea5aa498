"""Agreement of two endpoints' greedy answers, token by token: exact match, first divergence, KL, top-1.

Each endpoint's greedy answer is a token path: per generated token its text, its id where the
server gives one, and the top-k log-probabilities the server returned at that position
(`TokenStep`). Two paths are compared position by position (`compare_paths`):

- **exact match**: the token texts are identical, position by position, and the paths are equally long;
- **first divergence**: the first position whose tokens differ (or where one path ends);
- **compared positions**: positions where both endpoints saw the same context (the prompt and the
  same tokens before), so their next-token distributions are comparable: every position up to and
  including the first divergence, and, when B was teacher-forced on A's path (`runner`), every
  position of A's path;
- **top-1 agreement**: at a compared position, the two most likely tokens are the same;
- **KL(A‖B)** in nats (`kl_topk`), over what both servers returned: the tokens present in *both*
  top-k lists, plus one "rest" bucket per side holding all other probability (1 − the listed mass,
  floored at 1e-10). Lumping tokens together can only lose information, so by the data-processing
  inequality this is a lower bound of the full-vocabulary KL; it is exactly 0 for identical
  distributions.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tokometer.util.jsontext import whole_number
from tokometer.util.shown import quoted

__all__ = ["MAX_STEPS", "REST_FLOOR", "ItemComparison", "TokenStep", "compare_paths", "first_divergence",
           "kl_topk", "parse_logprobs"]

REST_FLOOR = 1e-10
"""The least probability a "rest" bucket is given, so that KL stays finite."""


@dataclass(frozen=True)
class TokenStep:
    """One generated token: its text, its id (None where the server gives none), the top-k log-probabilities."""

    token: str
    id: int | None = None
    top: Mapping[str, float] = field(default_factory=dict)

    @property
    def top1(self) -> str | None:
        """The most likely token at this position (None if the server listed none)."""
        return max(self.top, key=lambda t: self.top[t]) if self.top else None


def kl_topk(p: Mapping[str, float], q: Mapping[str, float], floor: float = REST_FLOOR) -> float:
    """KL(P‖Q) in nats from two top-k maps of token → log-probability, over the tokens both list plus a
    rest bucket each (a lower bound of the full KL; 0 when P and Q are the same)."""
    shared = p.keys() & q.keys()
    kl = 0.0
    mass_p = mass_q = 0.0
    for token in shared:
        prob = math.exp(p[token])
        mass_p += prob
        mass_q += math.exp(q[token])
        kl += prob * (p[token] - q[token])
    rest_p = max(0.0, 1.0 - mass_p)
    rest_q = max(floor, 1.0 - mass_q)
    if rest_p > floor:
        kl += rest_p * math.log(rest_p / rest_q)
    return max(0.0, kl)


def first_divergence(a: Sequence[str], b: Sequence[str]) -> int | None:
    """The first position where token paths ``a`` and ``b`` differ (or one ends); None when identical."""
    for index, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return index
    return None if len(a) == len(b) else min(len(a), len(b))


@dataclass(frozen=True)
class ItemComparison:
    """Two paths of one item compared: exact match, first divergence, and the per-position KL and top-1."""

    exact: bool
    divergence: int | None
    kl: tuple[float, ...]
    top1_same: tuple[bool, ...]
    forced_positions: int = 0
    """Positions after the divergence scored by teacher-forcing B on A's path."""


def compare_paths(a: Sequence[TokenStep], b: Sequence[TokenStep],
                  b_forced: Mapping[int, TokenStep] | None = None) -> ItemComparison:
    """Compare A's and B's greedy paths; ``b_forced``: B's distribution at positions of A's path past the
    divergence (teacher-forced), by position."""
    divergence = first_divergence([s.token for s in a], [s.token for s in b])
    shared_end = min(len(a), len(b)) if divergence is None else min(divergence + 1, len(a), len(b))
    pairs = [(a[i], b[i]) for i in range(shared_end)]
    forced = 0
    for position in range(shared_end, len(a)):
        step = (b_forced or {}).get(position)
        if step is None:
            break
        pairs.append((a[position], step))
        forced += 1
    kl = tuple(kl_topk(x.top, y.top) for x, y in pairs if x.top and y.top)
    top1 = tuple(x.top1 == y.top1 for x, y in pairs if x.top and y.top)
    return ItemComparison(divergence is None, divergence, kl, top1, forced)


MAX_STEPS = 100_000
"""Token positions one answer's logprobs may list (far beyond any ``max_tokens`` quality asks for)."""


def _logprob(value: Any, where: str) -> float:
    """A log-probability: a finite number, at most 0 (a rounding above 0 is read as 0); else ValueError."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{where} is {quoted(str(value))}, not a finite number")
    if value > 1e-3:
        raise ValueError(f"{where} is {value:g}: a log-probability is at most 0")
    return min(float(value), 0.0)


def _list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise ValueError(f"{where} is not a list")
    if len(value) > MAX_STEPS:
        raise ValueError(f"{where} lists {len(value):,} entries")
    return value


def _steps_from_content(content: list[Any]) -> list[TokenStep]:
    steps = []
    for position, entry in enumerate(_list(content, "logprobs.content")):
        if not isinstance(entry, dict):
            raise ValueError(f"logprobs.content[{position}] is not an object")
        top = {str(t.get("token", "")): _logprob(t["logprob"], f"logprobs.content[{position}].top_logprobs")
               for t in _list(entry.get("top_logprobs") or [], f"logprobs.content[{position}].top_logprobs")
               if isinstance(t, dict) and t.get("logprob") is not None}
        steps.append(TokenStep(str(entry.get("token", "")), whole_number(entry.get("id")), top))
    return steps


def parse_logprobs(choice: Mapping[str, Any]) -> list[TokenStep] | None:
    """The token path of one non-streamed choice, from either logprobs shape, or None if it has none.

    ``{"content": [{"token", "logprob", "id"?, "top_logprobs": [{"token", "logprob"}]}]}``: OpenAI chat, and
    llama.cpp for completions too; ``{"tokens", "token_logprobs", "top_logprobs": [{token: logprob}]}``: OpenAI's
    legacy completions, as vLLM answers them. A server's logprobs are data, not truth: a shape that is neither
    (entries that are not objects, a log-probability that is not a finite number at most 0, more than
    `MAX_STEPS` positions) raises ``ValueError`` saying where.
    """
    logprobs = choice.get("logprobs")
    if not isinstance(logprobs, dict):
        return None
    content = logprobs.get("content")
    if isinstance(content, list):
        return _steps_from_content(content)
    tokens = logprobs.get("tokens")
    if isinstance(tokens, list):
        _list(tokens, "logprobs.tokens")
        tops = logprobs.get("top_logprobs") or [None] * len(tokens)
        steps = []
        for position, (token, top) in enumerate(zip(tokens, _list(tops, "logprobs.top_logprobs"), strict=False)):
            if top is not None and not isinstance(top, dict):
                raise ValueError(f"logprobs.top_logprobs[{position}] is not an object")
            steps.append(TokenStep(str(token), None, {str(k): _logprob(v, f"logprobs.top_logprobs[{position}]")
                                                      for k, v in (top or {}).items() if v is not None}))
        return steps
    return None
