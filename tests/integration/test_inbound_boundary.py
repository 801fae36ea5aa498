"""The inbound boundary's examples (issue 31), against a real gateway before a real simulator on loopback.

Each test sends what a hostile client sent (an HTTP/0.9 request line, a 1 MiB chunk extension, a million
one-byte chunks, a trailer flood, 35 bodies trickling a byte every few seconds, Messages and Responses
bodies of 10,000 tools or 100,000 stop sequences or a tool result that is a number, a 300,000-entry
``logit_bias``, a flood of ``/metrics``) and asserts what must happen: a 4xx (in the client's own error
shape where a protocol is known) within seconds, a normal request beside it still answered, and no
traceback in either server's log. The generated variants are `tests/fuzz/test_inbound_generated.py`.
"""

from __future__ import annotations

import contextlib
import json
import socket
import statistics
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.inbound_clients import BASES, Servers, exchange, head, shape_of_error, start_servers
from tokometer.inbound.waiting_room import MAX_WAIT_S


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[Servers]:
    started = start_servers(tmp_path)
    yield started
    started.stop()


def _post(path: str, body: bytes, fields: tuple[tuple[str, str], ...] = ()) -> bytes:
    return head("POST", path, fields=(("Content-Type", "application/json"), ("Content-Length", str(len(body))),
                                      ("Connection", "close"), *fields)) + body


def _normal(servers: Servers, of: str = "gateway") -> None:
    answer = exchange(servers.address(of), [_post("/v1/chat/completions", json.dumps(BASES["/v1/chat/completions"])
                                                  .encode())], deadline_s=10)
    assert answer.status == 200, answer


def _chunked(path: str, chunks: bytes) -> bytes:
    return head("POST", path, fields=(("Content-Type", "application/json"), ("Transfer-Encoding", "chunked"),
                                      ("Connection", "close"))) + chunks


@pytest.mark.parametrize("of", ["gateway", "sim"])
def test_request_lines_of_other_http_versions_are_refused(servers: Servers, of: str) -> None:
    address = servers.address(of)
    assert exchange(address, [b"GET /health\r\n\r\n"]).status == 400  # HTTP/0.9: no version
    for version in ("HTTP/2.0", "HTTP/3.0", "HTTP/0.9"):
        answer = exchange(address, [head("GET", "/health", version)])
        assert answer.status in (400, 505), (version, answer)
    assert exchange(address, [head("GET", "health")]).status == 400  # not a path
    assert exchange(address, [head("GET", "/health", "HTTP/1.0")]).status == 200
    _normal(servers, of)
    assert "Traceback" not in servers.log()


@pytest.mark.parametrize("of", ["gateway", "sim"])
def test_chunked_framing_is_bounded_in_bytes(servers: Servers, of: str) -> None:
    body = json.dumps(BASES["/v1/chat/completions"]).encode()
    extension = b"%x;e=%s\r\n%s\r\n0\r\n\r\n" % (len(body), b"x" * (1 << 20), body)
    answer = exchange(servers.address(of), [_chunked("/v1/chat/completions", extension)], deadline_s=10)
    assert answer.status == 413 and answer.seconds < 5, answer
    tiny = b"".join(b"1\r\n%c\r\n" % byte for byte in body + b" " * 200_000) + b"0\r\n\r\n"
    answer = exchange(servers.address(of), [_chunked("/v1/chat/completions", tiny)], deadline_s=10)
    assert answer.status in (413, None) and answer.seconds < 5, answer  # (the 413 may come while it sends)
    trailers = b"%x\r\n%s\r\n0\r\n" % (len(body), body) + b"".join(b"X-T%d: v\r\n" % i for i in range(100_000))
    answer = exchange(servers.address(of), [_chunked("/v1/chat/completions", trailers + b"\r\n")], deadline_s=10)
    assert answer.status in (431, None) and answer.seconds < 5, answer
    for honest_body, size in ((body, 16), (json.dumps({**BASES["/v1/chat/completions"], "x": "a" * 1_000_000})
                                           .encode(), 64)):  # an upload in 64-byte chunks: an eighth in framing
        honest = b"".join(b"%x\r\n%s\r\n" % (len(honest_body[i:i + size]), honest_body[i:i + size])
                          for i in range(0, len(honest_body), size))
        answer = exchange(servers.address(of), [_chunked("/v1/chat/completions", honest + b"0\r\n\r\n")])
        assert answer.status == 200, answer
    _normal(servers, of)
    assert "Traceback" not in servers.log()


