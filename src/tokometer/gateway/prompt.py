"""Token budgets on the way in: count the prompt with the model's tokenizer before it is sent.

Estimate prompt tokens before sending, cap the input (reject or truncate),
cap ``max_tokens`` to what the context window leaves. Counting uses the
route's tokenizer (anything `tokometer count --tokenizer` takes) with the chat
template, so the number is the one the engine will see.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from tokometer.gateway.config import RouteConfig
from tokometer.messages import message_text
from tokometer.protocols.gateway_clients import Endpoint
from tokometer.tokens.base import BaseTokenizer
from tokometer.tokens.budget import fit_to_budget
from tokometer.util.errors import TokometerError

__all__ = ["PromptCheck", "PromptLimiter", "TooLong"]

_MARKER = "\n…\n"


class TooLong(Exception):
    """The prompt is over the route's input limit and the route rejects rather than truncates."""

    def __init__(self, tokens: int, limit: int) -> None:
        super().__init__(f"the prompt is {tokens:,} tokens, over this route's limit of {limit:,} input tokens "
                         "(counted with the model's tokenizer and chat template): shorten it. This is about model "
                         "tokens (the context budget), not an API key")
        self.tokens = tokens
        self.limit = limit


@dataclass(slots=True)
class PromptCheck:
    body: dict[str, Any]
    prompt_tokens: int | None
    truncated_from: int | None = None
    capped_max_tokens: int | None = None


class PromptLimiter:
    """Counts, truncates and caps for one route; without a tokenizer it only caps what it can."""

    def __init__(self, route: RouteConfig) -> None:
        self.route = route
        self.tokenizer: BaseTokenizer | None = None
        if route.tokenizer:
            from tokometer.tokens.loader import load_tokenizer

            try:
                self.tokenizer = load_tokenizer(route.tokenizer)
            except TokometerError as exc:
                raise TokometerError(f"route {route.model!r}: {exc}") from None

    def count(self, body: dict[str, Any], endpoint: Endpoint) -> int | None:
        tok = self.tokenizer
        if tok is None:
            return None
        if endpoint == "chat":
            return tok.count_chat(_messages(body))
        prompt = body.get("prompt", "")
        return tok.count(prompt if isinstance(prompt, str) else " ".join(map(str, prompt)))

    def check(self, body: dict[str, Any], endpoint: Endpoint) -> PromptCheck:
        """Apply the route's input limit and context cap; raise TooLong to reject."""
        route = self.route
        tokens = self.count(body, endpoint)
        result = PromptCheck(body, tokens)
        limit = route.max_input_tokens
        if tokens is not None and limit is not None and tokens > limit:
            if route.over_limit == "reject":
                raise TooLong(tokens, limit)
            result.body = self._truncate(body, endpoint, tokens, limit)
            result.truncated_from = tokens
            result.prompt_tokens = self.count(result.body, endpoint)
        if route.context is not None and result.prompt_tokens is not None:
            left = max(1, route.context - result.prompt_tokens)
            asked = result.body.get("max_completion_tokens", result.body.get("max_tokens"))
            if not isinstance(asked, int) or asked > left:
                result.body = dict(result.body)
                result.body["max_tokens"] = left
                result.body.pop("max_completion_tokens", None)
                result.capped_max_tokens = left
        return result

    def _truncate(self, body: dict[str, Any], endpoint: Endpoint, tokens: int, limit: int) -> dict[str, Any]:
        """Cut the longest message (or the prompt) in its middle so that the whole is ``limit`` tokens:
        exactly, unless the tokenizer merges tokens across the cut; never more."""
        tok = self.tokenizer
        assert tok is not None
        out = copy.deepcopy(body)
        if endpoint == "chat":
            messages = out["messages"]
            index = max(range(len(messages)), key=lambda i: tok.count(message_text(messages[i])))
            original = message_text(messages[index])
        else:
            original = str(out.get("prompt", ""))
        keep = max(0, tok.count(original) - (tokens - limit))
        best: dict[str, Any] | None = None
        for _ in range(8):  # the template and merges at the cut shift the count a little: adjust and retry
            cut = fit_to_budget(original, keep, tok, cut="middle", marker=_MARKER)
            if endpoint == "chat":
                out["messages"][index] = {**out["messages"][index], "content": cut}
            else:
                out["prompt"] = cut
            tokens = self.count(out, endpoint) or 0
            if tokens <= limit:
                best = copy.deepcopy(out)
            if tokens == limit or keep == 0:
                break
            keep = max(0, keep + (limit - tokens))
        if best is None:
            raise TooLong(tokens, limit)
        return best


def _messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"role": str(m.get("role", "user")), "content": message_text(m)} for m in body.get("messages") or ()]
