"""`RequestRecord`: everything one request did, as raw monotonic timestamps.

The load generator fills a record while a request runs and hands it on; every
metric is derived later by pure functions in `tokometer.metrics`. Timestamps are
`time.perf_counter_ns()` values (CLOCK_MONOTONIC on Linux, so comparable across
processes on one host). Zero means "did not happen".

Field meanings follow docs/reference/metrics.md ("When things happen"):

- ``due_ns``: when the load profile wanted the request sent.
- ``connect_ns``: how long opening a new connection took (a duration; 0 when
  a kept-alive connection was reused). It falls between due and sent.
- ``sent_ns``: when the request was handed to the socket.
- ``first_byte_ns``: response headers received.
- ``event_ns``/``event_tokens``: arrival stamp and token count of each
  *content-carrying* event (text or reasoning text).
- ``first_token_ns``/``last_token_ns``: first and last content event.
- ``end_ns``: stream closed (or the request failed).
- ``first_answer_ns``: the first event carrying answer text, not reasoning (0: none did, or the stream
  carried no reasoning at all and the first token was the answer: see `answer_start_ns`).

What the workload made of a request (kept in the store's ``workload`` column, `workload`): the shared
prefix it started with (``prefix_group``; ``prefix_first``: the run's first request with that prefix), its
chat session and turn (``session``, ``turn``, from 0; an agent session's turn also its ``agent`` and
``ready_ns``, when what it waited for had ended), and the reasoning tokens of its answer
(``reasoning_tokens``, with ``reasoning_tokens_source``; ``hidden_tokens``: those never streamed), and the
server's numbers it did not believe (``rejected_numbers``), its tool calls (``first_tool_call_ns``, ``tool_calls``,
``tool_call_tokens``) and images (``images``; ``image_tokens``: the server's count, where it gave one). A request
sent by a Ray actor (``bench --ray``)
also carries the ``actor`` (numbered within the run, from 0) and the Ray ``node`` it ran on (the first 12 hex
digits of its node ID); its stamps were taken on that node's monotonic clock and moved onto the driver's
(`RequestRecord.shift_clock`, `tokometer.load.cluster`). A request of a tenant mix (``bench --mix``) carries
its ``tenant``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, Literal

__all__ = [
    "ERROR_CATEGORIES",
    "TOKEN_SOURCES",
    "ErrorCategory",
    "FinishReason",
    "RequestRecord",
    "ServerTiming",
    "TokenSource",
    "classify_http_error",
    "describe_http_failure",
]

TokenSource = Literal["usage", "native", "tokenizer", "estimate", "prompt_spec"]
"""Where a token count came from, most trusted first (docs/reference/metrics.md)."""

TOKEN_SOURCES: Final[tuple[str, ...]] = ("usage", "native", "tokenizer", "estimate", "prompt_spec")

ErrorCategory = Literal[
    "connect",
    "timeout",
    "http_401",
    "http_403",
    "http_400_context_length",
    "http_400",
    "http_404",
    "http_429",
    "http_4xx",
    "http_5xx",
    "redirect",
    "reset",
    "protocol",
    "malformed_stream",
    "server_error_event",
    "empty_response",
    "cancelled",
]

ERROR_CATEGORIES: Final[tuple[str, ...]] = ErrorCategory.__args__  # type: ignore[attr-defined]

FinishReason = Literal["stop", "length", "error", "cancelled", "unknown"]

_CONTEXT_LENGTH_HINTS: Final[tuple[str, ...]] = (
    "context length",
    "context_length",
    "maximum context",
    "context window",
    "exceeds the available context",
    "too many tokens",
    "must be <=",
    "max_model_len",
    "input validation error",
    "prompt is too long",
    "exceed_context_size",
)


_WORKLOAD_FIELDS: Final[tuple[str, ...]] = ("first_answer_ns", "reasoning_tokens", "reasoning_tokens_source",
                                              "hidden_tokens", "rejected_numbers", "first_tool_call_ns",
                                              "tool_calls", "tool_call_tokens", "tool_call_tokens_source",
                                              "images", "image_tokens", "inputs",
                                              "prefix_group", "prefix_first", "session", "turn", "agent", "ready_ns",
                                              "actor", "node", "tenant")
_NUMBERED_FROM_0: Final[tuple[str, ...]] = ("session", "turn", "prefix_group", "actor")
"""Workload fields whose 0 is a value, not "not set"."""
_STAMP_FIELDS: Final[tuple[str, ...]] = ("due_ns", "ready_ns", "sent_ns", "first_byte_ns", "first_token_ns",
                                         "last_token_ns", "end_ns", "first_answer_ns", "first_tool_call_ns")
"""The scalar clock readings of a record (``event_ns`` holds more); ``connect_ns`` is a duration."""


def classify_http_error(status: int, body: str) -> ErrorCategory:
    """Map an HTTP error status (and its body) onto an error category."""
    if status == 400:
        lowered = body.lower()
        if any(hint in lowered for hint in _CONTEXT_LENGTH_HINTS):
            return "http_400_context_length"
        return "http_400"
    if status == 401:
        return "http_401"
    if status == 403:
        return "http_403"
    if status == 404:
        return "http_404"
    if status == 413:
        return "http_400_context_length"
    if status == 429:
        return "http_429"
    if 500 <= status <= 599:
        return "http_5xx"
    return "http_4xx"


def describe_http_failure(status: int, headers: Mapping[str, str], body: str) -> tuple[ErrorCategory, str] | None:
    """(category, one-line detail) for an answer that is not a success (any 2xx is), else None.

    A 3xx is not followed (a POST must not be re-sent to another place unasked): it is the
    ``redirect`` error, and the detail names the Location so the user can point ``--url`` there.
    """
    if 200 <= status < 300:
        return None
    if 300 <= status < 400:
        location = headers.get("location", "")
        where = f" to {location}" if location else " (no Location given)"
        return "redirect", (f"HTTP {status} redirect{where}: redirects are not followed for POST; "
                            "use the final URL instead")
    return classify_http_error(status, body), f"HTTP {status}: {' '.join(body.split())[:300]}"


@dataclass(slots=True)
class ServerTiming:
    """What the server itself reported about a request, where the protocol says.

    Durations in milliseconds. ``None`` means the server did not report it.
    """

    prompt_tokens: int | None = None
    prompt_ms: float | None = None
    decode_tokens: int | None = None
    decode_ms: float | None = None
    total_ms: float | None = None
    cached_tokens: int | None = None
    """Prompt tokens the server took from its prompt cache (llama.cpp ``cache_n``, OpenAI
    ``usage.prompt_tokens_details.cached_tokens``)."""
    spec_verify_steps: int | None = None
    spec_accepted_tokens: int | None = None
    spec_draft_tokens: int | None = None
    """The request's speculative decoding as the answer said it: verify steps, drafted tokens kept, tokens
    drafted (SGLang's ``meta_info``: `tokometer.protocols.common.spec_meta`); None: not said."""

    @property
    def decode_tok_s(self) -> float | None:
        if self.decode_tokens and self.decode_ms:
            return self.decode_tokens / (self.decode_ms / 1000.0)
        return None


@dataclass(slots=True)
class RequestRecord:
    """One request: raw stamps, token counts with their source, and the outcome."""

    index: int
    step: int = 0
    warmup: bool = False
    due_ns: int = 0
    connect_ns: int = 0
    """Duration (not a stamp) of opening a new connection for this request; 0 when reused."""
    sent_ns: int = 0
    first_byte_ns: int = 0
    first_token_ns: int = 0
    last_token_ns: int = 0
    end_ns: int = 0
    event_ns: list[int] = field(default_factory=list)
    event_tokens: list[float] = field(default_factory=list)
    chunk_count: int = 0
    input_tokens: int | None = None
    input_tokens_source: TokenSource | None = None
    output_tokens: int | None = None
    output_tokens_source: TokenSource | None = None
    requested_output_tokens: int | None = None
    request_bytes: int | None = None
    """Bytes of the request as sent: what bounds the prompt tokens a server may count
    (`tokometer.client.plausible.prompt_bound`); None: not known. Not stored."""
    status: int | None = None
    finish_reason: FinishReason | None = None
    error: ErrorCategory | None = None
    error_detail: str = ""
    server: ServerTiming | None = None
    output_text: str = ""
    reasoning_text: str = ""
    """Reasoning sent in a field of its own (``reasoning_content``, Ollama's ``thinking``); inline ``<think>``
    sections stay in ``output_text``. Neither text is stored."""
    first_answer_ns: int = 0
    reasoning_tokens: int | None = None
    reasoning_tokens_source: TokenSource | None = None
    hidden_tokens: int | None = None
    """Output tokens the server counted but never streamed (reasoning an o-series API hides, counted in
    ``usage.completion_tokens_details.reasoning_tokens``): part of ``output_tokens``, never of TPOT or ITL."""
    rejected_numbers: str | None = None
    """The server's numbers this record did not believe, in words (`tokometer.protocols.common.numbers`,
    `tokometer.client.plausible`); the counts came from the next source down instead."""
    tool_call_text: str = ""
    """The tool calls' names and argument fragments as streamed (``delta.tool_calls``); not stored."""
    first_tool_call_ns: int = 0
    """The first event carrying a tool-call delta (0: none did); tool-call deltas are output, so the first
    token is at or before it."""
    tool_calls: int | None = None
    """Tool calls the answer made (distinct ``index`` values); None: none."""
    tool_call_tokens: int | None = None
    tool_call_tokens_source: TokenSource | None = None
    """Output tokens that were tool calls, and where that count came from (`tokometer.metrics.toolcalls`)."""
    images: int | None = None
    """Images the request sent (``--images``)."""
    image_tokens: int | None = None
    """Prompt tokens the server said were images (``usage.prompt_tokens_details.image_tokens``); None: it did
    not say (unknown, never guessed)."""
    prefix_group: int | None = None
    prefix_first: bool = False
    inputs: int | None = None
    """Inputs the request carried, for a protocol that takes a batch (embeddings, rerank); None for the rest."""
    session: int | None = None
    turn: int | None = None
    agent: str | None = None
    """The agent of an agent session's turn (``bench --agents``, `tokometer.load.agentic`)."""
    ready_ns: int = 0
    """An agent turn: when what it waited for had ended (its tool latency runs from here to ``due_ns``)."""
    actor: int | None = None
    node: str | None = None
    tenant: str | None = None
    """The tenant of a mix that sent it (``bench --mix``, `tokometer.datasets.mix`); saved with the workload."""

    def workload(self) -> dict[str, int | bool | str] | None:
        """The workload fields that are set, as saved (None when none is)."""
        out: dict[str, int | bool | str] = {}
        for name in _WORKLOAD_FIELDS:
            value = getattr(self, name)
            if value not in (None, 0, False) or (name in _NUMBERED_FROM_0 and value == 0):
                out[name] = value
        return out or None

    def set_workload(self, saved: Mapping[str, object] | None) -> None:
        """Restore what `workload` saved (names it does not know are dropped)."""
        for name, value in (saved or {}).items():
            if name in _WORKLOAD_FIELDS:
                setattr(self, name, value)

    def shift_clock(self, delta_ns: int) -> None:
        """Move every stamp by ``delta_ns`` (onto another clock's timeline); a 0 ("did not happen") stays 0."""
        if not delta_ns:
            return
        for name in _STAMP_FIELDS:
            if value := getattr(self, name):
                setattr(self, name, value + delta_ns)
        self.event_ns = [t + delta_ns for t in self.event_ns]

    @property
    def answer_start_ns(self) -> int:
        """When the answer (not its reasoning) began: the first answer event, else the first token."""
        return self.first_answer_ns or self.first_token_ns

    @property
    def ok(self) -> bool:
        """True when the request completed without error."""
        return self.error is None and self.end_ns > 0