def _trickle(address: tuple[str, int], head_bytes: bytes, body: bytes, rate: float, chunked: bool,
             stop: threading.Event) -> None:
    """Send a request's head with its body's first 0.1 s, then the body at ``rate`` bytes a second by the clock
    (what is due every 20 ms, so the rate holds however late this thread runs), until the body ends, the server
    closes, or ``stop``."""

    def framed(piece: bytes) -> bytes:
        return b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece

    with contextlib.suppress(OSError), socket.create_connection(address, timeout=5) as sock:
        sent = int(rate / 10) or 1
        sock.sendall(head_bytes + framed(body[:sent]))
        began = time.monotonic()
        while sent < len(body) and not stop.is_set():
            time.sleep(0.02)
            due = min(len(body), max(sent + 1, int((time.monotonic() - began + 0.1) * rate)))
            sock.sendall(framed(body[sent:due]))
            sent = due


@pytest.mark.parametrize(("rate", "chunked"), [(5.0, False), (1000.0, False), (1000.0, True)],
                         ids=["behind", "keeping-up", "keeping-up-chunked"])
def test_slow_bodies_make_room_for_normal_requests(tmp_path: Path, rate: float, chunked: bool) -> None:
    """35 clients trickle their bodies (5 bytes a second, far behind the minimum rate of 500; or 1,000 bytes a
    second, twice it, with a Content-Length or chunked) and reconnect the moment they are closed or refused, at a
    gateway that holds 32 connections: every normal request is answered, because the trickles fall behind the
    minimum rate, or are the slowest requests on their way for over a second (a new connection waits for that,
    unread, in line: `tokometer.inbound.waiting_room`)."""
    servers = start_servers(tmp_path, "max_connections = 32")
    body = json.dumps({**BASES["/v1/chat/completions"], "x": "a" * 20_000}).encode()
    framing = ("Transfer-Encoding", "chunked") if chunked else ("Content-Length", str(len(body)))
    first = head("POST", "/v1/chat/completions", fields=(("Content-Type", "application/json"), framing))
    stop = threading.Event()

    def trickle() -> None:
        while not stop.is_set():
            _trickle(servers.address("gateway"), first, body, rate, chunked, stop)

    threads = [threading.Thread(target=trickle, daemon=True) for _ in range(35)]
    try:
        for thread in threads:
            thread.start()
        time.sleep(1.5)
        normal = _post("/v1/chat/completions", json.dumps(BASES["/v1/chat/completions"]).encode())
        answers = [exchange(servers.address("gateway"), [normal], deadline_s=10) for _ in range(15)]
        assert [a.status for a in answers] == [200] * 15, answers
        assert max(a.seconds for a in answers) < MAX_WAIT_S + 1.0, answers  # waited in line at most
    finally:
        stop.set()
        for thread in threads:
            thread.join(10)
        servers.stop()
    log = servers.log()
    assert "Traceback" not in log
    assert log.count("to make room: its request has not progressed") >= 15, log[-3000:]


def _tools(path: str, n: int) -> list[dict[str, Any]]:
    if path == "/v1/messages":
        return [{"name": f"f{i}", "input_schema": {"type": "object"}} for i in range(n)]
    return [{"type": "function", "name": f"f{i}", "parameters": {}} for i in range(n)]


