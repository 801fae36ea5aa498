"""A client's trace headers are its own text: whatever ``traceparent`` and ``tracestate`` say, a traced request
gets a span and sends its upstream a well-formed ``traceparent``, continuing the client's trace only when the
client's header is one (the W3C Trace Context format)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.otlp_receiver import OtlpReceiver
from tokometer.gateway import tracing
from tokometer.gateway.config import TracingConfig, UpstreamConfig

_VALID = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")
_HEADER_TEXT = st.text(st.characters(min_codepoint=0x20, max_codepoint=0xFF), max_size=300)
"""What an HTTP header's value can carry (latin-1, no control characters: the server's parser refuses those)."""
_UPSTREAM: Any = SimpleNamespace(name="u", cfg=UpstreamConfig(name="u", url="http://127.0.0.1:9/v1", model="m"))


@pytest.fixture(scope="module")
def tracer() -> Iterator[tracing.Tracer]:
    with OtlpReceiver() as receiver:
        made = tracing.tracer_for(TracingConfig(endpoint=receiver.endpoint, timeout_s=2))
        assert made is not None
        yield made
        made.shutdown()


def _sent_upstream(tracer: tracing.Tracer, headers: dict[str, str]) -> dict[str, str]:
    """The trace headers one traced request's upstream attempt sends."""
    async def request() -> dict[str, str]:
        seen: dict[str, str] = {}

        async def attempt() -> Any:
            seen.update(tracing.upstream_headers() or {})
            return SimpleNamespace(first_token_ns=None, call=SimpleNamespace(sent_ns=0, status=200), span=None)

        tracer.begin(headers, "chat", "openai")
        opened = await tracing.attempt(attempt(), _UPSTREAM)
        opened.span.end()
        return seen

    return asyncio.run(request())


@given(traceparent=_HEADER_TEXT | st.from_regex(_VALID, fullmatch=True), tracestate=_HEADER_TEXT)
def test_any_trace_headers_give_a_well_formed_traceparent(tracer: tracing.Tracer, traceparent: str,
                                                          tracestate: str) -> None:
    sent = _sent_upstream(tracer, {"traceparent": traceparent, "tracestate": tracestate})
    match = _VALID.match(sent["traceparent"])
    assert match is not None, sent
    client = _VALID.match(traceparent)
    if client is not None and set(client[1]) != {"0"} and set(client[2]) != {"0"}:
        assert match[1] == client[1]  # the client's trace continued
        assert int(match[3], 16) & 1 == int(client[3], 16) & 1  # and its sampling decision followed
    else:
        assert int(match[3], 16) & 1  # a new trace, sampled (sample_ratio 1)
