"""HTTP servers other than our simulator, for the client-conformance tests.

- `StdlibStreamServer`: Python's own ``http.server`` streaming an OpenAI answer the way it and
  many small servers do: no Content-Length, no Transfer-Encoding, the body ends when the connection
  closes (RFC 9112 section 6.3, rule 8), as HTTP/1.0 or as HTTP/1.1 with ``Connection: close``.
- `RawServer`: a raw-socket server that answers every POST with bytes a test scripts exactly. It
  exists for protocol edge cases that no real engine can be made to produce on demand (interim 1xx
  heads, chunk extensions and trailers, oversized heads, a connection dropped at a chosen byte);
  the tests that use it say so.

Both serve real TCP sockets on loopback in threads of the test process and record the request
heads they received (`RawServer` is a `tests.raw_sockets.Listener`).
"""

from __future__ import annotations

import json
import socket
import ssl
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.raw_sockets import Listener, content_length, read_body, read_head

__all__ = ["RawServer", "Script", "StdlibStreamServer", "openai_sse", "post_stream", "running"]

TOKENS = ("alpha", " beta", " gamma", " delta")
"""The answer every server here streams: four content events, then usage (4 tokens), then [DONE]."""


def openai_sse(tokens: tuple[str, ...] = TOKENS) -> list[bytes]:
    """An OpenAI chat stream, one SSE event per element."""
    events = [b'data: {"choices":[{"index":0,"delta":{"role":"assistant"}}]}\n\n']
    for text in tokens:
        events.append(b"data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": text}}]}).encode()
                      + b"\n\n")
    events.append(b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}\n\n')
    events.append(b"data: " + json.dumps({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens":
                                                                   len(tokens), "total_tokens": 3 + len(tokens)}}
                                        ).encode() + b"\n\n")
    events.append(b"data: [DONE]\n\n")
    return events


class _StdlibHandler(BaseHTTPRequestHandler):
    server: _StdlibHTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def do_GET(self) -> None:  # the bench's reachability probe
        self.send_error(404)

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.server.heads.append(self.requestline)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        if self.protocol_version == "HTTP/1.1":
            self.send_header("Connection", "close")
        self.end_headers()
        for event in openai_sse():
            self.wfile.write(event)
            self.wfile.flush()
            time.sleep(0.002)
        self.close_connection = True


class _StdlibHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    heads: list[str]


class StdlibStreamServer:
    """``http.server`` answering with a close-delimited SSE body (``http_version`` 1.0 or 1.1)."""

    def __init__(self, http_version: str = "HTTP/1.0") -> None:
        handler = type("Handler", (_StdlibHandler,), {"protocol_version": http_version})
        self.httpd = _StdlibHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.heads = []
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


Script = Callable[[socket.socket], None]
"""Writes one scripted answer on a connection (it may close it, or leave it to the server)."""


class RawServer(Listener):
    """Answers every POST with ``script``; GETs get an empty 404. Records the request heads."""

    def __init__(self, script: Script, host: str = "127.0.0.1", close_after: bool = True,
                 tls: ssl.SSLContext | None = None) -> None:
        super().__init__(host)
        self.url = f"{'https' if tls else 'http'}://{self.netloc}/v1"
        self.tls = tls
        self.script = script
        self.close_after = close_after
        self.heads: list[bytes] = []

    def serve(self, conn: socket.socket) -> None:
        buffer = b""
        try:
            if self.tls is not None:
                conn = self.tls.wrap_socket(conn, server_side=True)
            while True:
                request = read_head(conn, buffer)
                if request is None:
                    return
                head, rest = request
                body = read_body(conn, rest, content_length(head))
                if body is None:
                    return
                buffer = body[1]
                if head.startswith(b"GET"):
                    conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
                    continue
                self.heads.append(head)
                self.script(conn)
                if self.close_after:
                    return
        except OSError:  # ssl.SSLError too: a client that refused our certificate
            return
        finally:
            conn.close()


@contextmanager
def running(server: RawServer | StdlibStreamServer) -> Iterator[str]:
    """Start ``server``, yield its base URL, stop it."""
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


def post_stream(base_url: str, model: str, timeout: float = 30) -> tuple[int, bytes]:
    """POST a streaming chat request to ``base_url`` (``.../v1``); (status, the whole body), errors included."""
    body = {"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, "stream": True}
    request = urllib.request.Request(base_url + "/chat/completions", json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        with error:
            return error.code, error.read()
