"""Blocking HTTP requests that a server cannot hold or flood: a deadline for the whole answer, a size limit.

For the code that blocks rather than awaits: the server's ``/tokenize`` (`tokens.remote`), and the
``/metrics`` scrapes of `observe.sampler` (from its thread, `top`, `doctor`, a DCGM exporter). urllib
underneath, so proxies (``HTTP(S)_PROXY``/``NO_PROXY``), TLS contexts and ``HTTPError`` for a status
of 400 or more are urllib's; what urllib lacks is added here:

- ``timeout_s`` is a deadline for the whole answer, head and body, however the server trickles it
  (urllib's timeout restarts with every byte): a timer shuts the socket down when it passes, and the
  request raises `AnswerTimeout` (a ``TimeoutError``);
- the body is read up to ``max_bytes`` (16 MiB by default); past it `AnswerTooLarge` (an ``OSError``).

A leaf: it imports nothing of tokometer, so every layer may use it.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import ssl
import threading
import urllib.request
from collections.abc import Mapping
from typing import Any

__all__ = ["MAX_ANSWER_BYTES", "AnswerTimeout", "AnswerTooLarge", "request_bytes"]

MAX_ANSWER_BYTES = 16 * 1024 * 1024
"""The largest answer read (a model list, ``/props``, ``/metrics``, a token list)."""


class AnswerTimeout(TimeoutError):
    """The whole answer did not come within the deadline."""


class AnswerTooLarge(OSError):
    """The answer passed its size limit."""


class _Deadline:
    """Shuts down every socket of one request when its time is up."""

    def __init__(self, seconds: float) -> None:
        self.expired = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def watch(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)
            if self.expired:
                _shut(sock)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self._sockets:
                _shut(sock)

    def __enter__(self) -> _Deadline:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):  # already closed
        sock.shutdown(socket.SHUT_RDWR)


def _opener(deadline: _Deadline, context: ssl.SSLContext | None) -> urllib.request.OpenerDirector:
    class Http(http.client.HTTPConnection):
        def connect(self) -> None:
            super().connect()
            deadline.watch(self.sock)

    class Https(http.client.HTTPSConnection):
        def connect(self) -> None:
            super().connect()
            deadline.watch(self.sock)

    class HttpHandler(urllib.request.HTTPHandler):
        def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
            return self.do_open(Http, req)

    class HttpsHandler(urllib.request.HTTPSHandler):
        def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
            return self.do_open(Https, req, context=context)

    return urllib.request.build_opener(HttpHandler, HttpsHandler(context=context))


def request_bytes(url: str, data: bytes | None = None, headers: Mapping[str, str] | None = None, *,
                  timeout_s: float, method: str | None = None, max_bytes: int = MAX_ANSWER_BYTES,
                  context: ssl.SSLContext | None = None) -> bytes:
    """The body of the answer to one request (a status of 400 or more raises ``urllib.error.HTTPError``);
    raises `AnswerTimeout` past ``timeout_s`` for the whole answer, `AnswerTooLarge` past ``max_bytes``,
    and urllib's OSErrors for the rest."""
    request = urllib.request.Request(url, data, dict(headers or {}), method=method)
    with _Deadline(timeout_s) as deadline:
        try:
            with _opener(deadline, context).open(request, timeout=timeout_s) as response:
                body = _read(response, max_bytes)
        except OSError as exc:
            if deadline.expired:
                raise AnswerTimeout(f"the whole answer did not come within its total timeout of {timeout_s:g} s "
                                    "(the server sends nothing, or trickles)") from None
            raise exc from None
    if deadline.expired:
        raise AnswerTimeout(f"the whole answer did not come within its total timeout of {timeout_s:g} s")
    return body


def _read(response: Any, max_bytes: int) -> bytes:
    body = response.read(max_bytes + 1)
    if len(body) > max_bytes:
        raise AnswerTooLarge(f"the answer passed {max_bytes / 1048576:g} MiB without ending: is this the server "
                             "meant?")
    return bytes(body)
