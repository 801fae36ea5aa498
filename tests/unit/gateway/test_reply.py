"""What the client gets of an answer's events (`tokometer.gateway.reply`)."""

from __future__ import annotations

from types import SimpleNamespace

from tokometer.gateway.config import RouteConfig
from tokometer.gateway.openai_format import Answer
from tokometer.gateway.outcome import RelayContext
from tokometer.gateway.reply import Reply
from tokometer.protocols.registry import create_client


def test_an_openai_client_gets_an_openai_upstream_s_events_as_they_came_but_the_ending_waits() -> None:
    """`Reply.pass_on`: the role once, content and tool calls at once, usage only if asked, the ending held."""
    route = RouteConfig(model="m", upstreams=["a"])
    ctx = RelayContext(route, "chat", {"model": "m", "messages": []}, True, False, None, None, 5, None, 0)
    reply, sent = Reply(ctx, Answer()), list[bytes]()
    reply.put = sent.append
    backend = create_client("openai-chat")
    role = b'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}\n\n'
    text = b'data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}\n\n'
    call = b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]}}]}\n\n'
    finish = b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
    usage = b'data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}\n\n'
    for raw in (role, role, text, call, finish, usage):
        parsed = backend.parse(raw[6:-2])
        assert parsed is not None
        reply.pass_on(SimpleNamespace(raw=raw), parsed)  # type: ignore[arg-type]  # only its raw bytes are read
    assert sent == [role, text, call]
    assert reply.held == [finish]
