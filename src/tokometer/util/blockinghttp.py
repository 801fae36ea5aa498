"""Blocking HTTP requests that a server cannot hold or flood: a deadline for the whole answer, a size limit.

For the code that blocks rather than awaits: the server's ``/tokenize`` (`tokens.remote`), and the
``/metrics`` scrapes of `observe.sampler` (from its thread, `top`, `doctor`, a DCGM exporter). urllib
underneath, so proxies (``HTTP(S)_PROXY``/``NO_PROXY``), TLS contexts and ``HTTPError`` for a status
of 400 or more are urllib's; what urllib lacks is added here:

- ``timeout_s`` is a deadline for the whole answer, head and body, however the server trickles it
  (urllib's timeout restarts with every byte): a timer shuts the socket down when it passes, and the
  request raises `AnswerTimeout` (a ``TimeoutError``);
- the body is read up to ``max_bytes`` (16 MiB by default); past it `AnswerTooLarge` (an ``OSError``);
- everything read from the socket counts against the answer's read budget (`util.readbudget`: the body
  limit plus what a head, chunk framing and trailers may cost): a flood of trailer fields, chunk
  extensions or header lines ends there with `AnswerTooLarge`, never grows;
- an answer that breaks HTTP (a line past http.client's 64 KiB, too many header fields, a bad chunk size)
  raises `BadAnswer`, an ``OSError`` like every other failure here: never ``http.client``'s own exceptions
  (``LineTooLong``), which no caller expects.

`open_answer` gives the answer itself, for a reader that takes it line by line (Ollama's NDJSON pull).

A leaf: it imports only the budget's leaf module (`util.readbudget`), so every layer may use it.
"""

from __future__ import annotations

import contextlib
import http.client
import io
import socket
import ssl
import threading
import urllib.request
from collections.abc import Iterator, Mapping
from typing import Any

from tokometer.util.readbudget import BudgetExceeded, answer_budget, mib, over_budget
from tokometer.util.shown import clipped

__all__ = ["MAX_ANSWER_BYTES", "AnswerTimeout", "AnswerTooLarge", "BadAnswer", "open_answer", "read_whole",
           "request_bytes"]

MAX_ANSWER_BYTES = 16 * 1024 * 1024
"""The largest answer read (a model list, ``/props``, ``/metrics``, a token list)."""


class AnswerTimeout(TimeoutError):
    """The whole answer did not come within the deadline."""


class AnswerTooLarge(BudgetExceeded):
    """The answer passed its size limit or its read budget."""


class BadAnswer(OSError):
    """The answer broke HTTP/1.1 (http.client's own exception, mapped onto the ``OSError`` callers expect)."""


class _Metered(io.RawIOBase):
    """A socket's reading side that counts every byte and refuses to read past the budget."""

    def __init__(self, raw: io.RawIOBase, budget: int, setting: str) -> None:
        super().__init__()
        self._raw = raw
        self._budget = budget
        self._setting = setting
        self.count = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        room = self._budget - self.count
        if room <= 0:
            raise AnswerTooLarge(over_budget(self._budget, self._setting))
        with memoryview(buffer) as view:
            n = self._raw.readinto(view[:room]) or 0
        self.count += n
        return n

    def close(self) -> None:
        self._raw.close()
        super().close()


class _MeteredSocket:
    """A connected socket whose ``makefile("rb")`` (http.client's one reader) is `_Metered`."""

    def __init__(self, sock: socket.socket, budget: int, setting: str, files: list[io.RawIOBase]) -> None:
        self._sock = sock
        self._budget = budget
        self._setting = setting
        self._files = files

    def makefile(self, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if mode != "rb":
            return self._sock.makefile(mode, *args, **kwargs)  # type: ignore[call-overload]
        raw = self._sock.makefile("rb", buffering=0)
        self._files.append(raw)
        return io.BufferedReader(_Metered(raw, self._budget, self._setting))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


class _Deadline:
    """Shuts down every socket of one request when its time is up."""

    def __init__(self, seconds: float) -> None:
        self.expired = False
        self._sockets: list[socket.socket] = []
        self.files: list[io.RawIOBase] = []
        """The socket readers made for http.client (a socket's file descriptor stays open while one does)."""
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
        """Stop the timer and close what the request opened (urllib leaves a socket open when http.client
        raises one of its own exceptions)."""
        self._timer.cancel()
        with self._lock:
            for file in self.files:
                file.close()
            for sock in self._sockets:
                sock.close()


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):  # already closed
        sock.shutdown(socket.SHUT_RDWR)


