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
- `silent`: reads the request and never answers.
"""

from __future__ import annotations

import itertools
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from tests.raw_sockets import Listener, content_length, read_body, read_head

__all__ = ["Answer", "HostileServer", "big_event", "big_events_then_paced", "endless_body", "hostile",
           "ignores_max_tokens", "json_answer", "silent", "trickle", "undelimited_event"]

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
