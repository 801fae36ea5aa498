"""When a segment ends: what counts as a failure, and what the router hears (`tokometer.gateway.carryon`).

The resumes and continuations themselves open upstream requests and are tested end to end
(`tests/integration/test_gateway_resume.py`); the failure rule is decided here without a network.
"""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import pytest

from tokometer.gateway.carryon import CarryOn
from tokometer.gateway.config import RouteConfig
from tokometer.gateway.openai_format import Answer
from tokometer.gateway.outcome import Measurement, RelayContext
from tokometer.gateway.prometheus import GatewayMetrics
from tokometer.gateway.reply import Reply
from tokometer.gateway.segments import SegmentPolicy
from tokometer.gateway.upstream import UpstreamError
from tokometer.protocols.registry import create_client
from tokometer.records import ErrorCategory


class _Router:
    def __init__(self) -> None:
        self.failed_calls: list[tuple[str, str]] = []

    def failed(self, name: str, error: UpstreamError) -> None:
        self.failed_calls.append((name, error.category))


def _carry(resume: bool, saw_done: bool) -> tuple[CarryOn, _Router]:
    route = RouteConfig(model="m", upstreams=["a", "b"], resume_midstream=resume)
    ctx = RelayContext(route, "chat", {"model": "m", "messages": []}, True, False, None, None, 5, None,
                       time.perf_counter_ns())
    measure, answer = Measurement(ctx), Answer()
    measure.start(create_client("openai-chat"), time.perf_counter_ns()).saw_done = saw_done
    router = _Router()
    policy = SegmentPolicy.of(route, None, ctx.body)
    # _Router stands in for the gateway's router: it records what it is told
    carry = CarryOn(ctx, router, GatewayMetrics(), policy, measure, answer, Reply(ctx, answer))  # type: ignore[arg-type]
    return carry, router


_OPENED: Any = SimpleNamespace(upstream=SimpleNamespace(name="a"))


def test_a_break_after_the_answer_s_ending_is_no_failure() -> None:
    carry, router = _carry(resume=True, saw_done=True)
    assert carry.failure(_OPENED, UpstreamError("reset", "connection reset"), events=3, gone=False) is None
    assert router.failed_calls == []


def test_a_stream_that_ends_early_fails_only_where_resumes_are_on() -> None:
    carry, router = _carry(resume=True, saw_done=False)
    failure = carry.failure(_OPENED, None, events=3, gone=False)
    assert failure is not None and failure.category == "reset" and router.failed_calls == [("a", "reset")]
    carry, router = _carry(resume=False, saw_done=False)
    assert carry.failure(_OPENED, None, events=3, gone=False) is None
    assert carry.failure(_OPENED, None, events=0, gone=False) is None


@pytest.mark.parametrize(("category", "gone"), [("cancelled", False), ("reset", True)])
def test_the_router_does_not_hear_of_what_the_client_did(category: ErrorCategory, gone: bool) -> None:
    carry, router = _carry(resume=True, saw_done=False)
    failure = carry.failure(_OPENED, UpstreamError(category, "x"), events=3, gone=gone)
    assert failure is not None and failure.category == category
    assert router.failed_calls == []

