"""HTTP/1.1 conformance of the streaming client, through `tokometer bench` and `tokometer gateway` alike.

Every case is a real server on a loopback socket. The close-delimited cases use Python's own
``http.server`` (what it, many small servers and some proxies send). The other cases use
`tests.http_servers.RawServer`, which writes exact bytes: they are protocol edge cases (interim 1xx
heads, chunk extensions and trailers, oversized heads, a connection dropped at a chosen byte) that
no real engine can be made to produce on demand. Each case runs through the bench core and through
a gateway process with that server as its upstream, and both must agree.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import SimServer, start_gateway
from tests.helpers import bench
from tests.http_servers import TOKENS, RawServer, Script, StdlibStreamServer, openai_sse, post_stream
from tokometer.client.http1 import MAX_HEAD_BYTES, HttpPool

SSE = b"".join(openai_sse())
TEXT = "".join(TOKENS)


def _send(*pieces: bytes, pause_s: float = 0.002, close: bool = False, linger_s: float = 0.0) -> Script:
    def script(conn: socket.socket) -> None:
        for piece in pieces:
            conn.sendall(piece)
            time.sleep(pause_s)
        time.sleep(linger_s)
        if close:
            conn.shutdown(socket.SHUT_RDWR)

    return script


def _chunked(events: list[bytes]) -> bytes:
    """A chunked body with chunk extensions on every chunk and two trailer fields."""
    body = b"".join(f"{len(e):x};ext=1;name=\"quoted value\"\r\n".encode() + e + b"\r\n" for e in events)
    return body + b"0;last\r\nX-Trailer: done\r\nServer-Timing: total;dur=12\r\n\r\n"


_LENGTH_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n" % len(SSE)
_CHUNKED_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


@dataclass
class Case:
    name: str
    server: RawServer | StdlibStreamServer
    error: str | None = None
    """The error category every request must end in (None: every request must succeed)."""
    detail: str = ""
    """A phrase the error message must contain."""
    gateway_completes: bool = False
    """The whole answer (its finish and ``[DONE]``) arrived before the break: the bench reports the break, the
    gateway ends the answer normally (its client lost nothing)."""


def _cases() -> list[Case]:
    ok = [
        Case("stdlib-http10-close-delimited", StdlibStreamServer("HTTP/1.0")),
        Case("stdlib-http11-connection-close-no-length", StdlibStreamServer("HTTP/1.1")),
        Case("raw-close-delimited", RawServer(_send(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n", *openai_sse(),
                                                   close=True))),
        Case("content-length-keep-alive", RawServer(_send(_LENGTH_HEAD, SSE), close_after=False)),
        Case("keep-alive-promised-then-closed", RawServer(_send(_LENGTH_HEAD.replace(
            b"Content-Length", b"Connection: keep-alive\r\nKeep-Alive: timeout=5\r\nContent-Length"), SSE)),
            ),
        Case("http10-content-length", RawServer(_send(_LENGTH_HEAD.replace(b"HTTP/1.1", b"HTTP/1.0"), SSE))),
        Case("chunked-extensions-trailers", RawServer(_send(_CHUNKED_HEAD, _chunked(openai_sse())),
                                                      close_after=False)),
        Case("100-continue-first", RawServer(_send(b"HTTP/1.1 100 Continue\r\n\r\n", _CHUNKED_HEAD,
                                                   _chunked(openai_sse())))),
        Case("103-early-hints-first", RawServer(_send(b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n"
                                                      + _LENGTH_HEAD + SSE))),
        Case("odd-header-whitespace", RawServer(_send(
            b"HTTP/1.1 200 OK\r\nContent-Type:\t  text/event-stream \t\r\nX-Odd:    a   b   \r\n"
            b"content-length: %d\r\nX-Empty:\r\n\r\n" % len(SSE), SSE))),
    ]
    failing = [
        Case("eof-before-head", RawServer(_send(close=True)), "reset", "before the response head"),
        Case("eof-mid-chunked", RawServer(_send(_CHUNKED_HEAD, _chunked(openai_sse())[:150], close=True)),
             "reset", "mid-response"),
        Case("eof-mid-content-length", RawServer(_send(_LENGTH_HEAD.replace(b"%d" % len(SSE), b"%d" % (len(SSE) + 50)),
                                                       SSE, close=True)), "reset", "mid-response",
             gateway_completes=True),
        Case("huge-header-line", RawServer(_send(b"HTTP/1.1 200 OK\r\nX-Big: " + b"x" * (2 * MAX_HEAD_BYTES)
                                                 + b"\r\nContent-Length: 0\r\n\r\n")),
             "protocol", "longer than 64 KiB"),
        Case("head-that-never-ends", RawServer(_send(b"HTTP/1.1 200 OK\r\nX-Line: ", *[b"y" * 8000] * 10,
                                                     linger_s=8.0)), "protocol", "longer than 64 KiB"),
        Case("too-many-header-fields", RawServer(_send(b"HTTP/1.1 200 OK\r\n"
                                                       + b"".join(b"X-F%d: v\r\n" % i for i in range(2000))
                                                       + b"Content-Length: 0\r\n\r\n")),
             "protocol", "more than 500 header fields"),
        Case("redirect-307", RawServer(_send(b"HTTP/1.1 307 Temporary Redirect\r\n"
                                             b"Location: http://elsewhere.invalid/v1/chat/completions\r\n"
                                             b"Content-Length: 0\r\n\r\n")),
             "redirect", "redirect to http://elsewhere.invalid/v1/chat/completions"),
    ]
    return ok + failing


CASES = _cases()


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, Case]]:
    for case in CASES:
        case.server.start()
    yield {case.name: case for case in CASES}
    for case in CASES:
        case.server.stop()


@pytest.fixture(scope="module")
def gateway(servers: dict[str, Case], tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimServer]:
    text = "[cache]\nenabled = false\n"
    for name, case in servers.items():
        text += (f'[[upstreams]]\nname = "{name}"\nurl = "{case.server.url}"\nmodel = "m"\nretries = 0\n'
                 f'breaker_failures = 1000\nidle_timeout_s = 5\n[[routes]]\nmodel = "{name}"\nupstreams = ["{name}"]\n')
    path = tmp_path_factory.mktemp("gw") / "gateway.toml"
    path.write_text(text)
    server = start_gateway(path)
    yield server
    server.stop()


@pytest.mark.parametrize("name", [case.name for case in CASES])
def test_bench(servers: dict[str, Case], name: str) -> None:
    case = servers[name]
    result = bench(case.server.url, model="m", concurrency=[1], requests=3, input_tokens=4, output_tokens=4,
                   tokenizer="none", idle_timeout_s=5)
    summary = result.steps[0].summary
    if case.error is None:
        assert summary.requests_completed == 3 and summary.requests_failed == 0, summary.error_examples
        assert summary.output_tokens_total == 3 * len(TOKENS)  # from the usage event: the body was read whole
        assert summary.ttft_ms.count == 3
    else:
        assert summary.errors == {case.error: 3}, summary.error_examples
        examples = " ".join(str(e) for e in summary.error_examples.values())
        assert case.detail in examples, examples


def _content(sse: bytes) -> str:
    text = ""
    for line in sse.decode().splitlines():
        if line.startswith("data: {"):
            for choice in json.loads(line[6:]).get("choices", []):
                text += choice.get("delta", {}).get("content") or ""
    return text


@pytest.mark.parametrize("name", [case.name for case in CASES])
def test_gateway(servers: dict[str, Case], gateway: SimServer, name: str) -> None:
    case = servers[name]
    for _ in range(2):  # twice: a connection left behind by the first answer must not break the second
        status, body = post_stream(gateway.openai_url, name)
        if case.error is None or case.gateway_completes:
            assert status == 200, body[:300]
            assert _content(body) == TEXT
            assert body.rstrip().endswith(b"data: [DONE]")
        elif status == 200:  # the answer had begun (a first token went to the client) when the upstream broke off
            assert case.detail == "mid-response"
            errors = [json.loads(line[6:])["error"]["message"] for line in body.decode().splitlines()
                      if line.startswith("data: {") and "error" in json.loads(line[6:])]
            assert len(errors) == 1 and f"failed mid-answer ({case.error})" in errors[0], body[-400:]
            assert case.detail in errors[0]
        else:
            assert status >= 500, body[:300]
            message = json.loads(body)["error"]["message"]
            assert f"{name}: {case.error}" in message and case.detail in message, message


def _through_gateway(server: RawServer, tmp_path: Path) -> tuple[int, bytes]:
    """One streamed chat request through a gateway process whose only upstream is ``server`` (model "m")."""
    config = tmp_path / "gw.toml"
    config.write_text(f'[[upstreams]]\nname = "raw"\nurl = "{server.url}"\n[[routes]]\nmodel = "m"\n'
                      'upstreams = ["raw"]\n')
    gw = start_gateway(config)
    try:
        return post_stream(gw.openai_url, "m")
    finally:
        gw.stop()


def test_ipv6_literal_host_is_bracketed_in_host_header(tmp_path: Path) -> None:
    server = RawServer(_send(_LENGTH_HEAD, SSE), host="::1", close_after=False)
    server.start()
    try:
        result = bench(server.url, model="m", concurrency=[1], requests=2, input_tokens=4, output_tokens=4,
                       tokenizer="none")
        assert result.steps[0].summary.requests_completed == 2
        assert all(f"\r\nHost: [::1]:{server.port}\r\n".encode() in head for head in server.heads)
        status, body = _through_gateway(server, tmp_path)
        assert status == 200 and _content(body) == TEXT
        assert f"\r\nHost: [::1]:{server.port}\r\n".encode() in server.heads[-1]
    finally:
        server.stop()


def test_host_header_forms() -> None:
    """RFC 9110 7.2: the port is left out when it is the scheme's default; an IPv6 literal keeps its brackets."""
    assert HttpPool("http://[::1]/v1", use_env_proxy=False).host_header == "[::1]"
    assert HttpPool("http://[::1]:8080/v1", use_env_proxy=False).host_header == "[::1]:8080"
    assert HttpPool("https://example.com/v1", use_env_proxy=False).host_header == "example.com"
    assert HttpPool("http://example.com:443/v1", use_env_proxy=False).host_header == "example.com:443"


