"""Which HTTP server for the gateway's completions path? Streams/s and CPU per request, server by server.

The same streaming answer (16 OpenAI chat chunks 1 ms apart, then the ending and ``[DONE]``, written by a
coroutine per request) from three servers, each alone on the last CPU (``taskset``), with
`tokometer bench` (closed loop) on the others:

- ``uvicorn``: uvicorn with httptools on uvloop, as the gateway runs today (an ASGI app);
- ``granian``: granian (Rust HTTP, ASGI interface, one worker, one runtime thread, uvloop);
- ``raw``: a bare asyncio protocol on httptools (uvloop), no ASGI: the floor of a Python server.

And the gateway itself (in front of bench/pacer.py) under ``gateway-uvicorn`` (`tokometer gateway`) and
``gateway-granian`` (the same ASGI app, served by granian). The server's CPU time per request is its
processes' user + system time over the step, divided by the requests answered.

granian and py-spy come with the ``bench`` extra.

    .venv/bin/python bench/server_choice.py [--servers uvicorn,granian,raw,gateway-uvicorn,gateway-granian]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

_TOKEN = b'data: {"id":"p","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":" tok"}}]}\n\n'
_FINAL = (b'data: {"id":"p","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},'
          b'"finish_reason":"length"}],"usage":{"prompt_tokens":1,"completion_tokens":16}}\n\ndata: [DONE]\n\n')
TOKENS = 16
ITL_S = 0.001


async def app(scope: dict[str, Any], receive: Callable[[], Awaitable[dict[str, Any]]],
              send: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
    """The trivial streaming ASGI app (lifespan answered, every HTTP request gets the same stream)."""
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    more = True
    while more:
        more = (await receive()).get("more_body", False)
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]})
    for _ in range(TOKENS):
        await asyncio.sleep(ITL_S)
        await send({"type": "http.response.body", "body": _TOKEN, "more_body": True})
    await send({"type": "http.response.body", "body": _FINAL, "more_body": False})


def gateway_app() -> Any:
    """The gateway's ASGI app from the config named by ``TOKOMETER_BENCH_CONFIG`` (granian's ``--factory``)."""
    from tokometer.gateway.app import create_app
    from tokometer.gateway.config import load_config

    return create_app(load_config(Path(os.environ["TOKOMETER_BENCH_CONFIG"])))


class _Raw(asyncio.Protocol):
    """One connection of the bare server: httptools parses, a coroutine per request streams the answer."""

    def __init__(self) -> None:
        import httptools

        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is not an asyncio.Transport subclass

    def data_received(self, data: bytes) -> None:
        self.parser.feed_data(data)

    def on_message_complete(self) -> None:
        asyncio.get_running_loop().create_task(self._answer())

    async def _answer(self) -> None:
        t = self.transport
        assert t is not None
        t.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
                b"transfer-encoding: chunked\r\n\r\n")
        for _ in range(TOKENS):
            await asyncio.sleep(ITL_S)
            t.write(b"%x\r\n%s\r\n" % (len(_TOKEN), _TOKEN))
        t.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(_FINAL), _FINAL))


def serve(kind: str, sock: socket.socket) -> None:
    import uvloop

    if kind == "raw":
        async def main() -> None:
            server = await asyncio.get_running_loop().create_server(_Raw, sock=sock)
            print(f"listening on http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
            await server.serve_forever()
        uvloop.run(main())
    else:
        import uvicorn

        config = uvicorn.Config(app, loop="uvloop", http="httptools", log_level="warning", access_log=False,
                                lifespan="on", backlog=2048)
        print(f"listening on http://127.0.0.1:{sock.getsockname()[1]}", flush=True)
        uvicorn.Server(config).run(sockets=[sock])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _wait_port(port: int, deadline_s: float = 20.0) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise SystemExit(f"nothing listens on port {port} after {deadline_s:.0f} s")


def start(kind: str, cpu: int, tmp: Path, upstream: str | None) -> tuple[subprocess.Popen[bytes], str]:
    prefix = ["taskset", "-c", str(cpu)]
    env = {**os.environ}
    port = _free_port()
    if kind.startswith("gateway"):
        assert upstream is not None
        config = tmp / "gateway.toml"
        config.write_text(f'[[upstreams]]\nname = "pacer"\nurl = "{upstream}/v1"\nmodel = "pacer"\n'
                          f'[[routes]]\nmodel = "pacer"\nupstreams = ["pacer"]\n[cache]\nenabled = false\n'
                          f'[log]\npath = "{tmp / "requests.jsonl"}"\n')
        env["TOKOMETER_BENCH_CONFIG"] = str(config)
    if kind == "gateway-uvicorn":
        argv = [sys.executable, "-m", "tokometer", "gateway", "--config", str(tmp / "gateway.toml"),
                "--port", str(port)]
    elif kind in ("granian", "gateway-granian"):
        target = ["--factory", "server_choice:gateway_app"] if kind == "gateway-granian" else ["server_choice:app"]
        argv = [str(Path(sys.executable).parent / "granian"), "--interface", "asgi", "--host", "127.0.0.1",
                "--port", str(port), "--workers", "1", "--runtime-threads", "1", "--loop", "uvloop", "--no-ws",
                "--log-level", "warning", "--backlog", "2048", *target]
        env["PYTHONPATH"] = os.pathsep.join([str(HERE), *filter(None, [env.get("PYTHONPATH")])])
    else:
        argv = [sys.executable, str(Path(__file__)), "--serve", kind, "--port", str(port)]
    process = subprocess.Popen([*prefix, *argv], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_port(port)
    return process, f"http://127.0.0.1:{port}"


def measure(kind: str, args: argparse.Namespace) -> dict[str, Any]:
    from client_ceiling import start_pacer
    from gateway_throughput import closed_loop, stop, tree_cpu_seconds

    cpus = sorted(os.sched_getaffinity(0))
    pacer = None
    upstream = None
    if kind.startswith("gateway"):
        pacer, upstream = start_pacer("--ttft-ms", "1", "--itl-ms", "1", "--spin-us", "0", "--tokens", str(TOKENS))
    try:
        with tempfile.TemporaryDirectory() as tmp:
            process, url = start(kind, cpus[-1], Path(tmp), upstream)
            try:
                closed_loop(url, args.concurrency, 300, TOKENS)
                rows = []
                for _ in range(args.rounds):
                    before = tree_cpu_seconds(process.pid)
                    s = closed_loop(url, args.concurrency, args.requests, TOKENS)
                    spent = tree_cpu_seconds(process.pid) - before
                    rows.append((s["request_throughput_rps"], 1e6 * spent / max(1, s["requests_completed"]),
                                 s["requests_failed"], s["ttft_ms"]["p50"]))
            finally:
                stop(process)  # type: ignore[arg-type]
    finally:
        if pacer is not None:
            pacer.terminate()
            pacer.wait()
    best = max(rows)
    return {"server": kind, "streams_s": round(best[0]), "cpu_us_per_request": round(min(r[1] for r in rows)),
            "failed": sum(r[2] for r in rows), "ttft_p50_ms": round(best[3], 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", default="uvicorn,granian,raw,gateway-uvicorn,gateway-granian")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", args.port))
        sock.listen(2048)
        serve(args.serve, sock)
        return
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        raise SystemExit("needs at least 2 CPUs (the server alone on one)")
    os.sched_setaffinity(0, set(cpus[:-1]))
    for kind in args.servers.split(","):
        if "granian" in kind and not (Path(sys.executable).parent / "granian").exists():
            print(json.dumps({"server": kind, "skipped": "granian is not installed (pip install 'tokometer[bench]')"}))
            continue
        print(json.dumps(measure(kind, args)), flush=True)


if __name__ == "__main__":
    main()
