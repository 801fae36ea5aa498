"""Backpressure: clients that never read a long answer cost the gateway bounded memory, and nobody else waits.

A real `tokometer gateway` in front of a real simulator that streams as fast as it can (no pause
between events, 64 tokens an event) answers of 2,000,000 tokens (~17 MB). Twenty raw sockets with a
small receive buffer ask for such an answer and then never read a byte. Before the relay paused its
upstreams, the gateway read every answer on into memory for clients that took nothing (2 GB of RSS
measured with 40 such clients); now each stream holds at most the upstream read-ahead
(`READ_AHEAD_BYTES`, plus one socket read), the client connection's write buffer and the record of
what passed, the kernel holds at most the gateway's socket buffers (`CLIENT_SEND_BUFFER_BYTES`, the
upstream's SO_RCVBUF), and the engine is held back by TCP (its own send buffer still takes a few MB:
what the simulator counts as sent). Measured: the gateway's RSS before and while the streams stand
still, and a normal client's requests answered meanwhile. Then the HTTP client's pause on its own: a
paused answer is not failed by the idle timeout, and reads on when resumed.
"""

from __future__ import annotations

import contextlib
import json
import socket
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import SimServer, start_gateway
from tokometer.gateway.upstream import READ_AHEAD_BYTES

_STREAMS = 20
_TOKENS = 2_000_000
_PER_STREAM_BYTES = READ_AHEAD_BYTES + 256 * 1024 + 256 * 1024 + 512 * 1024
"""What one stalled stream may hold: the read-ahead, one socket read past it (uvloop reads up to
256 KiB at a time), the client's write buffer above its high-water mark, and the answer's text so far
with the parser's state -- generously."""
_SLACK_BYTES = 48 * 1024 * 1024
"""Allocator and interpreter growth that comes with forty more connections and tasks."""


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


@pytest.fixture
def gateway(sim_factory: Callable[..., SimServer], tmp_path: Path) -> Iterator[tuple[SimServer, SimServer]]:
    sim = sim_factory("--ttft-ms", "1", "--itl-ms", "0", "--tokens-per-event", "64", "--max-context", "3000000",
                      "--default-max-tokens", "8")
    config = tmp_path / "gw.toml"
    config.write_text(f'[cache]\nenabled = false\n[[upstreams]]\nname = "sim"\nurl = "{sim.openai_url}"\n'
                      'retries = 0\n[[routes]]\nmodel = "m"\nupstreams = ["sim"]\n')
    gw = start_gateway(config)
    yield sim, gw
    gw.stop()


def _never_reading(root: str) -> socket.socket:
    host, port = root.removeprefix("http://").rsplit(":", 1)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connect: the window stays small
    sock.connect((host, int(port)))
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "go on"}], "stream": True,
                       "max_tokens": _TOKENS}).encode()
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    return sock


def _normal_request(root: str) -> float:
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}).encode()
    request = urllib.request.Request(root + "/v1/chat/completions", body, {"Content-Type": "application/json"})
    started = time.monotonic()
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 200
        assert json.loads(response.read())["usage"]["completion_tokens"] == 8
    return time.monotonic() - started


def test_clients_that_never_read_hold_bounded_memory(gateway: tuple[SimServer, SimServer]) -> None:
    sim, gw = gateway
    pid = gw.process.pid
    for _ in range(3):
        _normal_request(gw.root)
    before = _rss(pid)
    sockets = [_never_reading(gw.root) for _ in range(_STREAMS)]
    try:
        # every stream has started and filled what it may; give the gateway time to grow if it would
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and len([t for t in sim.trace() if t["event_ns"]]) < _STREAMS:
            time.sleep(0.2)
        time.sleep(3.0)
        peak = before
        waits = []
        for _ in range(10):
            waits.append(_normal_request(gw.root))
            peak = max(peak, _rss(pid))
            time.sleep(0.2)
        traces = [t for t in sim.trace() if t["completion_tokens"] == 0 or t["end_ns"] == 0]
        sent = sorted(sum(t["event_tokens"]) for t in sim.trace() if t["completion_tokens"] != 8)
    finally:
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.close()
    grown = peak - before
    print(f"gateway RSS {before / 2**20:.0f} MiB -> {peak / 2**20:.0f} MiB with {_STREAMS} stalled streams; "
          f"normal requests took at most {max(waits) * 1000:.0f} ms; tokens each stalled stream got sent: "
          f"{sent[:3]}..{sent[-3:]}")
    assert grown < _STREAMS * _PER_STREAM_BYTES + _SLACK_BYTES, grown
    assert max(waits) < 2.0, waits  # other clients are not held up by the stalled streams
    # the engine was held back: no stalled stream got near its 200,000 tokens sent
    assert len(sent) >= _STREAMS and max(sent) < _TOKENS // 2, sent
    assert traces  # the stalled streams are still open on the simulator (held back, not finished)


def test_a_paused_answer_outlives_the_idle_timeout_and_reads_on(sim_factory: Callable[..., SimServer]) -> None:
    import asyncio

    from tokometer.client.http1 import HttpPool, StreamedResponse

    sim = sim_factory("--ttft-ms", "1", "--itl-ms", "1", "--max-context", "100000")
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "x"}], "stream": True,
                       "max_tokens": 400}).encode()

    async def run() -> tuple[int, int, bytes]:
        pool = HttpPool(sim.openai_url, idle_timeout=0.3, total_timeout=30)
        response = StreamedResponse()
        got: list[bytes] = []
        stamps: list[int] = []
        window: list[int] = []

        def resume() -> None:
            window.append(time.perf_counter_ns())
            response.resume()

        def on_chunk(chunk: bytes, stamp: int) -> None:
            got.append(chunk)
            stamps.append(stamp)
            if not window:
                window.append(stamp)
                response.pause()  # after the first read: nothing more is read for a while
                asyncio.get_running_loop().call_later(1.0, resume)  # 3 idle timeouts later

        response.on_chunk = on_chunk
        try:
            await pool.request(pool.encode("POST", "/chat/completions", body, {"Content-Type": "application/json"}),
                               response)
        finally:
            await pool.close()
        # nothing was read while paused (a read stamps every chunk it brings with the read's time)
        assert not [t for t in stamps if window[0] < t < window[1]], (window, stamps[:5])
        return response.status, len(got), b"".join(got)

    status, chunks, data = asyncio.run(run())
    assert status == 200 and chunks > 1
    assert data.rstrip().endswith(b"data: [DONE]")  # the whole answer, read on after the pause
    assert data.count(b'"content"') >= 399  # every token of the 400 (one an event; the last may be the ending)
