"""Per-request metrics: small pure functions of one `RequestRecord`.

Each returns ``None`` when the metric is undefined for that request (a failed
request, or too few tokens). Times are nanoseconds unless the name says
otherwise. Definitions: docs/reference/metrics.md and `tokometer.metrics.DEFINITIONS`.
"""

from __future__ import annotations

import bisect

from tokometer.records import RequestRecord

__all__ = [
    "answer_decode_speed_tok_s",
    "answer_tokens",
    "chunk_gaps_ns",
    "client_delay_ns",
    "client_lag_ns",
    "connect_ns",
    "decode_speed_tok_s",
    "e2e_ns",
    "e2e_speed_tok_s",
    "input_count",
    "itl_ns",
    "output_count",
    "prefill_speed_tok_s",
    "reasoned",
    "server_decode_tok_s",
    "server_prefill_ms",
    "streamed_tokens",
    "time_to_first_tool_call_ns",
    "tpot_ns",
    "ttfat_ns",
    "ttft_from_due_ns",
    "ttft_ns",
    "ttst_ns",
]


def ttft_ns(r: RequestRecord) -> int | None:
    """Time to first token: first content-carrying event minus send time."""
    if not r.ok or not r.first_token_ns:
        return None
    return r.first_token_ns - r.sent_ns


def ttst_ns(r: RequestRecord) -> int | None:
    """Time to second token: the arrival of the content event that brought the answer's second streamed token
    minus send time (a token arrives with the event that carries it: events are stamped, tokens are not).

    Equals TTFT when the first event carried two tokens or more; TTFT plus the first chunk gap when it carried
    one. ``None`` when fewer than two tokens arrived (or the request failed)."""
    if not r.ok or not r.first_token_ns:
        return None
    arrived = 0.0
    for stamp, tokens in zip(r.event_ns, r.event_tokens, strict=False):
        arrived += tokens
        if arrived >= 2.0 - 1e-9:
            return stamp - r.sent_ns
    return None


def time_to_first_tool_call_ns(r: RequestRecord) -> int | None:
    """Time to first tool call: the first event carrying a tool-call delta (a name or an argument fragment)
    minus send time; ``None`` when the answer called no tool. At or after TTFT: a tool-call delta is output."""
    if not r.ok or not r.first_tool_call_ns:
        return None
    return r.first_tool_call_ns - r.sent_ns


def reasoned(r: RequestRecord) -> bool:
    """True when the answer had reasoning: streamed (``first_answer_ns`` set or reasoning tokens counted)."""
    return bool(r.first_answer_ns or r.reasoning_tokens)


def answer_tokens(r: RequestRecord) -> int | None:
    """Output tokens that were not reasoning (all of them when the answer had no reasoning)."""
    if not r.ok or r.output_tokens is None:
        return None
    return max(0, r.output_tokens - (r.reasoning_tokens or 0))


def ttfat_ns(r: RequestRecord) -> int | None:
    """Time to first answer token: the first event carrying answer text (not reasoning) minus send time.

    Equals TTFT when the answer streamed no reasoning; ``None`` when it never got past its reasoning.
    """
    if not r.ok or not r.first_token_ns:
        return None
    if not r.first_answer_ns and r.reasoning_tokens and not answer_tokens(r):
        return None
    return r.answer_start_ns - r.sent_ns


def answer_decode_speed_tok_s(r: RequestRecord) -> float | None:
    """Decode speed of the answer alone: tokens of the events after the first answer event over the time
    from that event to the last one (`decode_speed_tok_s` counts reasoning and answer tokens alike)."""
    if ttfat_ns(r) is None or not r.event_ns:
        return None
    start = r.answer_start_ns
    k = bisect.bisect_left(r.event_ns, start)
    after = sum(r.event_tokens[k + 1:])
    if after <= 0 or r.last_token_ns <= start:
        return None
    return after / ((r.last_token_ns - start) / 1e9)


def ttft_from_due_ns(r: RequestRecord) -> int | None:
    """TTFT as the schedule sees it: includes time the request waited to be sent."""
    if not r.ok or not r.first_token_ns:
        return None
    return r.first_token_ns - r.due_ns


