"""An exactly paced streaming server: the measuring instrument for tokometer's own ceiling.

Not the simulator: a bare asyncio protocol (no ASGI, no JSON encoding per event)
whose only job is to send OpenAI-style chat SSE events at exact times and
remember when it sent them, so that a client's numbers can be held against
the truth and the server is never the bottleneck. One ticker drives every
stream: it wakes at the earliest due time (the last stretch by spinning on the
clock) and writes every event that is due. Each event carries one token.

    python bench/pacer.py --port 0 --ttft-ms 1 --itl-ms 1
    GET /trace  -> JSON list of {"received_ns", "event_ns": [...]} (last 100000 requests)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import heapq
import json
import socket
import time
from collections import deque
from typing import Any

import uvloop

_HEAD = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n"
         b"cache-control: no-cache\r\n\r\n")
_TOKEN = b'data: {"id":"p","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":" tok"}}]}\n\n'
_FINAL = (b'data: {"id":"p","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},'
          b'"finish_reason":"length"}],"usage":{"prompt_tokens":1,"completion_tokens":%d}}\n\ndata: [DONE]\n\n')


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


_TOKEN_CHUNK = _chunk(_TOKEN)
_WORDS = (b" tok", b" ken", b" word", b" piece", b" bit", b" part", b" unit", b" item")
_VARIED = tuple(_chunk(_TOKEN.replace(b'" tok"', b'"' + word + b'"')) for word in _WORDS)
"""With --varied: eight tokens in turn (LiteLLM's proxy fails a stream that repeats one chunk)."""


class Stream:
    __slots__ = ("event_ns", "left", "n", "received_ns", "transport")

    def __init__(self, transport: asyncio.Transport, received_ns: int, n: int) -> None:
        self.transport = transport
        self.received_ns = received_ns
        self.n = n
        self.left = n
        self.event_ns: list[int] = []


class Pacer:
    """The shared ticker: a heap of (due_ns, seq, stream)."""

    def __init__(self, ttft_ns: int, itl_ns: int, spin_ns: int) -> None:
        self.ttft_ns = ttft_ns
        self.itl_ns = itl_ns
        self.spin_ns = spin_ns
        self.varied = False
        self.heap: list[tuple[int, int, Stream]] = []
        self.seq = 0
        self.wake = asyncio.Event()
        self.traces: deque[dict[str, Any]] = deque(maxlen=100_000)

    def add(self, stream: Stream) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (stream.received_ns + self.ttft_ns, self.seq, stream))
        self.wake.set()

    async def run(self) -> None:
        heap = self.heap
        while True:
            if not heap:
                self.wake.clear()
                await self.wake.wait()
                continue
            due = heap[0][0]
            remaining = due - time.perf_counter_ns()
            if remaining > self.spin_ns:
                self.wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.wake.wait(), (remaining - self.spin_ns) / 1e9)
                continue
            if remaining > 0:
                await asyncio.sleep(0)
                continue
            now = time.perf_counter_ns()
            while heap and heap[0][0] <= now:
                due, seq, stream = heapq.heappop(heap)
                if stream.transport.is_closing():
                    continue
                stream.left -= 1
                stamp = time.perf_counter_ns()
                token = _VARIED[stream.left % 8] if self.varied else _TOKEN_CHUNK
                if stream.left == 0:
                    stream.transport.write(token + _chunk(_FINAL % stream.n) + b"0\r\n\r\n")
                    stream.event_ns.append(stamp)
                    self.traces.append({"received_ns": stream.received_ns, "event_ns": stream.event_ns})
                else:
                    stream.transport.write(token)
                    stream.event_ns.append(stamp)
                    heapq.heappush(heap, (due + self.itl_ns, seq, stream))


class Conn(asyncio.Protocol):
    def __init__(self, pacer: Pacer, default_tokens: int) -> None:
        self.pacer = pacer
        self.default_tokens = default_tokens
        self.buf = b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is not an asyncio.Transport subclass
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter_ns()
        self.buf += data
        head_end = self.buf.find(b"\r\n\r\n")
        if head_end < 0:
            return
        head = self.buf[:head_end].decode("latin-1")
        length = 0
        for line in head.split("\r\n")[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        if len(self.buf) < head_end + 4 + length:
            return
        body = self.buf[head_end + 4: head_end + 4 + length]
        self.buf = self.buf[head_end + 4 + length:]
        assert self.transport is not None
        if head.startswith("GET /trace"):
            payload = json.dumps(list(self.pacer.traces)).encode()
            self.transport.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n"
                                 % len(payload) + payload)
            return
        if head.startswith("GET"):
            payload = b'{"object":"list","data":[{"id":"pacer","object":"model"}]}'
            self.transport.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n"
                                 % len(payload) + payload)
            return
        n = self.default_tokens
        with contextlib.suppress(ValueError, AttributeError):
            n = int(json.loads(body).get("max_tokens") or n)
        self.transport.write(_HEAD)
        self.pacer.add(Stream(self.transport, now, max(n, 1)))


async def main(args: argparse.Namespace) -> None:
    pacer = Pacer(int(args.ttft_ms * 1e6), int(args.itl_ms * 1e6), int(args.spin_us * 1e3))
    pacer.varied = args.varied
    loop = asyncio.get_running_loop()
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((args.host, args.port))
    sock.listen(4096)
    server = await loop.create_server(lambda: Conn(pacer, args.tokens), sock=sock)
    print(f"pacer listening on http://{args.host}:{sock.getsockname()[1]}", flush=True)
    async with server:
        await pacer.run()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--ttft-ms", type=float, default=1.0)
    parser.add_argument("--itl-ms", type=float, default=1.0)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--spin-us", type=float, default=1500.0, help="spin this long before each due time")
    parser.add_argument("--varied", action="store_true", help="eight tokens in turn instead of one repeated")
    uvloop.run(main(parser.parse_args()))