def _bad_bodies(path: str) -> dict[str, dict[str, Any]]:
    base = BASES[path]
    bad = {"10,000 tools": {**base, "tools": _tools(path, 10_000)},
           "tools an object": {**base, "tools": {"name": "f"}},
           "a 300,000-entry logit_bias": {**base, "logit_bias": {str(i): 1 for i in range(300_000)}, "temperature": 0}}
    if path == "/v1/messages":
        turns = base["messages"]
        bad |= {"100,000 stop sequences": {**base, "stop_sequences": ["x"] * 100_000},
                "a tool result that is a number": {**base, "messages": [*turns[:2], {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": 42}]}]},
                "a tool input that is an array": {**base, "messages": [turns[0], {"role": "assistant", "content": [
                    {"type": "tool_use", "id": "t1", "name": "f", "input": [1, 2]}]}, turns[2]]},
                "messages an object": {**base, "messages": {"role": "user", "content": "hi"}}}
    else:
        items = base["input"]
        bad |= {"tool output that is a number": {**base, "input": [*items[:2], {
                    "type": "function_call_output", "call_id": "c1", "output": 42}]},
                "an item that is an array": {**base, "input": [items[0], [items[1]]]},
                "10,000 input items": {**base, "input": [items[0]] * 10_000}}
    return bad


@pytest.mark.parametrize("path", ["/v1/messages", "/v1/responses"])
@pytest.mark.parametrize("of", ["gateway", "sim"])
def test_hostile_fields_get_a_400_in_the_clients_shape(servers: Servers, path: str, of: str) -> None:
    assert exchange(servers.address(of), [_post(path, json.dumps(BASES[path]).encode())]).status == 200
    for name, body in _bad_bodies(path).items():
        answer = exchange(servers.address(of), [_post(path, json.dumps(body).encode())], deadline_s=10)
        assert answer.status == 400 and shape_of_error(path, answer.body), (name, answer.status, answer.body[:300])
    _normal(servers, of)
    log = servers.log()
    assert "Traceback" not in log and "Exception" not in log, log[-3000:]


def test_chat_limits_and_the_simulators_own_endpoints(servers: Servers) -> None:
    chat = BASES["/v1/chat/completions"]
    for body in ({**chat, "stop": ["x"] * 100_000}, {**chat, "logit_bias": {str(i): 1 for i in range(5000)}},
                 {**chat, "tools": [{"type": "function", "function": {"name": "f"}}] * 10_000},
                 {**chat, "model": "m" * 10_000}, {**chat, "messages": [{"role": "user", "content": [{"text": 1}]}]}):
        for of in ("gateway", "sim"):
            answer = exchange(servers.address(of), [_post("/v1/chat/completions", json.dumps(body).encode())])
            assert answer.status == 400 and shape_of_error("/v1/chat/completions", answer.body), answer
    sim = servers.address("sim")
    for path, body in (("/tokenize", {"messages": "hi"}), ("/detokenize", {"tokens": [-1]}),
                       ("/detokenize", {"tokens": {"a": 1}}), ("/v1/embeddings", {"input": [1.5]}),
                       ("/v1/embeddings", {"input": ["x"] * 5000}), ("/v1/rerank", {"query": "q", "documents": 5}),
                       ("/api/chat", {"messages": [{"role": "user", "content": 5}]}),
                       ("/generate_stream", {"inputs": "x", "parameters": {"stop": ["x"] * 100_000}}),
                       ("/completion", {"prompt": "x", "logit_bias": [[1, 1]] * 100_000})):
        answer = exchange(sim, [_post(path, json.dumps(body).encode())])
        assert answer.status == 400 and shape_of_error(path, answer.body), (path, answer)
    for change in ({"ttft_ms": 1e300}, {"itl_ms": -1}, {"stall_s": "long"}, {f"k{i}": 1 for i in range(1000)}):
        answer = exchange(sim, [head("PATCH", "/sim/config", fields=(("Content-Length", str(len(json.dumps(change)))),
                                                                      ("Connection", "close")))
                                + json.dumps(change).encode()])
        assert answer.status == 400, (change, answer)
    _normal(servers)
    assert "Traceback" not in servers.log()


@pytest.mark.timing
def test_a_flood_of_metrics_and_health_does_not_slow_streams(servers: Servers) -> None:
    """Four clients ask for /metrics and /health as fast as they can; the first tokens of streams beside
    them come about as soon as without them."""
    body = json.dumps({**BASES["/v1/chat/completions"], "stream": True}).encode()

    def first_tokens(n: int) -> float:
        times = []
        for _ in range(n):
            answer = exchange(servers.address("gateway"), [_post("/v1/chat/completions", body)])
            assert answer.status == 200
            times.append(answer.seconds)
        return statistics.median(times)

    quiet = first_tokens(30)
    stop = threading.Event()

    def flood(path: str) -> None:
        while not stop.is_set():
            exchange(servers.address("gateway"), [head("GET", path, fields=(("Connection", "close"),))])

    threads = [threading.Thread(target=flood, args=(p,), daemon=True) for p in ("/metrics", "/health") * 2]
    for thread in threads:
        thread.start()
    try:
        busy = first_tokens(30)
    finally:
        stop.set()
        for thread in threads:
            thread.join(10)
    assert busy < quiet * 3 + 0.01, (quiet, busy)


@pytest.mark.parametrize("of", ["gateway", "sim"])
def test_a_flood_of_pipelined_requests_is_closed(servers: Servers, of: str) -> None:
    """200,000 ``GET /health`` in one write, none of the answers read: the connection is closed after
    `MAX_PIPELINED` wait, and the server neither grows nor slows (uvicorn alone queued them all: 537 MB, and
    other clients' streams took 2 to 7 s)."""
    import psutil

    from tokometer.inbound.connections import MAX_PIPELINED

    process = psutil.Process((servers.gateway if of == "gateway" else servers.sim).pid)
    before = process.memory_info().rss
    honest = exchange(servers.address(of), [head("GET", "/health") * 3 + head("GET", "/health", fields=(
        ("Connection", "close"),))])
    assert honest.status == 200  # a few pipelined requests are answered
    flood = socket.create_connection(servers.address(of), timeout=10)

    def send() -> None:
        with contextlib.suppress(OSError):
            flood.sendall(head("GET", "/health") * 200_000)

    sender = threading.Thread(target=send)
    sender.start()
    try:
        time.sleep(1)
        _normal(servers, of)
        assert process.memory_info().rss - before < 100 << 20
    finally:
        flood.close()
        sender.join(10)
    assert f"over {MAX_PIPELINED} requests sent ahead" in servers.log()
    assert "Traceback" not in servers.log()
