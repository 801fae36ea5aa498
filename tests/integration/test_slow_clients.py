"""Clients that never progress, against a real `tokometer gateway` in front of a real `tokometer sim` on loopback.

The hostile clients are raw sockets written for the purpose: one that asks for ``100 Continue`` and
then sends nothing, one that trickles its body a byte at a time, one that takes nothing of a long
answer (a small receive buffer it never reads). What is asserted is what must happen: a 408 within
the body deadlines, the connection cap given to progressing clients first (a 503 only when every slot
streams a real answer), a stalled reader closed and its upstream request cancelled, each counted in
``/metrics`` under its reason. Deadlines are set small so each test takes seconds.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import select
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import SimServer


@dataclass
class Gateway:
    process: subprocess.Popen[str]
    root: str
    log: Path

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.root.removeprefix("http://").rsplit(":", 1)
        return host, int(port)

    def stderr(self) -> str:
        return self.log.read_text()

    def rejected(self) -> dict[str, float]:
        """tokometer_gateway_rejected_total by reason (this /metrics request takes a connection too)."""
        with urllib.request.urlopen(self.root + "/metrics", timeout=10) as response:
            text = response.read().decode()
        counts = {}
        for line in text.splitlines():
            if line.startswith("tokometer_gateway_rejected_total{"):
                reason = line.split('reason="', 1)[1].split('"', 1)[0]
                counts[reason] = float(line.split()[-1])
        return counts


Start = Callable[..., tuple[Gateway, SimServer]]


@pytest.fixture
def gateway(sim_factory: Callable[..., SimServer], tmp_path: Path) -> Iterator[Start]:
    """A gateway with these ``[server]`` settings before a simulator started with these arguments."""
    started: list[Gateway] = []

    def make(server: str, *sim_args: str) -> tuple[Gateway, SimServer]:
        sim = sim_factory("--ttft-ms", "5", "--itl-ms", "2", *sim_args)
        config = tmp_path / f"gw{len(started)}.toml"
        config.write_text(f"[server]\n{server}\n[cache]\nenabled = false\n[[upstreams]]\nname = \"sim\"\n"
                          f"url = \"{sim.openai_url}\"\nretries = 0\n[[routes]]\nmodel = \"m\"\n"
                          "upstreams = [\"sim\"]\n")
        log = tmp_path / f"gw{len(started)}.log"
        with log.open("w") as err:
            process = subprocess.Popen([sys.executable, "-m", "tokometer", "gateway", "--config", str(config),
                                        "--port", "0", "--log-level", "info"], stdout=subprocess.PIPE, stderr=err,
                                       text=True)
        assert process.stdout is not None
        line = process.stdout.readline()
        if "listening on" not in line:
            process.kill()
            raise RuntimeError(f"the gateway did not start: {line}{log.read_text()}")
        gw = Gateway(process, line.split()[-1], log)
        started.append(gw)
        return gw, sim

    yield make
    for gw in started:
        gw.process.terminate()
        gw.process.wait(10)
        if gw.process.stdout:
            gw.process.stdout.close()


def _body(max_tokens: int = 4, stream: bool = False) -> bytes:
    return json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": max_tokens,
                       "stream": stream}).encode()


def _head(length: int, expect: bool = False, close: bool = False) -> bytes:
    return (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n%s%s\r\n" % (length, b"Expect: 100-continue\r\n" if expect else b"",
                                                 b"Connection: close\r\n" if close else b""))


def _read_all(sock: socket.socket) -> bytes:
    """What comes until the server closes (or resets, or 10 s pass)."""
    chunks = []
    with contextlib.suppress(ConnectionResetError, TimeoutError):
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def _trickle(sock: socket.socket, data: bytes, every_s: float) -> bytes:
    """Send ``data`` a byte every ``every_s`` until the server answers; return its answer."""
    for byte in data:
        try:
            sock.sendall(bytes([byte]))
        except OSError:
            break
        if select.select([sock], [], [], every_s)[0]:
            break
    return _read_all(sock)


def _connect(gw: Gateway) -> socket.socket:
    return socket.create_connection(gw.address, timeout=10)


def test_expect_100_continue_honest_client_is_answered(gateway: Start) -> None:
    gw, _ = gateway("body_idle_timeout_s = 1\nbody_timeout_s = 5")
    body = _body()
    with _connect(gw) as sock:
        sock.sendall(_head(len(body), expect=True, close=True))
        assert sock.recv(4096) == b"HTTP/1.1 100 Continue\r\n\r\n"  # asked for, before any of the body
        time.sleep(0.3)  # a client may take a moment before it sends (curl waits for the 100)
        sock.sendall(body)
        answer = _read_all(sock)
    assert answer.startswith(b"HTTP/1.1 200"), answer[:300]
    assert b'"choices"' in answer


def test_expect_100_continue_then_nothing_gets_408(gateway: Start) -> None:
    gw, _ = gateway("body_idle_timeout_s = 1\nbody_timeout_s = 30")
    with _connect(gw) as sock:
        sock.sendall(_head(len(_body()), expect=True))
        assert sock.recv(4096) == b"HTTP/1.1 100 Continue\r\n\r\n"
        sent = time.monotonic()
        answer = _read_all(sock)
        waited = time.monotonic() - sent
    assert answer.startswith(b"HTTP/1.1 408"), answer[:300]
    assert b"nothing came for 1 s" in answer
    assert 0.9 <= waited < 3, waited  # body_idle_timeout_s, not body_timeout_s
    assert gw.rejected().get("body_idle_timeout") == 1


def test_trickled_body_gets_408_by_the_idle_or_the_total_deadline(
        gateway: Start) -> None:
    gw, _ = gateway("body_idle_timeout_s = 0.5\nbody_timeout_s = 2")
    body = _body()
    with _connect(gw) as sock:  # a byte a second: each pause is over the idle deadline
        sock.sendall(_head(len(body)))
        started = time.monotonic()
        answer = _trickle(sock, body, 1.0)
        idle_waited = time.monotonic() - started
    assert answer.startswith(b"HTTP/1.1 408") and b"stopped arriving" in answer, answer[:300]
    assert idle_waited < 2.5, idle_waited
    with _connect(gw) as sock:  # a byte every 0.2 s: never idle for long, but not all there within 2 s
        sock.sendall(_head(len(body)))
        started = time.monotonic()
        answer = _trickle(sock, body, 0.2)
        total_waited = time.monotonic() - started
    assert answer.startswith(b"HTTP/1.1 408") and b"did not arrive within 2 s" in answer, answer[:300]
    assert 1.9 <= total_waited < 4, total_waited
    counts = gw.rejected()
    assert counts.get("body_idle_timeout") == 1 and counts.get("body_timeout") == 1, counts


def test_stuck_requests_make_room_at_the_connection_cap(gateway: Start) -> None:
    """Four connections, the cap, hold requests that do not progress (two waiting after their 100
    Continue, two that stopped mid-body); deadlines are far off. A new client is served, because the
    connection whose last byte came longest ago is answered 408 to make room."""
    gw, _ = gateway("max_connections = 4\nbody_idle_timeout_s = 60\nbody_timeout_s = 60\nheader_timeout_s = 60")
    body = _body()
    stuck = []
    try:
        for i in range(4):
            sock = _connect(gw)
            stuck.append(sock)
            if i < 2:
                sock.sendall(_head(len(body), expect=True))
                assert sock.recv(4096).startswith(b"HTTP/1.1 100")
            else:
                sock.sendall(_head(len(body)) + body[:10])
            time.sleep(0.05)
        time.sleep(0.7)  # none of them has sent a byte for longer than connections.PROGRESS_GRACE_S
        with _connect(gw) as new:
            new.sendall(_head(len(body), close=True) + body)
            answer = _read_all(new)
        assert answer.startswith(b"HTTP/1.1 200"), answer[:300]
        first = stuck[0]
        first.settimeout(5)
        refused = _read_all(first)  # the oldest, whose last byte came first
        assert refused.startswith(b"HTTP/1.1 408") and b"connection: close" in refused, refused[:300]
        counts = gw.rejected()  # the fourth slot is free again (the new client closed)
        assert counts.get("slow_request_evicted") == 1, counts
        assert "connections" not in counts, counts
    finally:
        for sock in stuck:
            sock.close()
    deadline = time.monotonic() + 5
    while gw.stderr().count("went away while sending its request body") < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)
    log = gw.stderr()
    assert log.count("to make room: its request has not progressed") == 1, log
    assert log.count("went away while sending its request body") == 3, log  # the other three, closed by the test
    assert "Traceback" not in log, log


def test_503_only_when_every_slot_streams_a_read_answer(gateway: Start) -> None:
    """Three clients, the cap, each stream an answer of ~2 s and read it as it comes: a fourth gets 503."""
    gw, _ = gateway("max_connections = 3", "--itl-ms", "10")
    body = _body(max_tokens=200, stream=True)
    answers: list[bytes] = [b""] * 3
    began = threading.Barrier(4)

    def stream(i: int) -> None:
        with _connect(gw) as sock:
            sock.sendall(_head(len(body), close=True) + body)
            answers[i] = sock.recv(65536)
            began.wait(10)
            answers[i] += _read_all(sock)

    threads = [threading.Thread(target=stream, args=(i,)) for i in range(3)]
    for thread in threads:
        thread.start()
    began.wait(10)
    with _connect(gw) as new:
        refused = _read_all(new)
    for thread in threads:
        thread.join(20)
    assert refused.startswith(b"HTTP/1.1 503"), refused[:300]
    for answer in answers:
        assert answer.startswith(b"HTTP/1.1 200") and b"data: [DONE]" in answer and answer.endswith(b"0\r\n\r\n"), \
            answer[-300:]
    counts = gw.rejected()
    assert counts.get("connections") == 1, counts
    assert not {"idle_evicted", "slow_request_evicted", "stalled_evicted"} & counts.keys(), counts


def test_client_reading_nothing_is_closed_and_its_upstream_cancelled(
        gateway: Start) -> None:
    """A client with a 4 KiB receive buffer that never reads asks for a long fast stream: once the
    gateway's write buffer is full and nothing leaves it for client_stall_s, the gateway aborts the
    connection and cancels the request upstream (the simulator's trace shows it disconnected)."""
    gw, sim = gateway("client_stall_s = 1", "--itl-ms", "0.001", "--tokens-per-event", "256", "--max-context",
                      "16777216")  # ~1M tokens/s: the kernel's buffers (MBs on loopback) fill in about a second
    body = _body(max_tokens=16_000_000, stream=True)  # far more than it can send before it is cancelled
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    try:
        sock.connect(gw.address)
        sock.sendall(_head(len(body)) + body)
        started = time.monotonic()
        deadline = started + 20
        while "took nothing of its answer" not in gw.stderr() and time.monotonic() < deadline:
            time.sleep(0.1)
        closed_after = time.monotonic() - started
        assert "took nothing of its answer for 1 s (client_stall_s)" in gw.stderr(), gw.stderr()
        assert closed_after < 10, closed_after
        traces = []
        while time.monotonic() < deadline:
            traces = [t for t in sim.trace() if t.get("disconnected")]
            if traces:
                break
            time.sleep(0.1)
        assert len(traces) == 1, sim.trace()
        assert sum(traces[0]["event_tokens"]) < 16_000_000  # cut short, not streamed to its end
    finally:
        sock.close()
    counts = gw.rejected()
    assert counts.get("client_stalled") == 1, counts
    assert gw.stderr().count("took nothing of its answer") == 1


def _send_queue(local_port: int, remote_port: int) -> int | None:
    """Bytes the kernel holds unsent or unacknowledged on the loopback connection from ``local_port`` to
    ``remote_port`` (``tx_queue`` in /proc/net/tcp), None if there is no such connection."""
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if int(fields[1].split(":")[1], 16) == local_port and int(fields[2].split(":")[1], 16) == remote_port:
            return int(fields[4].split(":")[0], 16)
    return None


def _stalled_reader(gw: Gateway, max_tokens: int) -> socket.socket:
    """A connection that asked for a long fast stream and reads none of it, returned once the gateway's
    kernel send queue to it has stopped growing (full: what the gateway writes more stays in its own
    buffer, whose high-water mark pauses writing at once)."""
    body = _body(max_tokens=max_tokens, stream=True)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(gw.address)
    sock.sendall(_head(len(body)) + body)
    queued, deadline = -1, time.monotonic() + 20
    while time.monotonic() < deadline:
        time.sleep(0.3)
        now = _send_queue(gw.address[1], sock.getsockname()[1])
        if now == queued and now:
            time.sleep(0.7)  # paused for longer than connections.PROGRESS_GRACE_S
            return sock
        queued = now or 0
    sock.close()
    raise AssertionError("the stream never filled the gateway's send queue")


def test_at_the_cap_idle_goes_first_then_stuck_requests_then_stalled_answers(gateway: Start) -> None:
    """Two slots. One holds an answer its client does not read; beside it come, in turn, a kept-alive
    idle connection, a request stuck after its 100 Continue, and one being answered (the simulator's
    first token made slow): each newcomer is served, and what is closed for it is the idle one, then
    the stuck request (408), and only when nothing else is left the stalled answer."""
    gw, sim = gateway("max_connections = 2\nclient_stall_s = 60\nbody_idle_timeout_s = 60",
                      "--itl-ms", "0.001", "--tokens-per-event", "256", "--max-context", "16777216")
    stalled = _stalled_reader(gw, 16_000_000)
    small = _body()
    idle = http.client.HTTPConnection(*gw.address, timeout=10)
    try:
        idle.request("POST", "/v1/chat/completions", small, {"Content-Type": "application/json"})
        assert idle.getresponse().read() and idle.sock is not None  # kept alive, idle now

        def served() -> bytes:
            with _connect(gw) as new:
                new.sendall(_head(len(small), close=True) + small)
                return _read_all(new)

        assert served().startswith(b"HTTP/1.1 200")
        assert _read_all(idle.sock) == b""  # closed to make room: idle first

        with _connect(gw) as stuck:
            stuck.sendall(_head(len(small), expect=True))
            assert stuck.recv(4096).startswith(b"HTTP/1.1 100")
            time.sleep(0.7)
            assert served().startswith(b"HTTP/1.1 200")
            assert _read_all(stuck).startswith(b"HTTP/1.1 408")  # then the request that does not progress

        sim.call("/sim/config", "PATCH", {"ttft_ms": 2000})  # the next request is being answered for 2 s
        answered: list[bytes] = []
        slow = threading.Thread(target=lambda: answered.append(served()))
        slow.start()
        deadline = time.monotonic() + 10
        while len(sim.trace()) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        sim.call("/sim/config", "PATCH", {"ttft_ms": 5})
        assert served().startswith(b"HTTP/1.1 200")  # made room by closing the stalled answer at last
        slow.join(10)
        assert answered and answered[0].startswith(b"HTTP/1.1 200")
    finally:
        stalled.close()
        idle.close()
    counts = gw.rejected()
    assert (counts.get("idle_evicted"), counts.get("slow_request_evicted"), counts.get("stalled_evicted")) \
        == (1, 1, 1), counts
    assert "connections" not in counts and "client_stalled" not in counts, counts
    first = sim.trace()[0]
    assert first["disconnected"]  # its upstream request was cancelled


def _keep_up(sock: socket.socket, stop: threading.Event, rate: float = 1000.0) -> None:
    """Send ``rate`` bytes a second of a body (twice the minimum rate) until ``stop`` or the server closes."""
    began = time.monotonic()
    sent = 100
    with contextlib.suppress(OSError):
        while not stop.is_set():
            time.sleep(0.02)
            due = int((time.monotonic() - began + 0.1) * rate)
            sock.sendall(b"a" * (due - sent))
            sent = due


def test_a_new_connection_waits_in_line_for_a_request_keeping_up(gateway: Start) -> None:
    """The one slot held by a request whose body keeps up (1,000 bytes a second) in its first second: a new client
    that sends its request at once is not refused; it waits, unread, until that request has been on its way a second
    and is closed (408) to make room, then is answered. A line of 64 is full: the next gets 503 at once."""
    gw, _ = gateway("max_connections = 1")
    stop = threading.Event()
    holder = _connect(gw)
    holder.sendall(_head(1_000_000) + b"a" * 100)
    keeper = threading.Thread(target=_keep_up, args=(holder, stop))
    keeper.start()
    try:
        time.sleep(0.2)
        body = _body()
        began = time.monotonic()
        with _connect(gw) as new:
            new.sendall(_head(len(body), close=True) + body)
            answer = _read_all(new)
        waited = time.monotonic() - began
        assert answer.startswith(b"HTTP/1.1 200"), answer[:300]
        assert 0.5 < waited < 2.0, waited  # until the holder's request had been on its way a second
        holder.settimeout(5)
        assert _read_all(holder).startswith(b"HTTP/1.1 408")
    finally:
        stop.set()
        keeper.join(10)
        holder.close()
    counts = gw.rejected()
    assert counts.get("slow_request_evicted") == 1 and "connections" not in counts, counts
    stop.clear()
    holder = _connect(gw)
    holder.sendall(_head(1_000_000) + b"a" * 100)
    keeper = threading.Thread(target=_keep_up, args=(holder, stop))
    keeper.start()
    line = []
    try:
        time.sleep(0.2)
        line = [_connect(gw) for _ in range(64)]
        with _connect(gw) as late:
            late.settimeout(0.5)
            assert _read_all(late).startswith(b"HTTP/1.1 503")  # at once: the line is full
        assert all(not select.select([sock], [], [], 0)[0] for sock in line)  # the line: not answered yet
    finally:
        stop.set()
        keeper.join(10)
        for sock in [holder, *line]:
            sock.close()
    assert "Traceback" not in gw.stderr()
