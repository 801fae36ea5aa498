"""The one budget of everything a server sends in one response: bytes, line length, time.

Every reader of a server's answer (the stamping client `client.http1` under bench, doctor, quality,
probes and the gateway's upstreams; the blocking one, `util.blockinghttp`, under ``/metrics`` scrapes,
``top``, ``/tokenize``, readiness and Ollama's pulls) holds a response to three limits defined here:

- **bytes**: everything counts, the status line, header fields, chunk-size lines and their extensions,
  trailer fields, SSE comments and ``event:``/``id:`` lines, events, the body; the reader stops (and the
  parser above it never sees more) once a response passes its budget. A streamed answer's budget is sized
  from what was asked (`response_budget`: ``max_tokens`` x `BYTES_PER_TOKEN` + `BUDGET_FLOOR_BYTES`), so a
  server that floods (comments that never end, a million trailer fields) costs at most that;
- **line length**: at most `MAX_FRAMING_RUN_BYTES` of framing (a head, a chunk-size line with its
  extensions, trailer fields) between two pieces of body, and a streamed event at most its limit;
- **time**: a deadline for the whole response, from the request's sending, that no trickle resets.

Each breach is an error that names the limit, its value and the setting that raises it (`over_budget`).
A leaf: it imports nothing of tokometer.
"""

from __future__ import annotations

__all__ = ["BUDGET_FLOOR_BYTES", "BYTES_PER_TOKEN", "EVENTS_IN_FLOOR", "MAX_FRAMING_RUN_BYTES", "MAX_TRAILER_FIELDS",
           "UNSIZED_BUDGET_BYTES", "BudgetExceeded", "answer_budget", "framing_run_too_long", "mib", "over_budget",
           "response_budget"]

BYTES_PER_TOKEN = 8 * 1024
"""What one asked-for token may cost on the wire, generously: a token's SSE event is 100-300 bytes, one with
twenty top log-probabilities about 2 KiB."""

BUDGET_FLOOR_BYTES = 16 * 1024 * 1024
"""What any response may cost besides its tokens: head, role and usage events, keep-alive comments, an error."""

UNSIZED_BUDGET_BYTES = 128 * 1024 * 1024
"""The budget of a response whose request named no ``max_tokens`` (a server's own default length)."""

MAX_FRAMING_RUN_BYTES = 128 * 1024
"""The most framing bytes (response head, chunk-size lines and extensions, trailer fields) read between two
pieces of body: a head is at most 64 KiB, a chunk-size line a few bytes, a trailer a few fields."""

MAX_TRAILER_FIELDS = 100
"""The most trailer fields after a chunked body (servers send none, or one or two)."""


class BudgetExceeded(OSError):
    """A response passed one of its read limits (the blocking reader's error; the stamping client raises
    its `ProtocolViolation` with the same message)."""


EVENTS_IN_FLOOR = 4
"""A raised limit on one event raises the floor to hold this many events of that size."""


def response_budget(max_tokens: int | None, floor: int = BUDGET_FLOOR_BYTES, max_event_bytes: int = 0) -> int:
    """The byte budget of an answer to a request for ``max_tokens`` tokens (None or 0: not named): ``floor`` (at
    least `EVENTS_IN_FLOOR` events of ``max_event_bytes``, where the user raised that) + `BYTES_PER_TOKEN` a
    token."""
    floor = max(floor, EVENTS_IN_FLOOR * max_event_bytes)
    if not max_tokens or max_tokens < 0:
        return max(UNSIZED_BUDGET_BYTES, floor)
    return floor + BYTES_PER_TOKEN * max_tokens


def answer_budget(max_body_bytes: int) -> int:
    """The budget of a whole answer (not a stream) whose body may be ``max_body_bytes``: that and what any
    response may cost besides (`BUDGET_FLOOR_BYTES`)."""
    return max_body_bytes + BUDGET_FLOOR_BYTES


def mib(n: int) -> str:
    """``n`` bytes in MiB for a message (``16 MiB``, ``0.5 MiB``)."""
    return f"{n / 1048576:g} MiB"


def over_budget(limit: int, setting: str, received: int | None = None) -> str:
    """The one-line message of a response past its byte budget."""
    so_far = f" ({mib(received)} read)" if received is not None else ""
    return (f"the response passed its read budget of {mib(limit)}{so_far} without ending (everything counts: "
            f"head, chunk framing, trailers, comments, events); a server that floods, or raise it with {setting}")


def framing_run_too_long(size: int) -> str:
    """The message of a response whose framing between two pieces of body passed `MAX_FRAMING_RUN_BYTES`."""
    return (f"the response sent {size // 1024} KiB of framing (a head, chunk-size lines and extensions, trailer "
            f"fields) without any body, past the limit of {MAX_FRAMING_RUN_BYTES // 1024} KiB: not an HTTP server "
            "that answers, or one that floods")
