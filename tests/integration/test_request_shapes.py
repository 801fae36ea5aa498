"""Every request shape gets a 4xx (issue 22 F): the gateway and the simulator against hostile clients.

A real `tokometer gateway` (a route that counts tokens with the bundled tokenizer, and the answer cache
on) in front of a real `tokometer sim`, both on loopback. The clients are written for the purpose: raw
sockets that send bodies of the wrong shape, bodies too big or too slow, and API keys in two encodings.
What is asserted is the status (a 4xx naming the problem, never a 500), that the server's log has no
traceback, and that the server still serves; and the simulator's answer to a request without ``stream``
is what each real protocol's default gives.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.conftest import SimServer
from tokometer.gateway.auth import hash_key

KEY = "clé-Schlüssel"
"""A key with non-ASCII characters: sent as UTF-8 (curl) or Latin-1 (http.client), it is the same key."""


def _nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"a": value}
    return value


def _nested_lists(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth - 1):
        value = [value]
    return value


_CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
BAD_BODIES: dict[str, bytes] = {
    "extra parameters nested 300 deep": json.dumps({**_CHAT, "extra": _nested(300), "temperature": 0}).encode(),
    "arrays nested 100 deep": json.dumps({**_CHAT, "tools": _nested_lists(100)}).encode(),
    "messages of numbers": json.dumps({"model": "m", "messages": [1, 2]}).encode(),
    "messages a string": json.dumps({"model": "m", "messages": "hi"}).encode(),
    "content an object": json.dumps({"model": "m", "messages": [{"role": "user", "content": {"a": 1}}]}).encode(),
    "content parts of numbers": json.dumps({"model": "m", "messages": [{"role": "user", "content": [1]}]}).encode(),
    "role a number": json.dumps({"model": "m", "messages": [{"role": 5, "content": "x"}]}).encode(),
    "model a list": json.dumps({**_CHAT, "model": ["m"]}).encode(),
    "max_tokens a string": json.dumps({**_CHAT, "max_tokens": "5"}).encode(),
    "max_tokens negative": json.dumps({**_CHAT, "max_tokens": -5}).encode(),
    "max_tokens 1e30": json.dumps({**_CHAT, "max_tokens": 10**30}).encode(),
    "stream a string": json.dumps({**_CHAT, "stream": "yes"}).encode(),
    "stream_options a list": json.dumps({**_CHAT, "stream": True, "stream_options": [1]}).encode(),
    "temperature a string": json.dumps({**_CHAT, "temperature": "hot"}).encode(),
    "stop an object": json.dumps({**_CHAT, "stop": {"a": 1}}).encode(),
    "seed a float": json.dumps({**_CHAT, "seed": 1.5}).encode(),
    "not JSON": b'{"model": "m", "messages": [',
    "NaN": b'{"model": "m", "max_tokens": NaN, "messages": []}',
    "an array": b'[{"model": "m"}]',
    "not UTF-8": b'{"model": "\xff\xfe"}',
    "empty": b"",
}
COMPLETIONS_BAD: dict[str, bytes] = {
    "prompt an object": json.dumps({"model": "m", "prompt": {"a": 1}}).encode(),
    "prompt nested lists of strings": json.dumps({"model": "m", "prompt": [[["x"]]]}).encode(),
    "prompt negative token ids": json.dumps({"model": "m", "prompt": [-1, 2]}).encode(),
    "extra parameters nested 300 deep": json.dumps({"model": "m", "prompt": "hi", "x": _nested(300)}).encode(),
}


def _exchange(root: str, head: bytes, body: bytes = b"", timeout: float = 30) -> tuple[int, bytes]:
    """One request on a fresh connection (``head`` without the blank line); (status, the body)."""
    host, port = root.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.sendall(head + b"\r\n" + body)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    status_line, _, rest = answer.partition(b"\r\n")
    fields, _, content = rest.partition(b"\r\n\r\n")
    if b"transfer-encoding: chunked" in fields.lower():
        content = _dechunk(content)
    return int(status_line.split()[1]), content


def _dechunk(data: bytes) -> bytes:
    out = b""
    while data:
        size, _, data = data.partition(b"\r\n")
        length = int(size, 16)
        if length == 0:
            break
        out, data = out + data[:length], data[length + 2:]
    return out


def _post(root: str, path: str, body: bytes, headers: bytes = b"") -> tuple[int, bytes]:
    head = (b"POST " + path.encode() + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Connection: close\r\n" + headers + b"Content-Length: " + str(len(body)).encode() + b"\r\n")
    return _exchange(root, head, body)


@pytest.fixture
def gateway(sim_factory: Callable[..., SimServer], tmp_path: Path) -> Iterator[tuple[str, Path, SimServer]]:
    sim = sim_factory("--ttft-ms", "1", "--itl-ms", "1")
    config = tmp_path / "gw.toml"
    config.write_text(f'[server]\nbody_timeout_s = 1\n[cache]\nenabled = true\n[[upstreams]]\nname = "sim"\n'
                      f'url = "{sim.openai_url}"\nretries = 0\n[[routes]]\nmodel = "m"\nupstreams = ["sim"]\n'
                      f'tokenizer = "bundled"\n[[keys]]\nname = "k"\nsha256 = "{hash_key(KEY)}"\n')
    log = tmp_path / "gw.log"
    with log.open("w") as err:
        process = subprocess.Popen([sys.executable, "-m", "tokometer", "gateway", "--config", str(config), "--port",
                                    "0"], stdout=subprocess.PIPE, stderr=err, text=True)
    assert process.stdout is not None
    line = process.stdout.readline()
    assert "listening on" in line, log.read_text()
    try:
        yield line.split()[-1], log, sim
    finally:
        process.terminate()
        process.wait(10)
        process.stdout.close()


def _key(encoding: str) -> bytes:
    return b"Authorization: Bearer " + KEY.encode(encoding) + b"\r\n"


def test_the_gateway_answers_every_bad_shape_with_a_400(gateway: tuple[str, Path, SimServer]) -> None:
    root, log, _ = gateway
    for endpoint, cases in (("/v1/chat/completions", BAD_BODIES), ("/v1/completions", COMPLETIONS_BAD)):
        for name, body in cases.items():
            status, answer = _post(root, endpoint, body, _key("utf-8"))
            assert status == 400, (endpoint, name, status, answer[:300])
            message = json.loads(answer)["error"]["message"]
            assert message and "Traceback" not in message, (name, message)
    status, answer = _post(root, "/v1/chat/completions", json.dumps(_CHAT).encode(), _key("utf-8"))
    assert status == 200 and json.loads(answer)["choices"][0]["message"]["content"], answer  # still serving
    assert "Traceback" not in log.read_text() and "Exception" not in log.read_text(), log.read_text()[-3000:]


def test_the_field_is_named(gateway: tuple[str, Path, SimServer]) -> None:
    root, _, _ = gateway
    for body, field in ((BAD_BODIES["messages of numbers"], "messages[0]"),
                        (BAD_BODIES["content parts of numbers"], "messages[0].content[0]"),
                        (BAD_BODIES["stream a string"], "'stream'"),
                        (BAD_BODIES["max_tokens 1e30"], "'max_tokens'"),
                        (BAD_BODIES["extra parameters nested 300 deep"], "more than 64 levels deep")):
        status, answer = _post(root, "/v1/chat/completions", body, _key("utf-8"))
        assert status == 400 and field in json.loads(answer)["error"]["message"], (field, answer)


def test_a_non_ascii_key_matches_in_either_encoding(gateway: tuple[str, Path, SimServer]) -> None:
    root, _, _ = gateway
    body = json.dumps(_CHAT).encode()
    for encoding in ("utf-8", "latin-1"):
        status, answer = _post(root, "/v1/chat/completions", body, _key(encoding))
        assert status == 200, (encoding, answer[:300])
    status, _ = _post(root, "/v1/chat/completions", body, b"x-api-key: " + KEY.encode("utf-8") + b"\r\n")
    assert status == 200
    status, _ = _post(root, "/v1/chat/completions", body, b"Authorization: Bearer cle-Schlussel\r\n")
    assert status == 401


def test_a_body_that_trickles_is_cut_off_with_408(gateway: tuple[str, Path, SimServer]) -> None:
    root, log, _ = gateway
    host, port = root.removeprefix("http://").rsplit(":", 1)
    started = time.monotonic()
    with socket.create_connection((host, int(port)), timeout=20) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     + _key("utf-8") + b"Content-Length: 1000\r\n\r\n{\"model\":")  # and never the rest
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert 0.9 <= time.monotonic() - started < 10
    assert b"did not arrive within 1 s" in answer
    assert "Traceback" not in log.read_text()


# -- the simulator ------------------------------------------------------------------------------------


def test_the_simulator_answers_every_bad_shape_with_a_4xx(sim_factory: Callable[..., SimServer]) -> None:
    sim = sim_factory("--ttft-ms", "1", "--itl-ms", "1")
    for endpoint, cases in (("/v1/chat/completions", BAD_BODIES), ("/v1/completions", COMPLETIONS_BAD)):
        for name, body in cases.items():
            status, answer = _post(sim.root, endpoint, body)
            assert status == 400, (endpoint, name, status, answer[:300])
    everywhere = [b"{", b"[1]", b'"x"', b"\xff\xfe", BAD_BODIES["extra parameters nested 300 deep"]]
    for path, own in (("/tokenize", [b'{"messages": [1]}', b'{"content": 5}', b'{"messages": [{"content": {}}]}']),
                      ("/detokenize", [b'{"tokens": [-1]}', b'{"tokens": [true]}', b'{"tokens": [1e30]}']),
                      ("/sim/config", [b'{"ttft_ms": "soon"}', b'{"nonsense": 1}'])):
        for body in everywhere + own:
            method = b"PATCH" if path == "/sim/config" else b"POST"
            head = (method + b" " + path.encode() + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: "
                    + str(len(body)).encode() + b"\r\n")
            status, answer = _exchange(sim.root, head, body)
            assert 400 <= status < 500, (path, body[:40], status, answer[:200])
    assert json.loads(sim.call("/health")) == {"status": "ok"}  # still serving
    sim.process.send_signal(2)
    log, _ = sim.process.communicate(timeout=10)  # the simulator's stdout and stderr
    assert "Traceback" not in log and "Exception in ASGI" not in log, log[-3000:]


def test_the_simulator_keeps_the_gateways_body_limits(sim_factory: Callable[..., SimServer]) -> None:
    sim = sim_factory("--ttft-ms", "1", "--itl-ms", "1", "--max-body-bytes", "65536")
    rss_before = psutil.Process(sim.process.pid).memory_info().rss
    # 300 MB declared: refused from the head, before any of it is read
    status, answer = _exchange(sim.root, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: "
                               b"300000000\r\n")
    assert status == 413 and b"--max-body-bytes" in answer, answer
    # 64 MB chunked (no length declared): cut off as it passes the limit
    host, port = sim.root.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=20) as sock:
        sock.sendall(b"POST /tokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        chunk = b"x" * 65536
        try:
            for _ in range(1024):
                sock.sendall(b"10000\r\n" + chunk + b"\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass
        sock.settimeout(10)
        answer = b""
        try:
            while part := sock.recv(65536):
                answer += part
        except (ConnectionResetError, TimeoutError):
            pass
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert psutil.Process(sim.process.pid).memory_info().rss - rss_before < 48 * 1024 * 1024
    # a head over 32 KiB: 431
    status, _ = _exchange(sim.root, b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 40000 + b"\r\n")
    assert status == 431
    # a body that trickles: 408 once body_timeout_s (set at run time) has passed
    sim.call("/sim/config", "PATCH", {"body_timeout_s": 1})
    started = time.monotonic()
    status, answer = _exchange(sim.root, b"POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n", b"{")
    assert status == 408 and 0.9 <= time.monotonic() - started < 10, answer
    assert json.loads(sim.call("/health")) == {"status": "ok"}  # and still serving


def _answer(sim: SimServer, path: str, body: dict[str, Any]) -> tuple[int, str, bytes]:
    """(status, content type, body) of one request, read whole."""
    data = json.dumps(body).encode()
    host, port = sim.root.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(b"POST " + path.encode() + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: "
                     + str(len(data)).encode() + b"\r\n\r\n" + data)
        raw = b""
        while chunk := sock.recv(65536):
            raw += chunk
    head, _, rest = raw.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    fields = dict(line.lower().split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), fields.get("content-type", ""), rest


@pytest.mark.parametrize(("path", "body", "streams"), [
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}]}, False),  # OpenAI: false
    ("/v1/completions", {"prompt": "hi"}, False),
    ("/completion", {"prompt": "hi"}, False),  # llama.cpp: false
    ("/api/chat", {"messages": [{"role": "user", "content": "hi"}]}, True),  # Ollama: true
    ("/generate_stream", {"inputs": "hi"}, True),  # TGI's streaming endpoint: always
])
def test_without_stream_the_simulator_does_what_the_protocol_defaults_to(
        sim_factory: Callable[..., SimServer], path: str, body: dict[str, Any], streams: bool) -> None:
    sim = sim_factory("--ttft-ms", "20", "--itl-ms", "5", "--default-max-tokens", "4")
    status, content_type, answer = _answer(sim, path, body)
    assert status == 200
    if streams:
        assert content_type in ("text/event-stream", "application/x-ndjson"), content_type
        return
    assert content_type == "application/json", content_type
    whole = json.loads(answer)
    text = whole["content"] if path == "/completion" else (
        whole["choices"][0]["message"]["content"] if "chat" in path else whole["choices"][0]["text"])
    assert len(text.split()) == 4
    if path != "/completion":
        assert whole["usage"]["completion_tokens"] == 4
    (trace,) = sim.trace("?last=1")
    assert len(trace["event_ns"]) == 4 and trace["completion_tokens"] == 4
    # the body went when the last token was ready: 20 ms + 3 x 5 ms after the request
    assert (trace["headers_ns"] - trace["received_ns"]) / 1e6 >= 34.0
    # and asked for explicitly, both ways
    status, content_type, _ = _answer(sim, path, {**body, "stream": True})
    assert status == 200 and content_type == "text/event-stream"
    status, content_type, _ = _answer(sim, "/api/chat", {"messages": [{"role": "user", "content": "hi"}],
                                                         "stream": False})
    assert status == 200 and content_type == "application/json"


def test_a_non_ascii_key_matches_the_simulator_in_either_encoding(sim_factory: Callable[..., SimServer]) -> None:
    sim = sim_factory("--ttft-ms", "1", "--itl-ms", "1", "--api-key", KEY)
    body = json.dumps(_CHAT).encode()
    for encoding in ("utf-8", "latin-1"):
        status, answer = _post(sim.root, "/v1/chat/completions", body, _key(encoding))
        assert status == 200, (encoding, answer[:200])
        head = b"GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + _key(encoding)
        assert _exchange(sim.root, head)[0] == 200
    status, _ = _post(sim.root, "/v1/chat/completions", body, b"Authorization: Bearer cle-Schlussel\r\n")
    assert status == 401


def test_mid_stream_faults_of_an_answer_that_is_not_streamed(sim_factory: Callable[..., SimServer]) -> None:
    """The faults a stream shows mid-answer, for a whole answer: what a server whose handler failed sends."""
    sim = sim_factory("--ttft-ms", "1", "--itl-ms", "1", "--fault-schedule", "error_event,malformed,reset,stall",
                      "--stall-s", "0.5", "--fault-after-tokens", "1")
    chat = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    status, content_type, body = _answer(sim, "/v1/chat/completions", chat)
    assert status == 500 and json.loads(body)["error"]["message"] == "simulated engine failure"
    status, content_type, body = _answer(sim, "/v1/chat/completions", chat)
    assert status == 200 and content_type == "application/json"
    with pytest.raises(ValueError):
        json.loads(body)  # cut short
    for _ in ("reset", "stall"):
        status, _, _ = _answer(sim, "/v1/chat/completions", chat)
        assert status == 500
    assert [t["fault"] for t in sim.trace()] == ["error_event:done", "malformed:done", "reset:done", "stall:done"]


def test_an_upstream_key_that_no_header_can_carry_is_refused_at_start(tmp_path: Path) -> None:
    """The gateway's own key to an upstream goes out in a header: non-ASCII there is one line, exit 2, at start."""
    from tests.conftest import run_cli

    config = tmp_path / "gw.toml"
    route = '[[routes]]\nmodel = "m"\nupstreams = ["a"]\n'
    config.write_text(f'[[upstreams]]\nname = "a"\nurl = "http://127.0.0.1:9/v1"\napi_key = "{KEY}"\n{route}')
    done = run_cli("gateway", "--config", str(config), "--check")
    assert done.returncode == 2 and "upstreams.0.api_key: the API key: it holds non-ASCII" in done.stderr, done.stderr
    config.write_text(f'[[upstreams]]\nname = "a"\nurl = "http://127.0.0.1:9/v1"\napi_key_env = "H7_KEY"\n{route}')
    done = run_cli("gateway", "--config", str(config), "--port", "0", env={"H7_KEY": KEY}, timeout=60)
    assert done.returncode == 2 and "$H7_KEY: the API key: it holds non-ASCII" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
