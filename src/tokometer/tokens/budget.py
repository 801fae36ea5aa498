"""Token budgets: count before sending, cut a prompt to fit, cap ``max_tokens``.

These are the functions the rest of tokometer (prompt sources, the gateway) calls:

    count_tokens(text_or_messages, tokenizer=None, *, chat=False) -> int
    fit_to_budget(text, budget, tokenizer=None, *, cut="end", marker="") -> str
    max_output_tokens(context, prompt, tokenizer=None, *, cap=None) -> int

``tokenizer`` is a tokenizer object or a ``--tokenizer`` value (loaded once per process); None
means the bundled Gemma's. ``fit_to_budget`` cuts at token boundaries of the original text (by
the tokenizer's character offsets where it has them, else by decoding) and then re-counts what
it kept, because a cut text can tokenize differently from the same ids in context: the result
never exceeds the budget, and a text already within it comes back unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from tokometer.tokens.base import BaseTokenizer, Tokenizer
from tokometer.util.errors import TokenizerError

__all__ = ["Cut", "count_tokens", "fit_to_budget", "max_output_tokens"]

Cut = Literal["end", "start", "middle"]
TokenizerLike = Tokenizer | BaseTokenizer | str | None


def _resolve(tokenizer: TokenizerLike) -> Tokenizer:
    if tokenizer is None or isinstance(tokenizer, str):
        from tokometer.tokens.loader import cached_tokenizer

        return cached_tokenizer(tokenizer)
    return tokenizer


def count_tokens(text: str | Sequence[Mapping[str, Any]], tokenizer: TokenizerLike = None, *,
                 chat: bool = False) -> int:
    """Tokens of ``text`` with the model's tokenizer; messages (or ``chat=True``) go through its chat template."""
    tok = _resolve(tokenizer)
    if isinstance(text, str) and not chat:
        return tok.count(text)
    messages = [{"role": "user", "content": text}] if isinstance(text, str) else list(text)
    if not isinstance(tok, BaseTokenizer):
        raise TokenizerError(f"{tok.name} cannot apply a chat template")
    return tok.count_chat(messages)


class _Cutter:
    """Substrings of ``text`` covering its first or last ``n`` tokens."""

    def __init__(self, tok: Tokenizer, text: str) -> None:
        self.tok, self.text = tok, text
        self.ids = tok.encode(text)
        spans = tok.offsets(text) if isinstance(tok, BaseTokenizer) else None
        self.spans = spans if spans is not None and len(spans) == len(self.ids) else None
        self.lossless = self.spans is not None or tok.decode(self.ids) == text

    def head(self, n: int) -> str:
        if n <= 0:
            return ""
        if self.spans is not None:
            return self.text[: self.spans[n - 1][1]]
        return self.tok.decode(self.ids[:n])

    def tail(self, n: int) -> str:
        if n <= 0:
            return ""
        if self.spans is not None:
            return self.text[self.spans[len(self.ids) - n][0]:]
        return self.tok.decode(self.ids[len(self.ids) - n:])

    def fits(self, head: str, tail: str, joined: str, budget: int) -> int:
        """How many tokens ``joined`` is over the budget (0 when it fits and is a true cut of the text)."""
        if self.lossless and not (self.text.startswith(head) and self.text.endswith(tail)):
            return 1
        return max(0, self.tok.count(joined) - budget)


def fit_to_budget(text: str, budget: int, tokenizer: TokenizerLike = None, *, cut: Cut = "end",
                  marker: str = "") -> str:
    """``text`` cut to at most ``budget`` tokens at a token boundary.

    ``cut`` says where tokens go: ``"end"`` keeps the beginning, ``"start"`` keeps the end (recent
    chat history), ``"middle"`` keeps both ends and puts ``marker`` (e.g. ``"\\n…\\n"``) between them.
    """
    if budget < 0:
        raise ValueError(f"budget must be at least 0 (got {budget})")
    if cut not in ("end", "start", "middle"):
        raise ValueError(f"cut must be 'end', 'start' or 'middle' (got {cut!r})")
    tok = _resolve(tokenizer)
    cutter = _Cutter(tok, text)
    total = len(cutter.ids)
    if total <= budget:
        return text
    if cut == "middle":
        room = budget - (tok.count(marker) if marker else 0)
        if room <= 0:
            return ""
        n_head, n_tail = (room + 1) // 2, room // 2
        while n_head + n_tail > 0:
            head, tail = cutter.head(n_head), cutter.tail(n_tail)
            over = cutter.fits(head, tail, head + marker + tail, budget)
            if over == 0:
                return head + marker + tail
            for _ in range(over):
                if n_head >= n_tail and n_head > 0:
                    n_head -= 1
                elif n_tail > 0:
                    n_tail -= 1
        return ""
    n = budget
    while n > 0:
        kept = cutter.head(n) if cut == "end" else cutter.tail(n)
        over = cutter.fits(kept, "", kept, budget) if cut == "end" else cutter.fits("", kept, kept, budget)
        if over == 0:
            return kept
        n -= over
    return ""


def max_output_tokens(context: int, prompt: int | str | Sequence[Mapping[str, Any]],
                      tokenizer: TokenizerLike = None, *, cap: int | None = None) -> int:
    """What is left of a ``context``-token window for the answer after ``prompt`` (a count, a text,
    or messages counted with the chat template), at most ``cap`` (the max_tokens asked for); never < 0."""
    used = prompt if isinstance(prompt, int) else count_tokens(prompt, tokenizer)
    left = max(0, context - used)
    return left if cap is None else min(left, max(0, cap))
