"""The gateway under abuse: huge, slow, silent and nested requests, with real sockets on loopback.

Each test starts a real `tokometer gateway` process in front of a real simulator. Timing is not
asserted as a figure (that is `bench/gateway_soak.py`'s job); what is asserted is what must happen:
a refusal with the right status, other clients served meanwhile, nothing left open.
"""

from __future__ import annotations

import contextlib
import json
import resource
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import SimServer
from tokometer.gateway.auth import hash_key


@dataclass
class Gateway:
    process: subprocess.Popen[str]
    root: str
    log: Path

    def stderr(self) -> str:
        return self.log.read_text()


def _start(config: Path, log: Path, nofile: int | None = None) -> Gateway:
    def limit() -> None:
        if nofile is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    with log.open("w") as err:
        process = subprocess.Popen([sys.executable, "-m", "tokometer", "gateway", "--config", str(config), "--port",
                                    "0"], stdout=subprocess.PIPE, stderr=err, text=True, preexec_fn=limit)
    assert process.stdout is not None
    line = process.stdout.readline()
    if "listening on" not in line:
        process.kill()
        raise RuntimeError(f"the gateway did not start: {line}{log.read_text()}")
    return Gateway(process, line.split()[-1], log)


@pytest.fixture
def gateway(sim_factory: Callable[..., SimServer], tmp_path: Path) -> Iterator[Callable[..., Gateway]]:
    started: list[Gateway] = []
    sim = sim_factory("--ttft-ms", "5", "--itl-ms", "2")

    def make(server: str = "", extra: str = "", nofile: int | None = None) -> Gateway:
        config = tmp_path / f"gw{len(started)}.toml"
        config.write_text(f"[server]\n{server}\n[cache]\nenabled = false\n[[upstreams]]\nname = \"sim\"\n"
                          f"url = \"{sim.openai_url}\"\nretries = 0\n[[routes]]\nmodel = \"m\"\nupstreams = "
                          f"[\"sim\"]\n{extra}\n")
        gw = _start(config, tmp_path / f"gw{len(started)}.log", nofile)
        started.append(gw)
        return gw

    yield make
    for gw in started:
        gw.process.terminate()
        gw.process.wait(10)
        if gw.process.stdout:
            gw.process.stdout.close()