def client_lag_ns(r: RequestRecord) -> int | None:
    """How late the client sent the request against its schedule."""
    if not r.sent_ns:
        return None
    return r.sent_ns - r.due_ns


def client_delay_ns(r: RequestRecord) -> int | None:
    """Client lag minus connection setup: how late the client itself was."""
    lag = client_lag_ns(r)
    return None if lag is None else lag - r.connect_ns


def connect_ns(r: RequestRecord) -> int | None:
    """Time spent opening a new connection (``None`` when one was reused)."""
    return r.connect_ns or None


def tpot_ns(r: RequestRecord) -> float | None:
    """Decode time per output token, tokens of the first event excluded.

    ``(last_token_ns - first_token_ns) / (output_tokens - tokens_of_first_event)``:
    the first event marks the end of prefill; when it carries one token this is
    exactly ``(last - first) / (output_tokens - 1)`` (docs/reference/metrics.md). Tokens the server
    counted but never streamed (`RequestRecord.hidden_tokens`) are not output that arrived: left out.
    """
    if not r.ok or not r.output_tokens or not r.event_tokens:
        return None
    after_first = streamed_tokens(r) - r.event_tokens[0]
    if after_first <= 0 or r.last_token_ns <= r.first_token_ns:
        return None
    return (r.last_token_ns - r.first_token_ns) / after_first


def streamed_tokens(r: RequestRecord) -> int:
    """Output tokens that arrived in the stream: all of them but those the server never streamed."""
    return (r.output_tokens or 0) - (r.hidden_tokens or 0)


def decode_speed_tok_s(r: RequestRecord) -> float | None:
    """Decode speed: 1 / TPOT, tokens per second in the steady decode phase (reasoning tokens included): the
    "tokens per second" people usually mean."""
    tpot = tpot_ns(r)
    return 1e9 / tpot if tpot else None


def itl_ns(r: RequestRecord) -> list[float]:
    """Token-normalised inter-token latencies: each gap between content events
    divided by the number of tokens the later event carried."""
    if not r.ok or len(r.event_ns) < 2:
        return []
    stamps, tokens = r.event_ns, r.event_tokens
    return [(stamps[i] - stamps[i - 1]) / tokens[i] for i in range(1, len(stamps)) if tokens[i] > 0]


def chunk_gaps_ns(r: RequestRecord) -> list[int]:
    """Raw gaps between consecutive content events, not normalised."""
    if not r.ok or len(r.event_ns) < 2:
        return []
    stamps = r.event_ns
    return [stamps[i] - stamps[i - 1] for i in range(1, len(stamps))]


def e2e_ns(r: RequestRecord) -> int | None:
    """End-to-end latency: stream closed minus send time."""
    if not r.ok:
        return None
    return r.end_ns - r.sent_ns


def e2e_speed_tok_s(r: RequestRecord) -> float | None:
    """The naive "average speed" a simple timing script gives: output tokens over the whole request time (mixes
    network, TTFT and decode)."""
    e2e = e2e_ns(r)
    if not e2e or r.output_tokens is None:
        return None
    return r.output_tokens / (e2e / 1e9)


def prefill_speed_tok_s(r: RequestRecord) -> float | None:
    """Input tokens over TTFT, as the client sees it (includes queueing and network)."""
    ttft = ttft_ns(r)
    if not ttft or not r.input_tokens:
        return None
    return r.input_tokens / (ttft / 1e9)


def output_count(r: RequestRecord) -> float | None:
    """The request's output tokens, as a number (``None`` when not counted)."""
    return None if r.output_tokens is None else float(r.output_tokens)


def input_count(r: RequestRecord) -> float | None:
    """The request's input (prompt) tokens, as a number (``None`` when not counted)."""
    return None if r.input_tokens is None else float(r.input_tokens)


def server_prefill_ms(r: RequestRecord) -> float | None:
    """The engine's own prompt-processing time in ms, where the protocol reported it."""
    return r.server.prompt_ms if r.server is not None else None


def server_decode_tok_s(r: RequestRecord) -> float | None:
    """The engine's own decode speed, where the protocol reported it."""
    return r.server.decode_tok_s if r.server is not None else None
