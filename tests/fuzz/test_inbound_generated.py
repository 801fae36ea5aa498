"""Generated hostile requests against a real gateway before a real simulator on loopback (issue 31, 7).

Each example composes a request: a request line (method × target × HTTP version), a framing
(``Content-Length``, or chunked with chunks of a chosen size, chunk extensions and trailers of chosen sizes),
a body (a valid request of the endpoint's protocol, mutated: a field given a value of the wrong type, a
count far over its limit, a value nested deeper than the limit, a name or a text too long) and a timing
(sent at once, or in pieces with pauses between them). It is sent on a raw socket, and what must hold is
asserted: an answer within a deadline, never a 5xx (but 505 for an HTTP version other than 1.x); a 4xx in
the error shape of the endpoint's protocol (or, for what is refused before any protocol is known, the
connection's plain refusal); a valid answer only to a valid request line; a normal request answered beside
it; no traceback in either server's log. The examples are bounded (the fuzz profile's count, bodies under
1 MB, pauses under 0.2 s): the module runs in well under a minute.
"""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.inbound_clients import (
    BASES,
    GATEWAY_PATHS,
    SIM_PATHS,
    Answer,
    Servers,
    exchange,
    head,
    shape_of_error,
    start_servers,
)

DEADLINE_S = 10.0
CONNECTION_REFUSALS = {400, 404, 405, 408, 413, 431, 505}
"""What is answered in plain text, before a protocol is known: the request line, the head, the framing, the route."""

_WRONG = [42, -1, 1.5, "x", [], [1, "a"], {}, {"a": [1]}, True]
_COUNTS: dict[str, list[tuple[tuple[str, ...], Any]]] = {
    "/v1/chat/completions": [(("tools",), {"type": "function", "function": {"name": "f"}}), (("stop",), "x"),
                             (("messages",), {"role": "user", "content": "a"})],
    "/v1/completions": [(("stop",), "x"), (("prompt",), "a")],
    "/v1/messages": [(("tools",), {"name": "f"}), (("stop_sequences",), "x"),
                     (("messages", "0", "content"), {"type": "text", "text": "a"})],
    "/v1/responses": [(("tools",), {"type": "function", "name": "f"}), (("input",), {"role": "user", "content": "a"})],
    "/api/chat": [(("options", "stop"), "x"), (("messages",), {"role": "user", "content": "a"})],
    "/generate_stream": [(("parameters", "stop"), "x")],
    "/completion": [(("stop",), "x")],
    "/v1/embeddings": [(("input",), "a")],
    "/v1/rerank": [(("documents",), "a")],
    "/tokenize": [(("messages",), {"role": "user", "content": "a"})],
    "/detokenize": [(("tokens",), 1)],
}
"""Per endpoint, arrays a mutation fills far over their limits: (where, an element)."""