def _post(root: str, body: bytes | dict[str, Any], headers: dict[str, str] | None = None,
          timeout: float = 30) -> tuple[int, dict[str, Any]]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(root + "/v1/chat/completions", data,
                                     {"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        with error:
            return error.code, json.loads(error.read() or b"{}")


def _chat(text: str = "hi", **extra: Any) -> dict[str, Any]:
    return {"model": "m", "messages": [{"role": "user", "content": text}], "max_tokens": 4, **extra}


def _raw(root: str, data: bytes, read_timeout: float = 10.0) -> bytes:
    """Send raw bytes on a fresh connection; return all that comes back until the server closes."""
    host, port = root.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=read_timeout) as sock:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall(data)
        chunks = []
        try:
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        except (ConnectionResetError, TimeoutError):
            pass
        return b"".join(chunks)


def test_body_limit_refuses_before_reading_it_all(gateway: Callable[..., Gateway]) -> None:
    gw = gateway("max_body_bytes = 65536")
    host, port = gw.root.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        # Declares 50 MB and sends only the head: the answer must come without the body.
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 52428800\r\n\r\n")
        answer = b""
        while chunk := sock.recv(65536):  # the gateway closes after answering
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b"max_body_bytes" in answer
    # Without a Content-Length (chunked), the limit is enforced while reading.
    big = json.dumps(_chat("x" * 100_000)).encode()
    chunked = b"".join(b"%x\r\n%s\r\n" % (len(big[i:i + 8192]), big[i:i + 8192]) for i in range(0, len(big), 8192))
    answer = _raw(gw.root, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Transfer-Encoding: chunked\r\n\r\n" + chunked + b"0\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    status, _ = _post(gw.root, _chat())
    assert status == 200


def test_message_count_and_nesting_limits(gateway: Callable[..., Gateway]) -> None:
    gw = gateway("max_messages = 100")
    many = {"model": "m", "messages": [{"role": "user", "content": "a"}] * 200_000, "max_tokens": 4}
    status, body = _post(gw.root, many)
    assert status == 413  # 200,000 messages are over the default body limit before they are counted
    assert "max_body_bytes" in body["error"]["message"]  # the client sent it all, then read the reason
    status, body = _post(gw.root, {"model": "m", "messages": [{"role": "user", "content": "a"}] * 101})
    assert status == 400 and body["error"]["code"] == "too_many_messages"
    nested = b'{"model": "m", "messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    status, body = _post(gw.root, nested)
    assert status == 400 and "invalid JSON" in body["error"]["message"]


def test_heads_too_large_or_too_many_fields_get_431(gateway: Callable[..., Gateway]) -> None:
    gw = gateway()
    huge = _raw(gw.root, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 1_048_576
                + b"\r\n\r\n")
    assert huge.startswith(b"HTTP/1.1 431"), huge[:200]
    lines = _raw(gw.root, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                 + b"".join(b"X-H%d: v\r\n" % i for i in range(100_000)) + b"\r\n")
    assert lines.startswith(b"HTTP/1.1 431"), lines[:200]
    assert _post(gw.root, _chat())[0] == 200
    assert "refused a connection from 127.0.0.1" in gw.stderr()


def test_slow_and_silent_connections_are_timed_out(gateway: Callable[..., Gateway]) -> None:
    gw = gateway("header_timeout_s = 1.0")
    host, port = gw.root.removeprefix("http://").rsplit(":", 1)
    started = time.monotonic()
    with socket.create_connection((host, int(port)), timeout=10) as silent:
        assert silent.recv(4096).startswith(b"HTTP/1.1 408")  # answered, then closed
        assert silent.recv(4096) == b""
    with socket.create_connection((host, int(port)), timeout=10) as slow:
        answer = b""
        for byte in b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n":  # one byte every 50 ms: a slowloris
            try:
                slow.sendall(bytes([byte]))
            except OSError:
                break
            time.sleep(0.05)
        slow.settimeout(5)
        answer = slow.recv(4096)
        assert answer.startswith(b"HTTP/1.1 408"), answer
    assert time.monotonic() - started < 8


def test_silent_connections_cannot_starve_a_small_descriptor_limit(gateway: Callable[..., Gateway]) -> None:
    """300 connections that never send a request, against a gateway allowed 256 file descriptors."""
    gw = gateway("header_timeout_s = 30", nofile=256)
    host, port = gw.root.removeprefix("http://").rsplit(":", 1)
    silent = []
    try:
        for _ in range(300):
            silent.append(socket.create_connection((host, int(port)), timeout=10))
        time.sleep(0.5)
        results = [_post(gw.root, _chat(f"normal {i}"))[0] for i in range(20)]
        assert results == [200] * 20
        with urllib.request.urlopen(gw.root + "/metrics", timeout=10) as response:
            metrics = response.read().decode()
        evicted = next(line for line in metrics.splitlines() if 'reason="idle_evicted"' in line)
        assert float(evicted.split()[-1]) >= 300 - (256 - 64) // 2  # the silent ones made room
    finally:
        for sock in silent:
            sock.close()


def test_prompt_counting_does_not_block_other_clients(gateway: Callable[..., Gateway]) -> None:
    """A prompt that takes seconds to count (30,000 messages through the bundled tokenizer's chat
    template) runs beside a normal request: the normal one is answered first, because counting runs
    off the event loop."""
    gw = gateway("max_messages = 50000", 'tokenizer = "bundled"\nmax_input_tokens = 100')
    assert _post(gw.root, _chat("warm the tokenizer up"))[0] == 200
    done: dict[str, float] = {}
    big = {"model": "m", "max_tokens": 4, "messages": [{"role": "user" if i % 2 == 0 else "assistant",
                                                         "content": f"message {i}"} for i in range(30_000)]}

    def huge() -> None:
        done["huge_status"] = _post(gw.root, big, timeout=120)[0]
        done["huge"] = time.monotonic()

    thread = threading.Thread(target=huge)
    thread.start()
    time.sleep(0.3)  # the huge body is being counted now
    status, _ = _post(gw.root, _chat("normal"))
    done["normal"] = time.monotonic()
    thread.join(120)
    assert status == 200 and done["huge_status"] == 400  # over max_input_tokens
    assert done["normal"] < done["huge"]


def test_health_hides_upstream_errors_from_strangers(gateway: Callable[..., Gateway], tmp_path: Path) -> None:
    keys = f'[[keys]]\nname = "ops"\nsha256 = "{hash_key("ops-secret")}"\n'
    gw = gateway("", keys)
    with urllib.request.urlopen(gw.root + "/health", timeout=10) as response:
        public = json.loads(response.read())
    assert public["upstreams"]["sim"] == {"state": "closed"} and public["cache"] is None
    request = urllib.request.Request(gw.root + "/health", headers={"Authorization": "Bearer ops-secret"})
    with urllib.request.urlopen(request, timeout=10) as response:
        private = json.loads(response.read())
    assert "last_error" in private["upstreams"]["sim"]
    # A bare key in Authorization is refused with a hint; failed logins are counted and logged, keys never.
    status, body = _post(gw.root, _chat(), {"Authorization": "ops-secret"})
    assert status == 401 and "Bearer KEY" in body["error"]["message"]
    assert _post(gw.root, _chat(), {"x-api-key": "ops-secret"})[0] == 200
    assert _post(gw.root, _chat(), {"Authorization": "Bearer wrong-guess"})[0] == 401
    with urllib.request.urlopen(gw.root + "/metrics", timeout=10) as response:
        metrics = response.read().decode()
    assert 'tokometer_gateway_rejected_total{reason="auth"} 2.0' in metrics
    log = gw.stderr()
    assert log.count("authentication failed from 127.0.0.1") == 2
    assert "ops-secret" not in log and "wrong-guess" not in log


def test_client_dropping_mid_body_is_one_line(gateway: Callable[..., Gateway]) -> None:
    gw = gateway()
    host, port = gw.root.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"model\":")
        time.sleep(0.3)
    time.sleep(0.5)
    assert _post(gw.root, _chat())[0] == 200
    log = gw.stderr()
    assert "Traceback" not in log and "ClientDisconnect" not in log, log
    assert log.count("went away while sending its request body") == 1, log
