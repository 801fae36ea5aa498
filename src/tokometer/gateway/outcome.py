"""What a relayed request came to: the gateway's measurement over the stream assembly, and its outcome.

`Measurement` holds the `RequestRecord` the relay fills from the gateway's point of view (sent =
when the gateway received the request) and the `StreamAssembly` over it, across the answer's
segments (continuations and resumes: `tokometer.gateway.segments`), so that TTFT, TPOT, tokens and
E2E are `tokometer.metrics.request`'s, defined once for bench and gateway alike. `Measurement.outcome`
ends the record (status, error classification, the answer's token counts) and builds the
`RelayOutcome` the gateway accounts for (metrics, log, budget, cache, health).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tokometer.client.assemble import StreamAssembly
from tokometer.records import RequestRecord, classify_http_error

if TYPE_CHECKING:
    from tokometer.gateway.config import RouteConfig
    from tokometer.gateway.openai_format import Answer
    from tokometer.gateway.ratelimit import Limit
    from tokometer.gateway.router import Opened
    from tokometer.gateway.upstream import Upstream
    from tokometer.protocols.common.base import ProtocolClient
    from tokometer.protocols.gateway_clients import ClientApi, Endpoint

__all__ = ["Measurement", "RelayContext", "RelayOutcome"]


@dataclass(slots=True)
class RelayContext:
    """Everything decided before routing."""

    route: RouteConfig
    endpoint: Endpoint
    body: dict[str, Any]
    stream: bool
    include_usage: bool
    key: str | None
    cache_key: str | None
    prompt_tokens: int | None
    requested_max_tokens: int | None
    received_ns: int
    headers: dict[str, str] = field(default_factory=dict)
    api: ClientApi = "openai"
    """The protocol the client speaks (the request is an OpenAI ``endpoint`` request by now)."""
    rate_limits: tuple[Limit, ...] = ()
    """The rate limits the request is under: its tokens are counted in them when it is answered."""


@dataclass(frozen=True, slots=True)
class RelayOutcome:
    """What a relayed request came to, for accounting (metrics, log, budget, cache, health)."""

    ctx: RelayContext
    record: RequestRecord
    """The gateway's view: ``sent_ns`` is when it received the request; content stamps are arrivals from
    the upstream; ``end_ns`` when the answer ended. Metrics come from `tokometer.metrics.request`."""
    upstream_sent_ns: int
    """When the (first) upstream request was sent (0: none was)."""
    answer: Answer
    upstream: Upstream | None
    fallback: bool
    retries: int
    status: int
    error: str | None
    first_sent_ns: int | None
    """When the first content reached the client's connection."""
    gone: bool
    hedge: str | None = None
    """A hedge was sent: the leg that won ("primary" or "hedge")."""
    served_by: tuple[str, ...] = ()
    """With resumes: every upstream that served part of the answer, in order (empty: one did)."""
    upstream_done_ns: int = 0
    """A non-streamed answer: when the upstream's last event arrived (0: a streamed answer, or none arrived)."""


class Measurement:
    """The record and stream assembly of one relayed answer, over its segments."""

    __slots__ = ("_first_prompt", "assembly", "ctx", "record", "segments", "upstream_sent_ns")

    def __init__(self, ctx: RelayContext) -> None:
        self.ctx = ctx
        self.record = RequestRecord(index=0, due_ns=ctx.received_ns, sent_ns=ctx.received_ns,
                                    requested_output_tokens=ctx.requested_max_tokens)
        self.assembly: StreamAssembly | None = None
        """Once an upstream answers (None: none did)."""
        self.upstream_sent_ns = 0
        self.segments = 1
        self._first_prompt: int | None = None
        """Prompt tokens the first segment's upstream reported (a later segment's prompt holds the text so far)."""

    def start(self, backend: ProtocolClient, sent_ns: int) -> StreamAssembly:
        """The first upstream answers: assemble its events into the record."""
        self.upstream_sent_ns = sent_ns
        self.assembly = StreamAssembly(self.record, backend)
        return self.assembly

    def end_segment(self) -> None:
        """A segment ends and another carries the answer on."""
        assembly = self.assembly
        assert assembly is not None
        if self.segments == 1:
            final = assembly.final
            self._first_prompt = final.prompt_tokens if final.prompt_tokens is not None else final.prompt_tokens_native
        self.segments += 1
        assembly.end_segment()

    def output_tokens(self) -> int:
        """The answer's tokens so far, every segment's."""
        assert self.assembly is not None
        return self.assembly.output_tokens_so_far()

    def prompt_tokens(self) -> int | None:
        """The prompt's tokens as an upstream counted them: the first segment's; else (it broke before saying)
        the last segment's less the answer it was given to carry on; None: no upstream said."""
        assert self.assembly is not None
        if self._first_prompt is not None:
            return self._first_prompt
        final = self.assembly.final
        reported = final.prompt_tokens if final.prompt_tokens is not None else final.prompt_tokens_native
        if reported is None or self.segments == 1:
            return reported
        return max(0, reported - self.assembly.earlier_output_tokens)

    def outcome(self, answer: Answer, events: int, opened: Opened | None, first: Opened | None, *, status: int,
                error: str | None, gone: bool, first_sent_ns: int | None, served_by: list[str],
                upstream_done_ns: int = 0) -> RelayOutcome:
        """End the record and say what the request came to. ``opened``: the last segment's upstream request,
        ``first``: the first's (fallback, retries and hedge are how the answer began)."""
        record = self.record
        record.end_ns = time.perf_counter_ns()
        if self.assembly is not None:
            record.status = 200
            self.assembly.n_chunks = record.chunk_count = events
            self.assembly.finish(None)
            answer.completion_tokens = record.output_tokens
            if answer.prompt_tokens is None:
                answer.prompt_tokens = self.prompt_tokens()
        if record.error is None and (error is not None or gone):
            if gone:
                record.error = "cancelled"
            elif status != 200:
                record.error = classify_http_error(status, error or "")
            else:
                record.error = "server_error_event"
            record.error_detail = error or "the client went away"
        if answer.prompt_tokens is None:
            answer.prompt_tokens = self.ctx.prompt_tokens
        first = first or opened
        return RelayOutcome(self.ctx, record, self.upstream_sent_ns, answer,
                            opened.upstream if opened is not None else None, bool(first and first.fallback),
                            first.retries if first is not None else 0, 499 if gone else status,
                            error, first_sent_ns, gone, first.hedge if first is not None else None,
                            tuple(served_by) if len(served_by) > 1 else (), upstream_done_ns)
