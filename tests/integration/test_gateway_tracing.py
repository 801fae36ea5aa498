"""OpenTelemetry traces of the gateway, exported over OTLP to a real receiver on loopback.

The receiver (`tests.otlp_receiver`) stands in for the OpenTelemetry Collector, which no package registry
these tests may use ships: a real OTLP/HTTP (and gRPC) server decoding with the ``opentelemetry-proto``
messages. The gateway is a real process; its upstreams are `tokometer sim` processes whose faults make a
hedge, a mid-stream failure and a fallback happen in one streamed request, and a raw upstream that records
the request heads it received (for ``traceparent``).
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator

import pytest

from tests.conftest import SimServer
from tests.http_servers import RawServer, openai_sse, running
from tests.integration.gateway_streams import gateway_factory, stream_chat, upstream
from tests.otlp_receiver import GrpcReceiver, OtlpReceiver, ReceivedSpan

__all__ = ["gateway_factory"]  # the fixture, used by name

_TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
_CLIENT_SPAN = "00f067aa0ba902b7"
_TRACEPARENT = f"00-{_TRACE_ID}-{_CLIENT_SPAN}-01"
_ASK = {"model": "chat", "messages": [{"role": "user", "content": "tell me a story please"}], "max_tokens": 20,
        "stream_options": {"include_usage": True}}


@pytest.fixture(autouse=True)
def _quick_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """The gateway's batch span processor exports every 100 ms (the SDK's default is 5 s)."""
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "100")


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    with OtlpReceiver() as started:
        yield started


def _tracing(endpoint: str, extra: str = "") -> str:
    return f'[tracing]\nendpoint = "{endpoint}"\nservice_name = "gw-under-test"\n{extra}\n'


def _by_kind(spans: list[ReceivedSpan], kind: str) -> list[ReceivedSpan]:
    return sorted((s for s in spans if s.kind == kind), key=lambda s: s.start_ns)


def test_a_hedged_resumed_request_with_a_fallback_is_one_trace(sim_factory: Callable[..., SimServer],
                                                               gateway_factory: Callable[[str], SimServer],
                                                               receiver: OtlpReceiver) -> None:
    """The primary is late (hedged, and loses); the hedge breaks off after 5 tokens (resumed); the resume's first
    upstream is still late (times out), so the answer falls back to the third upstream. One trace: the client's
    request, and under it one span per upstream request, each saying what it was and how it ended."""
    slow = sim_factory("--model", "big", "--ttft-ms", "3000", "--itl-ms", "2")
    breaks = sim_factory("--model", "big", "--ttft-ms", "5", "--itl-ms", "2", "--fault-after-tokens", "5",
                         "--fault-schedule", "reset")
    good = sim_factory("--model", "small", "--ttft-ms", "5", "--itl-ms", "2")
    gw = gateway_factory(upstream("slow", slow, "big", "retries = 0\nfirst_token_timeout_s = 0.5") +
                         upstream("breaks", breaks, "big", "retries = 0") + upstream("good", good, "small") +
                         '[[routes]]\nmodel = "chat"\nupstreams = ["slow", "breaks", "good"]\n'
                         'hedge_after = "100ms"\nresume_midstream = true\n[cache]\nenabled = false\n'
                         + _tracing(receiver.endpoint))
    out = stream_chat(gw.openai_url, _ASK, headers={"traceparent": _TRACEPARENT})
    assert out.status == 200 and not out.errors and len(out.text.split()) == 20, out.events
    assert out.headers["x-tokometer-hedge"] == "hedge"
    spans = receiver.wait_for(lambda got: len(got) >= 5)
    assert len(spans) == 5, [(s.name, s.attributes) for s in spans]
    assert {s.trace_id for s in spans} == {_TRACE_ID} and {s.service for s in spans} == {"gw-under-test"}
    [request] = _by_kind(spans, "server")
    assert request.parent_id == _CLIENT_SPAN and request.name == "chat chat" and not request.error
    a = request.attributes
    assert a["gen_ai.operation.name"] == "chat" and a["gen_ai.request.model"] == "chat"
    assert a["gen_ai.response.model"] == "big" and a["gen_ai.request.stream"] is True
    assert a["gen_ai.usage.output_tokens"] == 20 and a["gen_ai.usage.input_tokens"] > 0
    assert a["gen_ai.response.finish_reasons"] == ["length"] and a["http.response.status_code"] == 200
    assert 0 < a["gen_ai.response.time_to_first_chunk"] < 3
    assert a["tokometer.hedge"] == "hedge" and a["tokometer.resumes"] == 1 and a["tokometer.upstream"] == "good"
    attempts = _by_kind(spans, "client")
    assert {s.parent_id for s in attempts} == {request.span_id}
    seen = [(s.attributes["tokometer.upstream"], s.attributes["tokometer.attempt"], s.attributes["tokometer.segment"],
             s.attributes.get("tokometer.attempt.outcome"), s.attributes.get("error.type")) for s in attempts]
    assert seen == [("slow", "primary", 1, "cancelled", None),      # the hedge won the race: the primary is cancelled
                    ("breaks", "hedge", 1, "broke", "reset"),       # the winner broke off mid-answer
                    ("slow", "primary", 2, None, "timeout"),        # the resume's first try: no first token in 0.5 s
                    ("good", "fallback", 2, None, None)]            # ... so the next upstream carries the answer on
    assert [s.error for s in attempts] == [False, True, True, False]
    assert all(s.attributes["tokometer.segment.cause"] == "resume" for s in attempts[2:])
    for span in attempts:
        assert span.name == f"chat {span.attributes['gen_ai.request.model']}"
        assert span.attributes["gen_ai.provider.name"] == "openai"
        assert span.attributes["server.address"] == "127.0.0.1" and span.attributes["server.port"] > 0
        assert request.start_ns <= span.start_ns <= span.end_ns <= request.end_ns
    assert 0 < attempts[1].attributes["gen_ai.response.time_to_first_chunk"] < 1
    assert "gen_ai.response.time_to_first_chunk" in attempts[3].attributes


def _answer(conn: socket.socket) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
                 + b"".join(openai_sse()))


def _traceparent(head: bytes) -> str | None:
    for line in head.decode("latin-1").split("\r\n")[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "traceparent":
            return value.strip()
    return None


def _request_heads(gw_config: Callable[[str], str], gateway_factory: Callable[[str], SimServer],
                   headers: dict[str, str]) -> list[bytes]:
    """The request heads a raw upstream received for one streamed request through a gateway of ``gw_config``."""
    server = RawServer(_answer)
    with running(server) as url:
        gw = gateway_factory(gw_config(url))
        assert stream_chat(gw.openai_url, _ASK, headers=headers).status == 200
    return server.heads


def _raw_route(tracing: str) -> Callable[[str], str]:
    def config(url: str) -> str:
        return (f'[[upstreams]]\nname = "raw"\nurl = "{url}"\nmodel = "m"\n[[routes]]\nmodel = "chat"\n'
                'upstreams = ["raw"]\n' + tracing)

    return config


@pytest.mark.parametrize("client_parent", [True, False])
def test_the_upstream_sees_the_attempt_span_as_its_parent(gateway_factory: Callable[[str], SimServer],
                                                          receiver: OtlpReceiver, client_parent: bool) -> None:
    """The request span continues the client's trace (or starts one); the upstream request carries the
    attempt span's ``traceparent``, so the engine's spans join the same trace under it."""
    headers = {"traceparent": _TRACEPARENT} if client_parent else {}
    [head] = _request_heads(_raw_route(_tracing(receiver.endpoint)), gateway_factory, headers)
    spans = receiver.wait_for(lambda got: len(got) >= 2)
    [request], [attempt] = _by_kind(spans, "server"), _by_kind(spans, "client")
    assert attempt.parent_id == request.span_id and attempt.trace_id == request.trace_id
    assert request.parent_id == (_CLIENT_SPAN if client_parent else "")
    assert request.trace_id == _TRACE_ID or not client_parent
    parent = (_traceparent(head) or "").split("-")
    assert parent[:3] == ["00", attempt.trace_id, attempt.span_id] and int(parent[3], 16) & 1  # sampled
    # (a trace the gateway starts also has W3C Trace Context level 2's "random trace id" flag, 02)
    assert attempt.attributes["tokometer.attempt"] == "primary" and attempt.attributes["gen_ai.request.model"] == "m"
    assert request.attributes["gen_ai.usage.output_tokens"] == 4 and request.attributes["gen_ai.response.model"] == "m"


def test_tracing_is_off_by_default(gateway_factory: Callable[[str], SimServer]) -> None:
    """Without [tracing] the upstream request carries no trace headers (the client's are not passed on either)."""
    [head] = _request_heads(_raw_route(""), gateway_factory, {"traceparent": _TRACEPARENT})
    assert _traceparent(head) is None


def test_an_unsampled_request_exports_nothing_and_says_so_upstream(gateway_factory: Callable[[str], SimServer],
                                                                    receiver: OtlpReceiver) -> None:
    """``sample_ratio = 0``: no spans, and the upstream is told (flags 00); a client's sampled traceparent wins."""
    config = _raw_route(_tracing(receiver.endpoint, "sample_ratio = 0"))
    [head] = _request_heads(config, gateway_factory, {})
    parent = _traceparent(head)
    assert parent is not None and not int(parent.split("-")[3], 16) & 1  # not sampled: nor need the engine be
    [sampled] = _request_heads(config, gateway_factory, {"traceparent": _TRACEPARENT})
    assert (_traceparent(sampled) or "").startswith(f"00-{_TRACE_ID}-")
    spans = receiver.wait_for(lambda got: len(got) >= 2)
    assert {s.trace_id for s in spans} == {_TRACE_ID}


def test_spans_go_over_grpc_too(gateway_factory: Callable[[str], SimServer]) -> None:
    with GrpcReceiver() as grpc_receiver:
        _request_heads(_raw_route(_tracing(grpc_receiver.endpoint, 'protocol = "grpc"')), gateway_factory, {})
        spans = grpc_receiver.wait_for(lambda got: len(got) >= 2)
    assert sorted(s.kind for s in spans) == ["client", "server"]


def test_a_refused_request_and_a_cache_hit_are_one_span_each(gateway_factory: Callable[[str], SimServer],
                                                              sim_factory: Callable[..., SimServer],
                                                              receiver: OtlpReceiver) -> None:
    """Answered before any upstream request: the request's span alone, with its status (and the cache's word)."""
    sim = sim_factory("--ttft-ms", "1")
    gw = gateway_factory(upstream("sim", sim, "m") + '[[routes]]\nmodel = "chat"\nupstreams = ["sim"]\n'
                         + _tracing(receiver.endpoint))
    assert stream_chat(gw.openai_url, {**_ASK, "model": "nope"}).status == 404
    [refused] = receiver.wait_for(lambda got: len(got) >= 1)
    assert refused.kind == "server" and refused.error and refused.attributes["http.response.status_code"] == 404
    assert refused.attributes["error.type"] == "404" and "gen_ai.request.model" not in refused.attributes
    for _ in range(2):
        assert stream_chat(gw.openai_url, {**_ASK, "temperature": 0}).status == 200
    spans = receiver.wait_for(lambda got: len(got) >= 4)
    hit = _by_kind(spans, "server")[-1]
    assert hit.attributes["tokometer.cache"] == "hit" and hit.attributes["gen_ai.request.model"] == "chat"
    assert not hit.error and not [s for s in spans if s.parent_id == hit.span_id]
    assert len(_by_kind(spans, "client")) == 1  # only the first asked the upstream


def test_a_continued_answer_has_a_span_per_segment(sim_factory: Callable[..., SimServer],
                                                   gateway_factory: Callable[[str], SimServer],
                                                   receiver: OtlpReceiver) -> None:
    """continue_on_length: an upstream that stops at 8 tokens is asked again twice, each a segment of its own."""
    sim = sim_factory("--model", "big", "--ttft-ms", "2", "--itl-ms", "1", "--max-output-tokens", "8")
    gw = gateway_factory(upstream("only", sim, "big") + '[[routes]]\nmodel = "chat"\nupstreams = ["only"]\n'
                         'continue_on_length = true\n[cache]\nenabled = false\n' + _tracing(receiver.endpoint))
    out = stream_chat(gw.openai_url, _ASK)
    assert out.status == 200 and len(out.text.split()) == 20
    spans = receiver.wait_for(lambda got: len(got) >= 4)
    [request], attempts = _by_kind(spans, "server"), _by_kind(spans, "client")
    assert [(s.attributes["tokometer.segment"], s.attributes.get("tokometer.segment.cause"),
             s.attributes["tokometer.attempt"]) for s in attempts] == [(1, None, "primary"), (2, "continue", "primary"),
                                                                       (3, "continue", "primary")]
    assert {s.parent_id for s in attempts} == {request.span_id} and not any(s.error for s in spans)
    assert request.attributes["gen_ai.usage.output_tokens"] == 20
