"""Is a server's count believable against the stream it came with?

`tokometer.protocols.common.numbers` has already turned away what is not a count at all (a string, a negative, an
absurd size). What is left is a well-formed number that may still be wrong for this answer: more output
tokens than ``max_tokens`` allows, fewer than the token ids the events carried, none at all (or far fewer
than the content events) for an answer that streamed text. Each check returns why it does not believe a
number (one short phrase) or ``None``; `tokometer.client.assemble` then takes the count from the next
source down the order of trust (docs/reference/metrics.md) and the record says which number it set aside
(`RequestRecord.rejected_numbers`). A text-against-count check of the answer sits beside these.

Besides the output count, every other number a server gives is held to its partners and to what the request
could hold, by one table (`NUMBER_RULES`: one row per rule, ``field <= bound``): cached and image tokens are
at most the prompt, reasoning tokens at most the output, every prompt count at most what the request's bytes
(and images) can make (`prompt_bound`), the engine's decoded tokens at most ``max_tokens`` and its margin.
`judge_numbers` applies the table to a stream's last counters and names each number it sets aside with the
rule it broke; a new count the protocols read gets its rule as one more row.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from dataclasses import dataclass
from typing import Final

__all__ = ["NUMBER_RULES", "REQUEST_OUTPUT", "REQUEST_PROMPT", "NumberRule", "judge_numbers", "length_margin",
           "output_count_problem", "prompt_bound"]

_EVENTS_PER_TOKEN = 4
"""Content events one token may be split into (a multi-byte character sent byte by byte) before a count
that low is not believed: every engine sends at least one token an event."""


def length_margin(max_tokens: int) -> int:
    """Output tokens past ``max_tokens`` a server may still count: an end-of-sequence token, a stop string
    counted whole, a continuation's overlap (8 tokens or 10%, whichever is more)."""
    return max(8, max_tokens // 10)


def output_count_problem(reported: int, *, events: int, exact_tokens: int | None, max_tokens: int | None,
                         has_text: bool) -> str | None:
    """Why ``reported`` output tokens cannot be this answer's count, or ``None`` when it can.

    ``events``: the content events received; ``exact_tokens``: the tokens they carried where the protocol
    says exactly (token ids), else ``None``; ``max_tokens``: what the request asked for (``None``: no cap);
    ``has_text``: the answer streamed some text or reasoning.
    """
    if exact_tokens is not None and reported < exact_tokens:
        return f"fewer than the {exact_tokens} tokens its events carried"
    if reported == 0 and events and has_text:
        return f"0 tokens for {events} content events"
    if exact_tokens is None and has_text and reported * _EVENTS_PER_TOKEN < events:
        return f"fewer than one token for every {_EVENTS_PER_TOKEN} of its {events} content events"
    if max_tokens is not None and reported > max_tokens + length_margin(max_tokens):
        return f"more than max_tokens {max_tokens} allows"
    return None


_TOKENS_PER_REQUEST_BYTE: Final = 2
"""Prompt tokens one byte of the request may make: a tokenizer makes at most one token of a byte (byte
fallback), and the request's JSON holds every byte of the prompt; twice that is generous."""

_TEMPLATE_TOKENS: Final = 8192
"""Prompt tokens a chat template and a system prompt the server adds may make, beyond the request's bytes."""

_TOKENS_PER_IMAGE: Final = 65_536
"""Prompt tokens one image may make (an image sent by URL has few bytes; the largest vision encoders make
some 16,000 tokens of one)."""

_TOKENS_PER_INPUT: Final = 512
"""Prompt tokens each input of a batch may add beyond its bytes (rerank counts the query once per document,
and each input gets its own special tokens)."""

REQUEST_PROMPT: Final = "the request's prompt"
"""The bound named in `NUMBER_RULES` for what the request's bytes could hold (`prompt_bound`)."""

REQUEST_OUTPUT: Final = "max_tokens"
"""The bound named in `NUMBER_RULES` for what ``max_tokens`` allows (with `length_margin`)."""


def prompt_bound(request_bytes: int, images: int = 0, inputs: int = 0) -> int:
    """The most prompt tokens a request of ``request_bytes`` bytes carrying ``images`` images and ``inputs``
    inputs of a batch (embeddings, rerank) can make."""
    return (_TOKENS_PER_REQUEST_BYTE * request_bytes + _TEMPLATE_TOKENS + _TOKENS_PER_IMAGE * images
            + _TOKENS_PER_INPUT * inputs)


@dataclass(frozen=True, slots=True)
class NumberRule:
    """One rule of a server's numbers: ``field`` (a counter of `ParsedEvent`) is at most ``bound`` (another
    counter, or `REQUEST_PROMPT` / `REQUEST_OUTPUT`). A number over its bound is set aside (``None``: the
    next source down is used), or with ``cut`` cut to the bound (a part that cannot exceed its whole)."""

    field: str
    bound: str
    cut: bool = False


NUMBER_RULES: Final[tuple[NumberRule, ...]] = (
    NumberRule("prompt_tokens", REQUEST_PROMPT),
    NumberRule("prompt_tokens_native", REQUEST_PROMPT),
    NumberRule("server_prompt_n", REQUEST_PROMPT),
    NumberRule("cached_prompt_tokens", REQUEST_PROMPT),
    NumberRule("image_tokens", REQUEST_PROMPT),
    NumberRule("server_decode_n", REQUEST_OUTPUT),
    NumberRule("cached_prompt_tokens", "prompt_tokens"),
    NumberRule("cached_prompt_tokens", "prompt_tokens_native"),
    NumberRule("image_tokens", "prompt_tokens"),
    NumberRule("image_tokens", "prompt_tokens_native"),
    NumberRule("server_prompt_n", "prompt_tokens_native"),
    NumberRule("reasoning_tokens", "completion_tokens", cut=True),
    NumberRule("reasoning_tokens", "completion_tokens_native", cut=True),
    NumberRule("spec_verify_steps", REQUEST_OUTPUT),
    NumberRule("spec_verify_steps", "completion_tokens"),
    NumberRule("spec_accepted_tokens", "completion_tokens"),
    NumberRule("spec_accepted_tokens", "spec_draft_tokens"),
)
"""Every cross-field and request rule, applied in order (a number set aside by an earlier row bounds
nothing after it). The output counts themselves are judged by `output_count_problem` first."""


def judge_numbers(values: MutableMapping[str, int | None], *, request_prompt: int | None,
                  request_output: int | None, note: Callable[[str], None]) -> None:
    """Hold ``values`` (counter name -> the server's count) to `NUMBER_RULES`, in place: a number over its
    bound is replaced (see `NumberRule`) and ``note`` is told the field, its value and the rule it broke.
    ``request_prompt``/``request_output``: the request's bounds (``None``: not known, those rows are skipped)."""
    limits = {REQUEST_PROMPT: request_prompt, REQUEST_OUTPUT: request_output}
    for rule in NUMBER_RULES:
        value = values.get(rule.field)
        bound = limits[rule.bound] if rule.bound in limits else values.get(rule.bound)
        if value is None or bound is None or value <= bound:
            continue
        values[rule.field] = bound if rule.cut else None
        replaced = f"cut to {bound}" if rule.cut else "set aside"
        note(f"{rule.field}={value} (more than {rule.bound} {bound}: must be <= it; {replaced})")
