"""Hostile HTTP servers, written for the tests of bounded time and memory (issue 22).

`HostileServer` is a raw-socket server on loopback (a `tests.raw_sockets.Listener`: a thread per
connection) whose answer to each request is chosen by path (`answers`: the longest matching path
prefix wins; anything else gets an empty 404). The answers misbehave the way a broken or malicious
server does, each until the client hangs up or the server is stopped, and never faster than a
loopback socket allows:

- `undelimited_event`: a 200 SSE stream whose one event never ends (no blank line, ever);
- `ignores_max_tokens`: a 200 SSE stream of valid content events forever, never ``[DONE]``;
- `big_event`: one valid content event of ``size`` bytes, then a normal ending;
- `big_events_then_paced`: huge valid events on the first stream, paced small ones on the others;
- `trickle`: a 200 head promising a large body, then one byte every ``every_s`` seconds;
- `endless_body`: a 200 head without a length, then junk as fast as the socket takes it;
- `silent`: reads the request and never answers;
- `Attack`: an answer composed of a framing (Content-Length, chunked, close-delimited) x a stream format
  (SSE, NDJSON) x a content (comment floods, comment-prefixed events, one endless line, junk, endless
  events, endless header fields, endless 1xx heads, trailer floods, chunk-extension floods) x a piece size x a
  timing (as fast as the socket takes it, or a trickle): the generated hostile-server suite's one server
  (issue 31), every combination endless.
"""

from __future__ import annotations

import itertools
import json
import random
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from tests.raw_sockets import Listener, content_length, read_body, read_head

__all__ = ["CONTENTS", "Answer", "Attack", "HostileServer", "big_event", "big_events_then_paced", "endless_body",
           "gateway_beside_hostile", "hostile", "ignores_max_tokens", "json_answer", "silent", "trickle",
           "undelimited_event"]

Answer = Callable[[socket.socket, threading.Event], None]
"""Writes one answer on a connection until done, the peer hangs up or the event (server stopped) is set."""

_SSE_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"


def _content(text: str) -> bytes:
    return b"data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": text}}]}).encode() + b"\n\n"


def undelimited_event(conn: socket.socket, stop: threading.Event) -> None:
    conn.sendall(_SSE_HEAD + _content("hi") + b'data: {"choices":[{"index":0,"delta":{"content":"')
    piece = b"y" * 65536
    while not stop.is_set():
        conn.sendall(piece)


def ignores_max_tokens(conn: socket.socket, stop: threading.Event) -> None:
    conn.sendall(_SSE_HEAD)
    event = _content(" tok")
    while not stop.is_set():
        conn.sendall(event * 16)
        time.sleep(0.001)


