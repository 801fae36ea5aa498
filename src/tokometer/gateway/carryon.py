"""When a segment of a relayed answer ends: what failed, what the router hears, and what comes next.

`CarryOn.failure` says whether a segment failed (a connection that breaks after the answer's ending
lost nothing; with ``resume_midstream`` a stream that ends before its final event did fail) and
tells the router about a failure (`Router.failed`: the upstream's breaker and health). `CarryOn.next`
acts on the segment policy's decision (`tokometer.gateway.segments`): the answer ends; it is resumed
on the next upstream that answers; it is continued on the same upstream; or it gives up, with the
error the client reads. Both ways of carrying an answer on send the request of
`tokometer.gateway.resume`, after the segment is ended (`Measurement.end_segment`,
`Reply.restart`). The relay (`tokometer.gateway.relay`) calls these between segments only: nothing
here runs per event.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from tokometer.gateway.resume import carry_on_body
from tokometer.gateway.router import AllUpstreamsFailed, Opened, Router
from tokometer.gateway.segments import SegmentPolicy, SegmentState
from tokometer.gateway.tracing import carrying_on, segment_failed
from tokometer.gateway.upstream import UpstreamError

if TYPE_CHECKING:
    from tokometer.gateway.openai_format import Answer
    from tokometer.gateway.outcome import Measurement, RelayContext
    from tokometer.gateway.prometheus import GatewayMetrics
    from tokometer.gateway.reply import Reply

__all__ = ["CarryOn"]

log = logging.getLogger("tokometer.gateway")


class CarryOn:
    """One answer's segments: failures, router feedback, resumes and continuations."""

    __slots__ = ("answer", "ctx", "measure", "metrics", "policy", "reply", "resumes", "router", "served_by")

    def __init__(self, ctx: RelayContext, router: Router, metrics: GatewayMetrics, policy: SegmentPolicy,
                 measure: Measurement, answer: Answer, reply: Reply) -> None:
        self.ctx = ctx
        self.router = router
        self.metrics = metrics
        self.policy = policy
        self.measure = measure
        self.answer = answer
        self.reply = reply
        self.resumes = 0
        self.served_by: list[str] = []
        """Upstreams that served a segment cut off by a failure, then the one after (resume only)."""

    def failure(self, opened: Opened, broke: UpstreamError | None, events: int, gone: bool) -> UpstreamError | None:
        """How the segment of ``opened`` failed (None: it did not), ``broke``: what it raised; the router hears of
        a failure that was not the client's doing."""
        assembly = self.measure.assembly
        assert assembly is not None
        failure = broke
        if broke is not None and broke.category != "cancelled" and assembly.saw_done:
            # A connection that breaks after the answer's ending (a proxy dropping the last chunk)
            # lost nothing: the answer ends normally.
            log.warning("upstream %s broke off after the answer's ending (%s: %s): answer complete",
                        opened.upstream.name, broke.category, broke.detail[:120])
            failure = None
        elif broke is None and self.policy.resume and not assembly.saw_done and not gone and events:
            failure = UpstreamError("reset", "the stream ended before its final event")
        if failure is not None and failure.category != "cancelled" and not gone:
            self.router.failed(opened.upstream.name, failure)
            segment_failed(opened, failure)
        return failure

    def may_continue(self) -> bool:
        """Whether the answer, ended cleanly, may go on (False: it ends, without counting its tokens)."""
        return self.policy.may_continue(self.answer.finish_reason)

    async def next(self, opened: Opened, failure: UpstreamError | None, gone: bool,
                   error: str | None) -> tuple[Opened | None, str | None]:
        """The upstream request that carries the answer on after ``opened`` (None: the answer ends), and the
        answer's error (``error`` so far; with a failure given up on, what the client reads)."""
        assembly = self.measure.assembly
        assert assembly is not None
        answer = self.answer
        decision = self.policy.decide(SegmentState(
            answer.finish_reason, assembly.output_tokens_so_far(), self.measure.segments, self.resumes, answer.cut,
            failure.category if failure is not None else None, gone, bool(error)))
        if failure is None:
            return (await self._continue(opened, error)) if decision.action == "continue" else (None, error)
        resumed = None
        if decision.action == "resume":
            self.resumes += 1
            resumed, error = await self._resume(opened, failure, error)
        elif decision.why is not None:  # a resume was wanted and cannot be
            self._note_failed(opened)
            error = decision.why
            self._count(failure, "gave_up")
        if resumed is None:
            return None, self._give_up(opened, failure, error)
        return resumed, error

    async def _resume(self, opened: Opened, failure: UpstreamError,
                      error: str | None) -> tuple[Opened | None, str | None]:
        """Carry the answer on from where ``opened`` broke off, on the next upstream that answers (None: none did,
        and the error says why)."""
        route, failed = self.ctx.route, opened.upstream.name
        self._note_failed(opened)
        body = self._carry_on()
        await opened.discard()
        carrying_on("resume")
        try:
            resumed = await self.router.open(route, body, self.ctx.endpoint, exclude=frozenset(self.served_by))
        except (AllUpstreamsFailed, UpstreamError) as exc:
            self._count(failure, "gave_up")
            return None, f"resume failed: {exc}"
        self.served_by.append(resumed.upstream.name)
        self._count(failure, "resumed")
        assert self.measure.assembly is not None
        log.info("resumed an answer of %r on %s after %s failed mid-answer (%s: %s), %d tokens in",
                 route.model, resumed.upstream.name, failed, failure.category, failure.detail[:120],
                 self.measure.assembly.earlier_output_tokens)
        return resumed, error

    async def _continue(self, opened: Opened, error: str | None) -> tuple[Opened | None, str | None]:
        """Carry the answer on on the same upstream (it stopped at its own length limit)."""
        body = self._carry_on()
        await opened.discard()
        carrying_on("continue")
        try:
            return await self.router.open(self.ctx.route, body, self.ctx.endpoint, only=opened.upstream.name), error
        except (AllUpstreamsFailed, UpstreamError) as exc:
            return None, f"continuation failed: {exc}"

    def _give_up(self, opened: Opened, failure: UpstreamError, error: str | None) -> str:
        """The answer ends with ``failure`` (no resume, or none worked): the record's error, and the answer's."""
        record = self.measure.record
        if failure.category != "cancelled":
            record.error, record.error_detail = failure.category, failure.detail
        message = f"upstream {opened.upstream.name} failed mid-answer ({failure.category}): {failure.detail}"
        if error:  # a resume was tried and failed
            message = f"{message}; {error}"
        return message if failure.category != "cancelled" else f"cancelled: {failure.detail}"

    def _carry_on(self) -> dict[str, Any]:
        """End the current segment; the request that carries the answer on (continuation or resume)."""
        assembly, ctx, answer = self.measure.assembly, self.ctx, self.answer
        assert assembly is not None
        limit = self.policy.carry_on_limit(answer.finish_reason)
        self.measure.end_segment()
        left = None if limit is None else limit - assembly.earlier_output_tokens
        self.reply.restart()  # the ending of the cut-off segment is not the answer's ending
        answer.finish_reason = None
        return carry_on_body(ctx.body, ctx.endpoint, answer.text, left)

    def _note_failed(self, opened: Opened) -> None:
        if not self.served_by:
            self.served_by.append(opened.upstream.name)

    def _count(self, failure: UpstreamError, result: str) -> None:
        self.metrics.resumes.labels(self.ctx.route.model, failure.category, result).inc()
