"""Is a server's count believable against the stream it came with?

`tokometer.protocols.common.numbers` has already turned away what is not a count at all (a string, a negative, an
absurd size). What is left is a well-formed number that may still be wrong for this answer: more output
tokens than ``max_tokens`` allows, fewer than the token ids the events carried, none at all (or far fewer
than the content events) for an answer that streamed text. Each check returns why it does not believe a
number (one short phrase) or ``None``; `tokometer.client.assemble` then takes the count from the next
source down the order of trust (docs/reference/metrics.md) and the record says which number it set aside
(`RequestRecord.rejected_numbers`). A text-against-count check of the answer sits beside these.
"""

from __future__ import annotations

__all__ = ["length_margin", "output_count_problem"]

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