def big_event(size: int) -> Answer:
    def answer(conn: socket.socket, stop: threading.Event) -> None:
        conn.sendall(_SSE_HEAD + _content("a") + _content("b" * size)
                     + b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n')
    return answer


def big_events_then_paced(size: int, n_big: int = 4, n_paced: int = 40, gap_s: float = 0.01) -> Answer:
    """The first request gets ``n_big`` valid content events of ``size`` bytes each, every later one a paced
    stream (``n_paced`` events ``gap_s`` apart): one heavy stream beside healthy ones."""
    served = itertools.count()
    ending = b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'

    def answer(conn: socket.socket, stop: threading.Event) -> None:
        if next(served) == 0:
            conn.sendall(_SSE_HEAD)
            for _ in range(n_big):
                conn.sendall(_content("b" * size))
            conn.sendall(ending)
            return
        conn.sendall(_SSE_HEAD)
        for i in range(n_paced):
            if stop.wait(gap_s):
                return
            conn.sendall(_content(f" t{i}"))
        conn.sendall(ending)
    return answer


def trickle(every_s: float = 2.0, content_type: bytes = b"text/plain") -> Answer:
    def answer(conn: socket.socket, stop: threading.Event) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: " + content_type + b"\r\nContent-Length: 1000000\r\n\r\n")
        while not stop.wait(every_s):
            conn.sendall(b"#")
    return answer


def endless_body(content_type: bytes = b"application/json") -> Answer:
    def answer(conn: socket.socket, stop: threading.Event) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: " + content_type + b"\r\nConnection: close\r\n\r\n[")
        piece = b'"model",' * 8192
        while not stop.is_set():
            conn.sendall(piece)
    return answer


def json_answer(value: object) -> Answer:
    """A well-behaved answer (for the paths a test does not make hostile)."""
    def answer(conn: socket.socket, stop: threading.Event) -> None:
        body = json.dumps(value).encode()
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                     % (len(body), body))
    return answer


def silent(conn: socket.socket, stop: threading.Event) -> None:
    stop.wait(120)


Framing = Literal["length", "chunked", "close"]
Content = Literal["comments", "comment_lines", "prefixed_events", "long_line", "junk", "events", "headers",
                  "interim", "trailers", "extensions"]
CONTENTS: tuple[Content, ...] = ("comments", "comment_lines", "prefixed_events", "long_line", "junk", "events",
                                 "headers", "interim", "trailers", "extensions")
_CHUNKED_ONLY = ("trailers", "extensions")


@dataclass(frozen=True)
class Attack:
    """One composed hostile answer, endless: ``framing`` delimits the body (``length``: a Content-Length of a
    terabyte), ``body`` is the stream format, ``content`` what floods, ``piece`` the size of each flooding
    piece (a comment's text, a header's value, an extension), ``trickle_s`` the pause between writes of at
    most 64 bytes (0: as fast as the socket takes it). Trailer and extension floods are chunked whatever
    ``framing`` says."""

    framing: Framing
    body: Literal["sse", "ndjson"]
    content: Content
    piece: int
    trickle_s: float = 0.0

    def __call__(self, conn: socket.socket, stop: threading.Event) -> None:
        if self.trickle_s:
            for data in self.stream():
                for at in range(0, len(data), 64):
                    if stop.wait(self.trickle_s):
                        return
                    conn.sendall(data[at:at + 64])
            return
        pending = bytearray()
        for data in self.stream():  # floods go out in writes of 64 KiB or more, as a fast server's do
            pending += data
            if len(pending) >= 65536:
                if stop.is_set():
                    return
                conn.sendall(pending)
                pending.clear()

    @property
    def chunked(self) -> bool:
        return self.framing == "chunked" or self.content in _CHUNKED_ONLY

    def stream(self) -> Iterator[bytes]:
        """The answer's bytes, endless."""
        kind = b"text/event-stream" if self.body == "sse" else b"application/x-ndjson"
        if self.content == "interim":
            hint = b"HTTP/1.1 103 Early Hints\r\nLink: </" + b"a" * self.piece + b">; rel=preload\r\n\r\n"
            yield from itertools.repeat(hint)
        yield b"HTTP/1.1 200 OK\r\nContent-Type: " + kind + b"\r\n"
        if self.content == "headers":
            yield from (b"X-Pad-%d: %s\r\n" % (n, b"h" * self.piece) for n in itertools.count())
        delimit = {"length": b"Content-Length: 1000000000000\r\n", "close": b"Connection: close\r\n"}
        yield b"Transfer-Encoding: chunked\r\n\r\n" if self.chunked else delimit[self.framing] + b"\r\n"
        if self.content == "trailers":
            yield b"%x\r\n%s\r\n0\r\n" % (len(self._event()), self._event())
            yield from (b"X-Trailer-%d: %s\r\n" % (n, b"t" * self.piece) for n in itertools.count())
        for data in self._body():
            if not self.chunked:
                yield data
            elif self.content == "extensions":
                yield b"%x;ext=%s\r\n%s\r\n" % (len(data), b"e" * self.piece, data)
            else:
                yield b"%x\r\n%s\r\n" % (len(data), data)

    def _event(self, text: str = " tok") -> bytes:
        if self.body == "sse":
            return _content(text)
        return json.dumps({"model": "m", "message": {"role": "assistant", "content": text}, "done": False}).encode() \
            + b"\n"

    def _body(self) -> Iterator[bytes]:
        """The body's pieces, endless (before any chunk framing)."""
        sse = self.body == "sse"
        if self.content in ("comments", "comment_lines"):
            end = b"\n\n" if self.content == "comments" else b"\n"
            line = (b": " + b"p" * self.piece + end) if sse else (b" " * self.piece + b"\n")
            yield from itertools.repeat(line * max(1, 4096 // len(line)))
        if self.content == "prefixed_events":
            prefix = (b": " + b"p" * self.piece + b"\n") if sse else b"\n" * self.piece
            yield from itertools.repeat(prefix * 4 + self._event())
        if self.content == "long_line":
            yield b'data: {"choices":[{"index":0,"delta":{"content":"' if sse else b'{"message":{"content":"'
            yield from itertools.repeat(b"y" * self.piece)
        if self.content == "junk":
            noise = random.Random(self.piece)
            yield from (noise.randbytes(self.piece) for _ in itertools.count())
        yield from itertools.repeat(self._event())  # "events", and the body after the other contents' floods

    def describe(self) -> str:
        pace = f"trickled every {self.trickle_s:g} s" if self.trickle_s else "flooded"
        framing = "chunked" if self.chunked else self.framing
        return f"{self.content} in {self.body} over {framing}, {self.piece}-byte pieces, {pace}"


class HostileServer(Listener):
    """Answers each request by the longest matching path prefix in ``answers`` (404 for the rest)."""

    def __init__(self, answers: dict[str, Answer]) -> None:
        super().__init__()
        self.answers = answers
        self.root = f"http://{self.netloc}"
        self.url = self.root + "/v1"
        self.requests: list[str] = []

    def serve(self, conn: socket.socket) -> None:
        try:
            request = read_head(conn)
            if request is None:
                return
            head, rest = request
            if read_body(conn, rest, content_length(head)) is None:
                return
            method, path = head.split(b" ", 2)[:2]
            self.requests.append(f"{method.decode()} {path.decode()}")
            matches = [prefix for prefix in self.answers if path.decode().startswith(prefix)]
            if not matches:
                conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                return
            self.answers[max(matches, key=len)](conn, self.stopped)
        except OSError:  # the client hung up on us: what these tests want
            return
        finally:
            conn.close()


@contextmanager
def hostile(answers: dict[str, Answer]) -> Iterator[HostileServer]:
    server = HostileServer(answers)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@contextmanager
def gateway_beside_hostile(sim_url: str, bad_url: str, tmp_path: Path) -> Iterator[Any]:
    """A real gateway process with two upstreams: model ``m`` routed to the simulator at ``sim_url``, model
    ``bad`` to the hostile server at ``bad_url``, neither retried, no cache; stopped whole on leaving."""
    from tests.integration.test_gateway_limits import _start

    config = tmp_path / "gw.toml"
    config.write_text(f"[cache]\nenabled = false\n[[upstreams]]\nname = \"sim\"\nurl = \"{sim_url}\"\n"
                      f"retries = 0\n[[upstreams]]\nname = \"bad\"\nurl = \"{bad_url}\"\nretries = 0\n"
                      "[[routes]]\nmodel = \"m\"\nupstreams = [\"sim\"]\n"
                      "[[routes]]\nmodel = \"bad\"\nupstreams = [\"bad\"]\n")
    gw = _start(config, tmp_path / "gw.log")
    try:
        yield gw
    finally:
        gw.process.terminate()
        gw.process.wait(10)
        if gw.process.stdout:
            gw.process.stdout.close()
