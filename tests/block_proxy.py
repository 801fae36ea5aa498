"""A buffering reverse proxy, written for the tests of what ``doctor`` says behind one (issue 26).

`BlockProxy` listens on loopback (a `tests.raw_sockets.Listener`: a thread per connection) and relays
each connection to an upstream server byte for byte, except the body of an event stream
(``text/event-stream``, chunked): that it holds and passes on in blocks of ``block`` bytes, as nginx's
``proxy_buffering`` does with its buffers, the rest when the stream ends. ``block=None`` holds the whole
stream until its end (a proxy that buffers whole answers). Other bodies (``Content-Length``) pass through
as they come; keep-alive connections work, each response found by its head and its length or its
chunked end.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from tests.raw_sockets import Listener, content_length, read_head

__all__ = ["BlockProxy", "block_proxy"]

class BlockProxy(Listener):
    """A proxy to ``upstream`` (``host:port``) on a free loopback port; ``url`` is its root."""

    def __init__(self, upstream: tuple[str, int], block: int | None) -> None:
        super().__init__()
        self.upstream, self.block = upstream, block
        self.url = f"http://{self.netloc}"

    def serve(self, client: socket.socket) -> None:
        upstream = socket.create_connection(self.upstream, timeout=60)
        client.settimeout(60)

        def forward() -> None:  # client -> upstream, as it comes
            try:
                while data := client.recv(65536):
                    upstream.sendall(data)
            except OSError:
                pass
            finally:
                upstream.close()

        threading.Thread(target=forward, daemon=True).start()
        try:
            self._responses(upstream, client)
        except OSError:
            pass
        finally:
            client.close()
            upstream.close()

    def _responses(self, upstream: socket.socket, client: socket.socket) -> None:
        pending = b""
        while True:
            response = read_head(upstream, pending)
            if response is None:
                return
            head, pending = response
            lower = head.lower()
            client.sendall(head + b"\r\n\r\n")
            if b"transfer-encoding: chunked" in lower:
                pending = self._chunked(upstream, client, pending, b"text/event-stream" in lower)
            else:
                length = content_length(head)
                while len(pending) < length:
                    data = upstream.recv(65536)
                    if not data:
                        client.sendall(pending)
                        return
                    client.sendall(data if not pending else pending + data)
                    length -= len(pending) + len(data)
                    pending = b""
                client.sendall(pending[:length])
                pending = pending[length:]

    def _chunked(self, upstream: socket.socket, client: socket.socket, pending: bytes, hold: bool) -> bytes:
        """Relay a chunked body, chunk by chunk (held, and passed on in blocks, when ``hold``); returns what
        follows its end (the next response's start)."""
        held, buf = b"", pending

        def fill(n: int) -> bool:
            nonlocal buf
            while len(buf) < n:
                data = upstream.recv(65536)
                if not data:
                    return False
                buf += data
            return True

        while True:
            while b"\r\n" not in buf:
                if not fill(len(buf) + 1):
                    client.sendall(held + buf)
                    return b""
            line_end = buf.index(b"\r\n")
            size = int(buf[:line_end].split(b";")[0], 16)
            total = line_end + 2 + size + 2
            if not fill(total):
                client.sendall(held + buf)
                return b""
            held, buf = held + buf[:total], buf[total:]
            if size == 0:
                client.sendall(held)
                return buf
            if not hold:
                client.sendall(held)
                held = b""
            elif self.block is not None:
                while len(held) >= self.block:
                    client.sendall(held[:self.block])
                    held = held[self.block:]


@contextmanager
def block_proxy(upstream_url: str, block: int | None) -> Iterator[BlockProxy]:
    """A started `BlockProxy` to ``upstream_url`` (``http://host:port``), stopped afterwards."""
    host, port = upstream_url.removeprefix("http://").split("/")[0].rsplit(":", 1)
    proxy = BlockProxy((host, int(port)), block)
    proxy.start()
    try:
        yield proxy
    finally:
        proxy.stop()
