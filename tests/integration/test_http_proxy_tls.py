"""Proxies from the environment and TLS options, through `tokometer bench` and `tokometer gateway`.

The proxy is a real ``tinyproxy`` on loopback (absolute-form requests for http://, CONNECT tunnels
for https://); TLS servers use certificates from ``trustme``'s throw-away CA. The upstream is
`tests.http_servers.RawServer` answering a fixed OpenAI stream (see that module).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import trustme

from tests.conftest import run_cli, start_gateway
from tests.helpers import bench
from tests.http_servers import TOKENS, RawServer, openai_sse, post_stream
from tokometer.engines.process import free_port
from tokometer.util.errors import EndpointError

SSE = b"".join(openai_sse())
_ANSWER = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n%s" % (len(SSE), SSE)
PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "all_proxy",
              "no_proxy")


def _answer(conn: socket.socket) -> None:
    conn.sendall(_ANSWER)


@dataclass
class TinyProxy:
    url: str
    log: Path


@pytest.fixture
def tinyproxy(tmp_path: Path) -> Iterator[TinyProxy]:
    binary = shutil.which("tinyproxy")
    if binary is None:
        if os.environ.get("TOKOMETER_REQUIRE_PROXY"):
            pytest.fail("tinyproxy is not installed (scripts/system-packages installs it)")
        pytest.skip("tinyproxy is not installed")
    port = free_port()
    log = tmp_path / "tinyproxy.log"
    config = tmp_path / "tinyproxy.conf"
    # No ConnectPort line: CONNECT is allowed to any port (our TLS servers listen on random ones).
    config.write_text(f'Port {port}\nListen 127.0.0.1\nTimeout 30\nLogFile "{log}"\nLogLevel Connect\n'
                      "MaxClients 20\nAllow 127.0.0.1\n")
    process = subprocess.Popen([binary, "-d", "-c", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1):
                    pass
            except urllib.error.HTTPError:
                break  # tinyproxy answers a request for itself with an error page: it is up
            except OSError:
                time.sleep(0.05)
        yield TinyProxy(f"http://127.0.0.1:{port}", log)
    finally:
        process.terminate()
        process.wait(10)


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in PROXY_VARS:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def tls_server(ca: trustme.CA) -> Iterator[RawServer]:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1", "localhost").configure_cert(context)
    server = RawServer(_answer, tls=context, close_after=False)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def plain_server() -> Iterator[RawServer]:
    server = RawServer(_answer, close_after=False)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def ca_file(ca: trustme.CA, tmp_path: Path) -> str:
    path = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(path))
    return str(path)


def _bench(url: str, **extra: object) -> dict[str, object]:
    result = bench(url, model="m", concurrency=[1], requests=2, input_tokens=4, output_tokens=4, tokenizer="none",
                   **extra)
    summary = result.steps[0].summary
    return {"completed": summary.requests_completed, "errors": summary.errors,
            "examples": " ".join(summary.error_examples.values()), "tokens": summary.output_tokens_total}


def test_plain_http_goes_through_the_proxy_in_absolute_form(clean_env: pytest.MonkeyPatch, tinyproxy: TinyProxy,
                                                             plain_server: RawServer) -> None:
    clean_env.setenv("HTTP_PROXY", tinyproxy.url)
    assert _bench(plain_server.url) == {"completed": 2, "errors": {}, "examples": "", "tokens": 2 * len(TOKENS)}
    assert plain_server.heads and all(b"\r\nVia: " in head for head in plain_server.heads)  # tinyproxy added it


def test_https_is_tunnelled_with_connect_and_checks_the_target_certificate(
        clean_env: pytest.MonkeyPatch, tinyproxy: TinyProxy, tls_server: RawServer, ca_file: str) -> None:
    clean_env.setenv("HTTPS_PROXY", tinyproxy.url)
    assert _bench(tls_server.url, ca_bundle=ca_file)["completed"] == 2
    assert f"CONNECT 127.0.0.1:{tls_server.port}" in tinyproxy.log.read_text() or \
        f"127.0.0.1:{tls_server.port}" in tinyproxy.log.read_text()
    assert all(b"\r\nVia: " not in head for head in tls_server.heads)  # end-to-end TLS: the proxy saw no request
    with pytest.raises(EndpointError, match="certificate verify failed"):  # the proxy does not vouch for it
        _bench(tls_server.url)


def test_no_proxy_bypasses_and_a_dead_proxy_is_named(clean_env: pytest.MonkeyPatch, plain_server: RawServer) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    clean_env.setenv("HTTP_PROXY", dead)
    clean_env.setenv("NO_PROXY", "localhost,127.0.0.1")
    assert _bench(plain_server.url)["completed"] == 2
    clean_env.delenv("NO_PROXY")
    # The bench's own reachability probe goes through the same proxy and says so first.
    done = run_cli("bench", "--url", plain_server.url, "--model", "m", "-n", "1", "--tokenizer", "none",
                   env={"HTTP_PROXY": dead, "NO_PROXY": ""})
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_unsupported_proxy_scheme_is_one_line(clean_env: pytest.MonkeyPatch, plain_server: RawServer) -> None:
    done = run_cli("bench", "--url", plain_server.url, "--model", "m", "-n", "1", "--tokenizer", "none",
                   env={"ALL_PROXY": "socks5://127.0.0.1:1080", "NO_PROXY": ""})
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "only http:// proxies are supported" in done.stderr and "ALL_PROXY" in done.stderr, done.stderr


def test_bench_tls_options(clean_env: pytest.MonkeyPatch, tls_server: RawServer, ca_file: str, tmp_path: Path) -> None:
    assert _bench(tls_server.url, ca_bundle=ca_file)["completed"] == 2
    with pytest.raises(EndpointError, match=r"certificate verify failed.*--ca-bundle"):  # before measuring
        _bench(tls_server.url)
    out = tmp_path / "run.json"
    done = run_cli("bench", "--url", tls_server.url, "--model", "m", "-n", "2", "--tokenizer", "none", "--insecure",
                   "--no-store", "--json", str(out))
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    assert result["steps"][0]["summary"]["requests_completed"] == 2
    assert any("certificate checks are off" in w for w in result["warnings"])
    done = run_cli("bench", "--url", tls_server.url, "--model", "m", "-n", "2", "--tokenizer", "none",
                   "--ca-bundle", ca_file, "--no-store")
    assert done.returncode == 0, done.stderr


def test_gateway_tls_options_and_proxy(clean_env: pytest.MonkeyPatch, tls_server: RawServer, ca_file: str,
                                       tinyproxy: TinyProxy, tmp_path: Path) -> None:
    def config(extra: str) -> Path:
        path = tmp_path / "gw.toml"
        path.write_text(f'[cache]\nenabled = false\n[[upstreams]]\nname = "tls"\nurl = "{tls_server.url}"\n'
                        f'retries = 0\n{extra}\n[[routes]]\nmodel = "m"\nupstreams = ["tls"]\n')
        return path

    gw = start_gateway(config(f'ca_bundle = "{ca_file}"'))
    try:
        status, body = post_stream(gw.openai_url, "m")
        assert status == 200 and b'" delta"' in body
    finally:
        gw.stop()
    gw = start_gateway(config(""))
    try:
        status, body = post_stream(gw.openai_url, "m")
        message = json.loads(body)["error"]["message"]
        assert status >= 500 and "certificate verify failed" in message, message
    finally:
        gw.stop()
    check = run_cli("gateway", "--config", str(config("verify = false")), "--check")
    assert check.returncode == 0 and "TLS certificate checks are off" in check.stderr, check.stderr
    bad = run_cli("gateway", "--config", str(config('ca_bundle = "/no/such/ca.pem"')), "--check")
    assert bad.returncode == 2 and "CA bundle" in bad.stderr and "Traceback" not in bad.stderr, bad.stderr
    # Through the proxy, from the gateway process's environment.
    clean_env.setenv("HTTPS_PROXY", tinyproxy.url)  # start_gateway passes the environment on
    gw = start_gateway(config(f'ca_bundle = "{ca_file}"'))
    try:
        status, body = post_stream(gw.openai_url, "m")
        assert status == 200 and b'" delta"' in body
    finally:
        gw.stop()
    assert f"127.0.0.1:{tls_server.port}" in tinyproxy.log.read_text()