class _EveryStatus(urllib.request.HTTPErrorProcessor):
    """Every status is an answer (no ``HTTPError``, no redirect followed): for `open_answer`'s ``any_status``."""

    def http_response(self, request: urllib.request.Request, response: Any) -> Any:
        return response

    https_response = http_response


def _opener(deadline: _Deadline, context: ssl.SSLContext | None, budget: int,
            setting: str, any_status: bool) -> urllib.request.OpenerDirector:
    class Http(http.client.HTTPConnection):
        def connect(self) -> None:
            super().connect()
            deadline.watch(self.sock)
            self.sock = _MeteredSocket(self.sock, budget, setting, deadline.files)

    class Https(http.client.HTTPSConnection):
        def connect(self) -> None:
            super().connect()
            deadline.watch(self.sock)
            self.sock = _MeteredSocket(self.sock, budget, setting, deadline.files)

    class HttpHandler(urllib.request.HTTPHandler):
        def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
            return self.do_open(Http, req)

    class HttpsHandler(urllib.request.HTTPSHandler):
        def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
            return self.do_open(Https, req, context=context)

    extra = (_EveryStatus,) if any_status else ()
    return urllib.request.build_opener(HttpHandler, HttpsHandler(context=context), *extra)


@contextlib.contextmanager
def open_answer(url: str, data: bytes | None = None, headers: Mapping[str, str] | None = None, *,
                timeout_s: float, method: str | None = None, budget: int = answer_budget(MAX_ANSWER_BYTES),
                setting: str = "", context: ssl.SSLContext | None = None,
                any_status: bool = False) -> Iterator[http.client.HTTPResponse]:
    """The answer to one request, to read within the block: every byte counts against ``budget`` (past it
    `AnswerTooLarge`), the whole answer must be in within ``timeout_s`` (else `AnswerTimeout`), an answer that
    breaks HTTP raises `BadAnswer`, a status of 400 or more ``urllib.error.HTTPError`` (with ``any_status``:
    every status is an answer, its ``status`` to read, and no redirect is followed). ``setting``: the option
    that raises the budget, for its error."""
    request = urllib.request.Request(url, data, dict(headers or {}), method=method)
    with _Deadline(timeout_s) as deadline:
        try:
            with _opener(deadline, context, budget, setting, any_status).open(request, timeout=timeout_s) as response:
                yield response
        except (OSError, http.client.HTTPException) as exc:
            if deadline.expired:
                raise AnswerTimeout(f"the whole answer did not come within its total timeout of {timeout_s:g} s "
                                    "(the server sends nothing, or trickles)") from None
            if isinstance(exc, http.client.HTTPException):
                raise BadAnswer(f"the answer broke HTTP/1.1 ({type(exc).__name__}: {clipped(str(exc))})") from None
            raise exc from None
    if deadline.expired:
        raise AnswerTimeout(f"the whole answer did not come within its total timeout of {timeout_s:g} s")


def request_bytes(url: str, data: bytes | None = None, headers: Mapping[str, str] | None = None, *,
                  timeout_s: float, method: str | None = None, max_bytes: int = MAX_ANSWER_BYTES,
                  context: ssl.SSLContext | None = None) -> bytes:
    """The body of the answer to one request (a status of 400 or more raises ``urllib.error.HTTPError``);
    raises `AnswerTimeout` past ``timeout_s`` for the whole answer, `AnswerTooLarge` past ``max_bytes`` (or
    the read budget, everything counted), `BadAnswer` for an answer that breaks HTTP, and urllib's OSErrors
    for the rest."""
    with open_answer(url, data, headers, timeout_s=timeout_s, method=method, budget=answer_budget(max_bytes),
                     context=context) as response:
        return _read(response, max_bytes)


_READ_PIECE = 65536


def read_whole(response: Any, max_bytes: int) -> bytes:
    """An open answer's body, read into one buffer a piece at a time (``readinto``: a chunked body of one-byte
    chunks costs its bytes, not a Python object a chunk as ``read(n)``'s list of chunks does); raises
    `AnswerTooLarge` past ``max_bytes``."""
    body = bytearray()
    piece = memoryview(bytearray(_READ_PIECE))
    while len(body) <= max_bytes:
        got = response.readinto(piece[:min(_READ_PIECE, max_bytes + 1 - len(body))])
        if not got:
            return bytes(body)
        body += piece[:got]
    raise AnswerTooLarge(f"the answer passed {mib(max_bytes)} without ending: is this the server meant?")


def _read(response: Any, max_bytes: int) -> bytes:
    return read_whole(response, max_bytes)
