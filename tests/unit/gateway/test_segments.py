"""The segment policy (`tokometer.gateway.segments`): end, continue, resume or give up, from a table of cases.

The policy is pure (no I/O), so it is tested on its own; the relay acting on it is tested end to end
against real upstreams in tests/integration/test_gateway_resume.py.
"""

from __future__ import annotations

import pytest

from tokometer.gateway.config import RouteConfig
from tokometer.gateway.segments import CUT, NOTHING_LEFT, SegmentPolicy, SegmentState


def policy(*, continue_on_length: bool = True, resume: bool = True, max_segments: int = 4, max_resumes: int = 2,
           wanted: int | None = 100, limit: int | None = 100) -> SegmentPolicy:
    return SegmentPolicy(continue_on_length, resume, max_segments, max_resumes, wanted, limit)


def state(*, finish: str | None = None, tokens: int = 10, segments: int = 1, resumes: int = 0, cut: bool = False,
          failure: str | None = None, gone: bool = False, error: bool = False) -> SegmentState:
    return SegmentState(finish, tokens, segments, resumes, cut, failure, gone, error)


CASES = [
    # (name, policy, state, action, why)
    ("clean stop ends", policy(), state(finish="stop"), "end", None),
    ("length below max_tokens continues", policy(), state(finish="length", tokens=40), "continue", None),
    ("length with continuation off ends", policy(continue_on_length=False), state(finish="length"), "end", None),
    ("length at the client's max_tokens ends", policy(wanted=40), state(finish="length", tokens=40), "end", None),
    ("length past max_tokens ends", policy(wanted=40), state(finish="length", tokens=41), "end", None),
    ("length without a client max_tokens ends", policy(wanted=None), state(finish="length"), "end", None),
    ("length with segments used up ends", policy(max_segments=3), state(finish="length", segments=3), "end", None),
    ("length with a segment left continues", policy(max_segments=3), state(finish="length", segments=2),
     "continue", None),
    ("length after the client left ends", policy(), state(finish="length", gone=True), "end", None),
    ("length with an error event ends", policy(), state(finish="length", error=True), "end", None),
    ("length with the text cut ends", policy(), state(finish="length", cut=True), "end", None),
    ("no finish reason ends", policy(), state(finish=None), "end", None),
    ("a reset resumes", policy(), state(failure="reset"), "resume", None),
    ("an error event resumes", policy(), state(failure="server_error_event"), "resume", None),
    ("a resume left resumes", policy(max_resumes=2), state(failure="reset", resumes=1), "resume", None),
    ("resumes used up gives up silently", policy(max_resumes=2), state(failure="reset", resumes=2), "give_up", None),
    ("resume off gives up silently", policy(resume=False), state(failure="reset"), "give_up", None),
    ("the client's cancel gives up silently", policy(), state(failure="cancelled"), "give_up", None),
    ("a failure after the client left gives up silently", policy(), state(failure="reset", gone=True),
     "give_up", None),
    ("a cut text cannot be resumed", policy(), state(failure="reset", cut=True), "give_up", CUT),
    ("all max_tokens in: nothing to resume", policy(limit=10), state(failure="reset", tokens=10), "give_up",
     NOTHING_LEFT),
    ("no limit: resumes whatever the count", policy(limit=None), state(failure="reset", tokens=10**6), "resume", None),
    ("the upstream limit, not the client's, bounds a resume", policy(wanted=1000, limit=10),
     state(failure="timeout", tokens=10), "give_up", NOTHING_LEFT),
    ("a failure is not continued even at length", policy(), state(finish="length", failure="reset"), "resume", None),
]


@pytest.mark.parametrize(("name", "pol", "st", "action", "why"), CASES, ids=[c[0] for c in CASES])
def test_decide(name: str, pol: SegmentPolicy, st: SegmentState, action: str, why: str | None) -> None:
    decision = pol.decide(st)
    assert (decision.action, decision.why) == (action, why), name


@pytest.mark.parametrize("finish", ["stop", None, "length", "tool_calls"])
@pytest.mark.parametrize("continue_on_length", [True, False])
def test_may_continue_is_decides_shortcut(finish: str | None, continue_on_length: bool) -> None:
    """`may_continue` False means `decide` ends a clean segment whatever the rest of the state."""
    pol = policy(continue_on_length=continue_on_length)
    if not pol.may_continue(finish):
        for st in (state(finish=finish), state(finish=finish, tokens=0), state(finish=finish, segments=1)):
            assert pol.decide(st).action == "end"
    else:
        assert pol.decide(state(finish=finish, tokens=0)).action == "continue"


def test_carry_on_limit() -> None:
    """A continuation counts down from the client's max_tokens, a resume from the upstream request's."""
    pol = policy(wanted=1000, limit=256)
    assert pol.carry_on_limit("length") == 1000
    assert pol.carry_on_limit(None) == 256
    assert policy(continue_on_length=False, wanted=1000, limit=256).carry_on_limit("length") == 256


def test_of_route() -> None:
    """Built from a route: resume defaults on with a fallback upstream, off with one."""
    one = RouteConfig(model="m", upstreams=["a"])
    two = RouteConfig(model="m", upstreams=["a", "b"], continue_on_length=True, max_segments=5, max_resumes=3)
    assert not SegmentPolicy.of(one, None, {}).resume
    pol = SegmentPolicy.of(two, 500, {"max_tokens": 200})
    assert (pol.resume, pol.continue_on_length, pol.max_segments, pol.max_resumes) == (True, True, 5, 3)
    assert (pol.wanted_tokens, pol.limit_tokens) == (500, 200)
    assert SegmentPolicy.of(two, None, {"max_completion_tokens": 7, "max_tokens": 9}).limit_tokens == 7
