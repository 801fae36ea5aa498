"""What the tests' hand-written raw-socket servers share: a loopback listener and the reading of an HTTP head.

`Listener` listens on a free loopback port and serves each connection on a thread of its own (a subclass
writes `Listener.serve`); `stop` shuts the socket down and closes it, which ends the accept loop (on Linux a
close alone leaves the thread blocked in ``accept``: a long fuzz run gathered a thousand of them), and shuts
down the connections still open, which ends their threads (one blocked in ``recv`` or ``sendall`` on a client
that went quiet would otherwise live on). `read_head` and `read_body` read one HTTP message from a socket as
it comes, `content_length` finds its length. Used by `tests.http_servers.RawServer`,
`tests.hostile_servers.HostileServer`, `tests.block_proxy.BlockProxy` and the servers that single tests write
for themselves.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time

__all__ = ["Listener", "content_length", "read_body", "read_head"]


class Listener:
    """A TCP listener on a free port of ``host``, a thread per accepted connection; ``accept_every_s`` paces
    the accepts (a server slow to take connections)."""

    def __init__(self, host: str = "127.0.0.1", backlog: int = 64, accept_every_s: float = 0.0) -> None:
        self.sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, 0))
        self.sock.listen(backlog)
        self.host = host
        self.port: int = self.sock.getsockname()[1]
        self.accept_every_s = accept_every_s
        self.stopped = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()

    @property
    def netloc(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.stopped.set()
        with contextlib.suppress(OSError):  # wakes the accept (closing alone leaves it blocked on Linux)
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        with self._lock:
            still_open = list(self._open)
        for conn in still_open:
            with contextlib.suppress(OSError):  # closed meanwhile, or taken over by a TLS wrapper
                conn.shutdown(socket.SHUT_RDWR)

    def _accept(self) -> None:
        while not self.stopped.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:  # stopped: the socket is closed
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()
            if self.accept_every_s:
                time.sleep(self.accept_every_s)

    def _serve(self, conn: socket.socket) -> None:
        """`serve` ``conn``, kept among the open connections that `stop` shuts down while it runs."""
        with self._lock:
            self._open.add(conn)
        try:
            self.serve(conn)
        except OSError:
            if not self.stopped.is_set():
                raise
        finally:
            with self._lock:
                self._open.discard(conn)

    def serve(self, conn: socket.socket) -> None:
        """Answer one connection (on its own thread)."""
        raise NotImplementedError


def read_head(conn: socket.socket, buffer: bytes = b"") -> tuple[bytes, bytes] | None:
    """Read from ``conn`` (after ``buffer``, already read) to the end of an HTTP head: (the head without its
    blank line, what came after it); None when the peer closes first."""
    while b"\r\n\r\n" not in buffer:
        data = conn.recv(65536)
        if not data:
            return None
        buffer += data
    head, _, rest = buffer.partition(b"\r\n\r\n")
    return head, rest


def content_length(head: bytes) -> int:
    """The head's ``Content-Length`` (0 without one)."""
    return next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                 if line.lower().startswith(b"content-length:")), 0)


def read_body(conn: socket.socket, rest: bytes, length: int) -> tuple[bytes, bytes] | None:
    """Read a body of ``length`` bytes (``rest``: what came after the head): (the body, what follows it);
    None when the peer closes first."""
    while len(rest) < length:
        data = conn.recv(65536)
        if not data:
            return None
        rest += data
    return rest[:length], rest[length:]
