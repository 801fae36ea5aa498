"""Does abuse of the gateway cost its normal clients anything? TTFT p99 and RSS, with and without a soak.

A `tokometer sim` upstream (TTFT 20 ms, 5 ms/token) behind a `tokometer gateway` whose route counts
prompts with the bundled tokenizer. `tokometer bench` sends normal traffic (open loop, 10 req/s,
16-token answers) for the same time twice: alone, and while other clients, all on loopback and all
bounded in count and time, send:

- huge bodies: ~3.9 MB chats of 2,000 messages (counted: the most expensive valid request),
- oversized bodies: 60 MB declared (refused with 413),
- nested JSON: 100,000 levels (refused with 400),
- slowloris heads: 100 connections sending a header byte every 0.5 s (cut off with 408),
- silent connections: 200 that never send a byte (cut off with 408),
- 100,000 header lines and 1 MB header values (refused with 431).

Prints the normal traffic's TTFT p50/p99 and failures in both phases, what the abusers got back, and
the gateway's peak RSS.

    .venv/bin/python bench/gateway_soak.py [--seconds 30]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from client_ceiling import run_bench  # noqa: E402
from gateway_overhead import stop  # noqa: E402


def start(*args: str) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen([sys.executable, "-m", "tokometer", *args, "--port", "0"], stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True)
    assert process.stdout is not None
    return process, process.stdout.readline().split()[-1]


class Abuse:
    """Abusive clients on threads, each bounded by ``until`` (a monotonic deadline)."""

    def __init__(self, root: str, until: float) -> None:
        host, port = root.removeprefix("http://").rsplit(":", 1)
        self.address = (host, int(port))
        self.until = until
        self.outcomes: collections.Counter[str] = collections.Counter()
        self.lock = threading.Lock()

    def note(self, what: str, answer: bytes) -> None:
        status = answer.split(b" ", 2)[1].decode() if answer.startswith(b"HTTP/1.1 ") else "closed"
        with self.lock:
            self.outcomes[f"{what}: {status}"] += 1

    def exchange(self, data: bytes, timeout: float = 30.0) -> bytes:
        try:
            with socket.create_connection(self.address, timeout=timeout) as sock:
                with contextlib.suppress(OSError):
                    sock.sendall(data)
                answer = b""
                while len(answer) < 65536 and (chunk := sock.recv(65536)):
                    answer += chunk
                return answer
        except OSError:
            return b""

    def post(self, body: bytes, extra: bytes = b"") -> bytes:
        return self.exchange(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                             b"Connection: close\r\n" + extra + b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def huge(self) -> None:
        messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i} " + "w " * 950}
                    for i in range(2000)]
        body = json.dumps({"model": "m", "max_tokens": 4, "messages": messages}).encode()
        while time.monotonic() < self.until:
            self.note("huge 3.9 MB chat", self.post(body))

    def oversized(self) -> None:
        while time.monotonic() < self.until:
            answer = self.exchange(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 62914560\r\n"
                                   b"\r\n" + b" " * 1_000_000)
            self.note("60 MB body", answer)
            time.sleep(0.2)

    def nested(self) -> None:
        body = b'{"model": "m", "messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
        while time.monotonic() < self.until:
            self.note("nested JSON", self.post(body))
            time.sleep(0.1)

    def headers(self) -> None:
        lines = b"".join(b"X-H%d: v\r\n" % i for i in range(100_000))
        while time.monotonic() < self.until:
            self.note("100,000 header lines", self.exchange(b"GET /health HTTP/1.1\r\nHost: x\r\n" + lines + b"\r\n"))
            self.note("1 MB header", self.exchange(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 1_048_576
                                                   + b"\r\n\r\n"))
            time.sleep(0.2)

    def slowloris(self, count: int = 100) -> None:
        socks = []
        for _ in range(count):
            try:
                socks.append(socket.create_connection(self.address, timeout=5))
            except OSError:
                break
        head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n" + b"X-Slow: " + b"z" * 1000
        position = 0
        while time.monotonic() < self.until and socks and position < len(head):
            for sock in list(socks):
                try:
                    sock.sendall(head[position:position + 1])
                except OSError:
                    socks.remove(sock)
                    self.note("slowloris", b"")
            position += 1
            time.sleep(0.5)
        for sock in socks:
            sock.close()

    def silent(self, count: int = 200) -> None:
        socks = []
        for _ in range(count):
            try:
                socks.append(socket.create_connection(self.address, timeout=30))
            except OSError:
                break
        for sock in socks:
            try:
                sock.settimeout(max(0.1, self.until - time.monotonic()))
                self.note("silent connection", sock.recv(4096))
            except OSError:
                self.note("silent connection", b"")
            sock.close()

    def run(self, kinds: list[str]) -> list[threading.Thread]:
        threads = [threading.Thread(target=getattr(self, kind), daemon=True) for kind in kinds]
        for thread in threads:
            thread.start()
        return threads


ABUSE = ("huge", "oversized", "nested", "headers", "slowloris", "silent")


def watch_rss(pid: int, until: float, peak: list[float]) -> None:
    process = psutil.Process(pid)
    while time.monotonic() < until:
        try:
            peak[0] = max(peak[0], process.memory_info().rss / 2**20)
        except psutil.Error:
            return
        time.sleep(0.1)


def normal(gw: str, seconds: int) -> dict[str, Any]:
    result = run_bench(gw + "/v1", "--model", "m", "-r", "10", "--duration", f"{seconds}s", "--output-tokens", "16",
                       "--input-tokens", "32", "--timeout", "60s")
    s: dict[str, Any] = result["steps"][0]["summary"]
    return {"completed": s["requests_completed"], "failed": s["requests_failed"], "errors": s["errors"],
            "ttft_p50_ms": round(s["ttft_ms"]["p50"], 1), "ttft_p99_ms": round(s["ttft_ms"]["p99"], 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=30)
    parser.add_argument("--abuse", default=",".join(ABUSE), help=f"which abusers, of {','.join(ABUSE)}")
    args = parser.parse_args()
    sim, sim_root = start("sim", "--model", "m", "--ttft-ms", "20", "--itl-ms", "5")
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "gw.toml"
        config.write_text(f'[server]\nheader_timeout_s = 10\n[cache]\nenabled = false\n[[upstreams]]\nname = "sim"\n'
                          f'url = "{sim_root}/v1"\n[[routes]]\nmodel = "m"\nupstreams = ["sim"]\n'
                          'tokenizer = "bundled"\nmax_input_tokens = 100000\n')
        gateway, gw = start("gateway", "--config", str(config))
        try:
            peak = [0.0]
            rss_at_start = psutil.Process(gateway.pid).memory_info().rss / 2**20
            baseline = normal(gw, args.seconds)
            until = time.monotonic() + args.seconds + 5
            watcher = threading.Thread(target=watch_rss, args=(gateway.pid, until + 5, peak), daemon=True)
            watcher.start()
            abuse = Abuse(gw, until)
            threads = abuse.run(args.abuse.split(","))
            time.sleep(2)  # let the abuse get going
            soaked = normal(gw, args.seconds)
            for thread in threads:
                thread.join(timeout=60)
            time.sleep(2)
            rss_after = psutil.Process(gateway.pid).memory_info().rss / 2**20
            open_fds = psutil.Process(gateway.pid).num_fds()
        finally:
            stop(gateway)
            stop(sim)
    print(f"machine: {os.cpu_count()} cores; normal traffic: 10 req/s for {args.seconds} s each phase")
    print(f"{'phase':<8} {'done':>5} {'failed':>6} {'TTFT p50 ms':>12} {'TTFT p99 ms':>12}  errors")
    for name, row in (("alone", baseline), ("soaked", soaked)):
        print(f"{name:<8} {row['completed']:>5} {row['failed']:>6} {row['ttft_p50_ms']:>12} {row['ttft_p99_ms']:>12}"
              f"  {row['errors'] or ''}")
    print("abusers got:")
    for what, count in sorted(abuse.outcomes.items()):
        print(f"  {what:<32} {count:>6}")
    print(f"gateway RSS: {rss_at_start:.0f} MiB at start, peak {peak[0]:.0f} MiB during the soak, "
          f"{rss_after:.0f} MiB after it; open descriptors after: {open_fds}")


if __name__ == "__main__":
    main()
