"""Hostile clients of the inbound boundary: raw requests to a real gateway and a real simulator on loopback.

`Servers` starts a `tokometer sim` and a `tokometer gateway` in front of it (``[server]`` settings given), each
logging to a file the tests read for tracebacks. `exchange` sends one request as raw bytes (in pieces, with
pauses between them, when asked) on a fresh connection and reads the answer within a deadline: (status or
None when the connection was closed or reset without one, the answer's body, seconds taken). `BASES`
holds a valid request body of each protocol by path, and `shape_of_error` tells whether a 4xx body is in the
shape the client of that path reads.
"""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["BASES", "GATEWAY_PATHS", "SIM_PATHS", "Answer", "Servers", "exchange", "head", "shape_of_error",
           "start_servers"]

_CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi there"}], "max_tokens": 2}
BASES: dict[str, dict[str, Any]] = {
    "/v1/chat/completions": _CHAT,
    "/v1/completions": {"model": "m", "prompt": "hi there", "max_tokens": 2},
    "/v1/messages": {"model": "m", "max_tokens": 2, "messages": [
        {"role": "user", "content": [{"type": "text", "text": "hi"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "42"}]}],
        "tools": [{"name": "f", "input_schema": {"type": "object"}}], "stop_sequences": ["END"]},
    "/v1/responses": {"model": "m", "max_output_tokens": 2, "input": [
        {"role": "user", "content": "hi"},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "42"}],
        "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}]},
    "/api/chat": {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": False,
                  "options": {"num_predict": 2, "stop": ["END"]}},
    "/generate_stream": {"inputs": "hi there", "parameters": {"max_new_tokens": 2, "stop": ["END"]}},
    "/completion": {"prompt": "hi there", "n_predict": 2, "stop": ["END"]},
    "/v1/embeddings": {"model": "m", "input": ["hi", "there"]},
    "/v1/rerank": {"model": "m", "query": "hi", "documents": ["a b", "c"]},
    "/tokenize": {"prompt": "hi there"},
    "/detokenize": {"tokens": []},
}
"""A valid request of each endpoint, by path."""
GATEWAY_PATHS = ("/v1/chat/completions", "/v1/completions", "/v1/messages", "/v1/responses")
SIM_PATHS = tuple(BASES)


@dataclass
class Answer:
    status: int | None
    """None: closed or reset without an answer."""
    body: bytes
    seconds: float
    content_type: str = ""


def head(method: str, target: str, version: str = "HTTP/1.1", fields: Sequence[tuple[str, str]] = ()) -> bytes:
    """A request head (with its blank line)."""
    lines = [f"{method} {target} {version}".rstrip(), "Host: x", *(f"{n}: {v}" for n, v in fields)]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def exchange(address: tuple[str, int], pieces: Sequence[bytes], pause_s: float = 0.0, deadline_s: float = 20.0,
             ) -> Answer:
    """Send ``pieces`` (``pause_s`` apart) on a new connection; the answer, read until it is whole, the server
    closes, or ``deadline_s`` passes (then status None)."""
    began = time.monotonic()
    data = b""
    with socket.create_connection(address, timeout=deadline_s) as sock:
        with contextlib.suppress(OSError):
            for index, piece in enumerate(pieces):
                if index and pause_s:
                    time.sleep(pause_s)
                sock.sendall(piece)
        sock.settimeout(0.05)
        while time.monotonic() - began < deadline_s and not _whole(data):
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                break
            if not chunk:
                break
            data += chunk
    return _answer(data, time.monotonic() - began)


def _answer(data: bytes, seconds: float) -> Answer:
    fields, _, body = data.partition(b"\r\n\r\n")
    status_line = fields.split(b"\r\n", 1)[0].split()
    if len(status_line) < 2 or not status_line[1].isdigit():
        return Answer(None, data, seconds)
    content_type = ""
    for line in fields.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-type":
            content_type = value.strip().decode("latin-1")
    if b"transfer-encoding: chunked" in fields.lower():
        body = _dechunk(body)
    return Answer(int(status_line[1]), body, seconds, content_type)


def _whole(data: bytes) -> bool:
    """An answer whose end has come (its Content-Length, or the last chunk)."""
    fields, found, body = data.partition(b"\r\n\r\n")
    if not found or fields.startswith(b"HTTP/1.1 100"):
        return False
    lowered = fields.lower()
    for line in lowered.split(b"\r\n"):
        if line.startswith(b"content-length:"):
            return len(body) >= int(line.split(b":", 1)[1])
    return b"transfer-encoding: chunked" in lowered and body.endswith(b"0\r\n\r\n")


def _dechunk(data: bytes) -> bytes:
    out = b""
    while data:
        size, _, data = data.partition(b"\r\n")
        try:
            length = int(size.split(b";")[0], 16)
        except ValueError:
            break
        if length == 0:
            break
        out, data = out + data[:length], data[length + 2:]
    return out


def shape_of_error(path: str, body: bytes) -> bool:
    """A 4xx body in the shape the client of ``path`` reads (an ``error`` member; Anthropic's ``type: error``)."""
    try:
        data = json.loads(body)
    except ValueError:
        return False
    if not isinstance(data, dict) or "error" not in data:
        return False
    return data.get("type") == "error" if path == "/v1/messages" else True


@dataclass
class Servers:
    sim: subprocess.Popen[str]
    sim_root: str
    gateway: subprocess.Popen[str]
    gateway_root: str
    directory: Path

    def address(self, of: str) -> tuple[str, int]:
        root = self.gateway_root if of == "gateway" else self.sim_root
        host, port = root.removeprefix("http://").rsplit(":", 1)
        return host, int(port)

    def log(self) -> str:
        """Both servers' logs."""
        return (self.directory / "gateway.log").read_text() + (self.directory / "sim.log").read_text()

    def stop(self) -> None:
        for process in (self.gateway, self.sim):
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:  # (still draining connections a test left open)
                process.kill()
                process.wait(10)
            if process.stdout is not None:
                process.stdout.close()


def _start(directory: Path, name: str, *args: str) -> tuple[subprocess.Popen[str], str]:
    """``tokometer NAME --port 0 ARGS``, its log in ``directory/NAME.log``; (the process, its root URL)."""
    log = directory / f"{name}.log"
    with log.open("w") as err:
        process = subprocess.Popen([sys.executable, "-m", "tokometer", name, "--port", "0", *args],
                                   stdout=subprocess.PIPE, stderr=err, text=True)
    assert process.stdout is not None
    line = process.stdout.readline()
    if "listening on" not in line:
        process.kill()
        raise RuntimeError(f"{name} did not start: {line}{log.read_text()}")
    return process, line.split()[-1]


def start_servers(directory: Path, server: str = "", *sim_args: str) -> Servers:
    """A simulator (1 ms to the first token and between tokens) and a gateway before it, with ``server``
    as its ``[server]`` settings; their logs in ``directory``."""
    sim, sim_root = _start(directory, "sim", "--ttft-ms", "1", "--itl-ms", "1", *sim_args)
    config = directory / "gateway.toml"
    config.write_text(f"[server]\n{server}\n[cache]\nenabled = false\n[[upstreams]]\nname = \"sim\"\n"
                      f"url = \"{sim_root}/v1\"\nretries = 0\n[[routes]]\nmodel = \"m\"\nupstreams = [\"sim\"]\n")
    try:
        gateway, root = _start(directory, "gateway", "--config", str(config), "--log-level", "info")
    except RuntimeError:
        sim.kill()
        raise
    return Servers(sim, sim_root, gateway, root, directory)