def _paths(value: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every place in a JSON value (object members and array elements)."""
    found: list[tuple[str, ...]] = []
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in items:
        found.append((*prefix, str(key)))
        found += _paths(child, (*prefix, str(key)))
    return found


def _put(body: Any, where: tuple[str, ...], value: Any) -> None:
    for key in where[:-1]:
        body = body[int(key)] if isinstance(body, list) else body.setdefault(key, {})
    if isinstance(body, list):
        body[int(where[-1])] = value
    elif isinstance(body, dict):
        body[where[-1]] = value


@st.composite
def bodies(draw: st.DrawFn, path: str) -> tuple[bytes, bool]:
    """A body for ``path``: (its bytes, whether it is the valid one unchanged)."""
    body = copy.deepcopy(BASES[path])
    kind = draw(st.sampled_from(["valid", "wrong type", "count", "deep", "long name", "long text", "not an object"]))
    if kind == "wrong type":
        _put(body, draw(st.sampled_from(_paths(body))), draw(st.sampled_from(_WRONG)))
    elif kind == "count":
        where, element = draw(st.sampled_from(_COUNTS[path]))
        _put(body, where, [element] * draw(st.sampled_from([300, 5_000, 20_000])))
    elif kind == "deep":
        nested: Any = "x"
        for _ in range(draw(st.integers(65, 300))):
            nested = {"a": nested} if draw(st.booleans()) else [nested]
        _put(body, draw(st.sampled_from(_paths(body))), nested)
    elif kind == "long name":
        _put(body, ("model",), "m" * draw(st.sampled_from([257, 100_000])))
    elif kind == "long text":
        _put(body, draw(st.sampled_from(_paths(body))), "word " * draw(st.sampled_from([1_000, 40_000])))
    elif kind == "not an object":
        return draw(st.sampled_from([b"[]", b"1", b'"x"', b"{", b"\xff\xfe", b""])), False
    return json.dumps(body).encode(), kind == "valid"


@dataclass
class Composed:
    path: str
    pieces: list[bytes]
    pause_s: float
    line_ok: bool
    """The request line is one a server answers (POST, a path, HTTP/1.x)."""
    valid: bool
    """The whole request is valid: it must be answered 2xx."""
    hostile_framing: bool
    """Chunk extensions or trailers over their limits: the server may close while it is still sent."""


def _extension(chars: int, chunk: int) -> bytes:
    """The extension written on chunk number ``chunk``: a short one on every chunk, a long one (over the servers'
    limit) on the first eight alone, which are refused (on each of a 1 MB body's 1-byte chunks, 70,000 characters
    made 70 GB in this test's own process)."""
    return b";e=" + b"x" * chars if chars and (chars <= 1000 or chunk < 8) else b""


@st.composite
def requests(draw: st.DrawFn, paths: tuple[str, ...]) -> Composed:
    """A request line × framing × body × timing (module docstring)."""
    path = draw(st.sampled_from(paths))
    body, body_ok = draw(bodies(path))
    method = draw(st.sampled_from(["POST"] * 6 + ["GET", "PUT"]))
    version = draw(st.sampled_from(["HTTP/1.1"] * 6 + ["HTTP/1.0", "HTTP/0.9", "HTTP/2.0", "HTTP/3"]))
    target = draw(st.sampled_from([path] * 6 + [path + "?a=1", "*", path.lstrip("/"), "http://x" + path]))
    line_ok = method == "POST" and version in ("HTTP/1.1", "HTTP/1.0") and target in (path, path + "?a=1",
                                                                                         "http://x" + path)
    fields = [("Content-Type", "application/json"), ("Connection", "close")]
    chunked = draw(st.booleans()) and version == "HTTP/1.1"
    extension = draw(st.sampled_from([0, 0, 8, 70_000])) if chunked else 0
    trailers = draw(st.sampled_from([0, 0, 3, 150])) if chunked else 0
    if chunked:
        size = draw(st.sampled_from([1, 7, 1024, 1 << 20]))
        data = b"".join(b"%x%s\r\n%s\r\n" % (len(body[i:i + size]), _extension(extension, i // size), body[i:i + size])
                        for i in range(0, len(body), size))
        data += b"0\r\n" + b"".join(b"X-T%d: v\r\n" % i for i in range(trailers)) + b"\r\n"
        fields.append(("Transfer-Encoding", "chunked"))
        hostile = extension > 1000 or trailers > 100 or (size == 1 and len(body) > 10_000)
    else:
        data = body
        fields.append(("Content-Length", str(len(body))))
        hostile = False
    whole = head(method, target, version, fields) + data
    cuts = sorted(draw(st.lists(st.integers(1, max(1, len(whole) - 1)), max_size=draw(st.sampled_from([0, 1, 4])))))
    pieces = [whole[a:b] for a, b in zip([0, *cuts], [*cuts, len(whole)], strict=True) if whole[a:b]]
    pause_s = draw(st.sampled_from([0.0, 0.01, 0.04])) if len(pieces) <= 5 else 0.0
    return Composed(path, pieces, pause_s, line_ok, line_ok and body_ok and not hostile, hostile)


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    started = start_servers(tmp_path_factory.mktemp("inbound"), "body_timeout_s = 3\nbody_idle_timeout_s = 2")
    yield started
    started.stop()
    log = started.log()
    assert "Traceback" not in log and "Exception in ASGI" not in log, log[-3000:]


def _normal(servers: Servers, of: str, answers: list[Answer]) -> threading.Thread:
    body = json.dumps(BASES["/v1/chat/completions"]).encode()
    request = head("POST", "/v1/chat/completions", fields=(("Content-Type", "application/json"),
                                                          ("Content-Length", str(len(body))), ("Connection", "close")))

    def send() -> None:
        answers.append(exchange(servers.address(of), [request + body], deadline_s=DEADLINE_S))

    thread = threading.Thread(target=send)
    thread.start()
    return thread


def _judge(servers: Servers, of: str, sent: Composed) -> None:
    beside: list[Answer] = []
    thread = _normal(servers, of, beside)
    answer = exchange(servers.address(of), sent.pieces, sent.pause_s, DEADLINE_S)
    thread.join(DEADLINE_S + 5)
    assert beside and beside[0].status == 200, ("a normal request beside it", beside)
    assert answer.seconds < DEADLINE_S, answer
    if answer.status is None:
        assert sent.hostile_framing, ("closed without an answer", answer.body[:300])
        return
    assert answer.status < 500 or answer.status == 505, (answer.status, answer.body[:300])  # 505: HTTP/2.0
    if sent.valid:
        assert answer.status == 200, (answer.status, answer.body[:300])
    elif answer.status < 300:
        assert sent.line_ok, ("answered a request line it must refuse", answer.body[:200])
    elif "json" in answer.content_type:
        assert shape_of_error(sent.path, answer.body), (answer.status, answer.body[:300])
    else:
        assert answer.status in CONNECTION_REFUSALS, (answer.status, answer.body[:300])


@given(sent=requests(GATEWAY_PATHS))
def test_generated_requests_to_the_gateway(servers: Servers, sent: Composed) -> None:
    _judge(servers, "gateway", sent)


@pytest.mark.slow  # about 50 s in the parallel lane
@given(sent=requests(SIM_PATHS))
def test_generated_requests_to_the_simulator(servers: Servers, sent: Composed) -> None:
    _judge(servers, "sim", sent)


def test_the_bases_are_valid(servers: Servers) -> None:
    """Every base body is answered 200 where it is sent (the mutations start from valid requests)."""
    for path in SIM_PATHS:
        for of in ("gateway", "sim") if path in GATEWAY_PATHS else ("sim",):
            body = json.dumps(BASES[path]).encode()
            answer = exchange(servers.address(of), [head("POST", path, fields=(
                ("Content-Length", str(len(body))), ("Connection", "close"))) + body])
            assert answer.status == 200, (of, path, answer)