def test_tool_call_deltas_pass_through_the_gateway(tmp_path: Path) -> None:
    """An OpenAI upstream answering with tool calls: deltas with no text, each of which must reach the client.
    The simulator does not stream tool calls, so a raw server sends a vLLM-shaped answer."""
    def chunk(delta: dict[str, object], finish: str | None = None) -> bytes:
        return b"data: " + json.dumps({"id": "c", "object": "chat.completion.chunk", "choices": [
            {"index": 0, "delta": delta, "finish_reason": finish}]}).encode() + b"\n\n"

    call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "weather", "arguments": ""}}
    events = [chunk({"role": "assistant", "content": None}), chunk({"tool_calls": [call]}),
              chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city": '}}]}),
              chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"Oslo"}'}}]}),
              chunk({}, "tool_calls"), b"data: [DONE]\n\n"]
    server = RawServer(_send(_CHUNKED_HEAD, _chunked(events)), close_after=False)
    server.start()
    try:
        status, body = _through_gateway(server, tmp_path)
    finally:
        server.stop()
    assert status == 200, body[:300]
    chunks = [json.loads(line[6:]) for line in body.decode().splitlines()
              if line.startswith("data: {")]
    arguments = "".join(tc["function"].get("arguments", "") for c in chunks for choice in c["choices"]
                        for tc in choice["delta"].get("tool_calls", []))
    assert arguments == '{"city": "Oslo"}'
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == "tool_calls"
    assert body.rstrip().endswith(b"data: [DONE]")
