"""When an answer's segment ends: end the answer, continue it, resume it, or give up (a pure policy).

A relayed answer is one or more segments, each one upstream request (`tokometer.gateway.resume`
builds the request that carries an answer on). When a segment ends, `SegmentPolicy.decide` says
what comes next from the state of the answer alone (`SegmentState`):

- the segment ended cleanly: **continue** on the same upstream when the route continues on length
  (``continue_on_length``), the upstream stopped at ``finish_reason="length"``, the client's
  ``max_tokens`` is not reached, the answer is whole (not cut, no error event) and
  ``max_segments`` is not used up; else **end**;
- the segment failed: **resume** on the next upstream when the route resumes
  (``resume_midstream``), ``max_resumes`` is not used up, the text so far is whole (`Answer.cut`:
  it cannot be sent back) and tokens are left of the client's ``max_tokens``; else **give up**,
  with the reason when a resume was wanted but is impossible (None: none was wanted: the failure
  was the client going away, or the route does not resume, or its resumes are used up).

Nothing here does I/O; the relay acts on the decision.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from tokometer.gateway.openai_format import MAX_KEPT_CHARS
from tokometer.gateway.resume import client_max_tokens, resume_enabled

if TYPE_CHECKING:
    from collections.abc import Mapping

    from tokometer.gateway.config import RouteConfig

__all__ = ["CUT", "NOTHING_LEFT", "Decision", "SegmentPolicy", "SegmentState"]

Action = Literal["end", "continue", "resume", "give_up"]

CUT = f"too long to resume: the gateway keeps the first {MAX_KEPT_CHARS:,} characters of an answer"
NOTHING_LEFT = "nothing left to resume: the answer has all its max_tokens"


@dataclass(frozen=True, slots=True)
class SegmentState:
    """The answer when a segment ends."""

    finish_reason: str | None
    output_tokens: int
    """The answer's tokens so far, every segment's."""
    segments: int
    """Segments so far (1: the first is the one that ended)."""
    resumes: int
    """Resumes used so far."""
    cut: bool
    """The text so far is not all kept (`Answer.cut`): it cannot be sent back to carry it on."""
    failure: str | None = None
    """The segment's failure category (None: it ended cleanly)."""
    gone: bool = False
    """The client went away."""
    error: bool = False
    """The answer carries an error (an error event relayed to the client)."""


@dataclass(frozen=True, slots=True)
class Decision:
    action: Action
    why: str | None = None
    """With ``give_up``: why a wanted resume is impossible (None: no resume was wanted)."""


END = Decision("end")
CONTINUE = Decision("continue")
RESUME = Decision("resume")
GIVE_UP = Decision("give_up")


@dataclass(frozen=True, slots=True)
class SegmentPolicy:
    """A route's continuation and resume settings, with the client's token limits."""

    continue_on_length: bool
    resume: bool
    max_segments: int
    max_resumes: int
    wanted_tokens: int | None
    """The client's ``max_tokens`` as it asked (continuation carries on up to it)."""
    limit_tokens: int | None
    """The answer's limit as the request went upstream, after any capping (a resume stops at it)."""

    @classmethod
    def of(cls, route: RouteConfig, requested_max_tokens: int | None, body: Mapping[str, Any]) -> SegmentPolicy:
        return cls(route.continue_on_length, resume_enabled(route), route.max_segments, route.max_resumes,
                   requested_max_tokens, client_max_tokens(body))

    def decide(self, state: SegmentState) -> Decision:
        if state.failure is not None:
            if state.failure == "cancelled" or state.gone or not self.resume or state.resumes >= self.max_resumes:
                return GIVE_UP
            if state.cut:
                return Decision("give_up", CUT)
            if self.limit_tokens is not None and state.output_tokens >= self.limit_tokens:
                return Decision("give_up", NOTHING_LEFT)
            return RESUME
        if not self.continue_on_length or state.finish_reason != "length" or state.gone or state.error or state.cut:
            return END
        wanted = self.wanted_tokens
        if wanted is None or state.output_tokens >= wanted or state.segments >= self.max_segments:
            return END
        return CONTINUE

    def may_continue(self, finish_reason: str | None) -> bool:
        """Whether a segment that ended cleanly with ``finish_reason`` can be continued at all (False: `decide`
        says end, whatever else the state holds)."""
        return self.continue_on_length and finish_reason == "length"

    def carry_on_limit(self, finish_reason: str | None) -> int | None:
        """The token limit a carried-on answer counts down from: a continuation's the client's own, a
        resume's the upstream request's."""
        return self.wanted_tokens if self.continue_on_length and finish_reason == "length" else self.limit_tokens
